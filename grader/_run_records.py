"""What a sandboxed run's records say besides the scores: a judge that failed, signs of
tampering, a student's process that ended early."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from grader import _sandbox


class JudgeFailed(Exception):
    """The judge's pytest (trusted code that never imports the student's) failed itself."""


# pytest's exit statuses for its own failures: an error inside pytest or a plugin, a
# command line it could not use. No student code runs in the judge, so either is ours.
_JUDGE_FAILURES = {3: "an internal error", 4: "a usage error"}


def check_the_judge(outcome: _sandbox.RunOutcome) -> None:
    """A judge that failed, or ended having decided no test at all, is the grader's error
    (tried again, then recorded as such), never a silent score of zero."""
    status = _exit_status(outcome)
    decided = any(r.get("type") == "test" for r in outcome.records)
    failure = _JUDGE_FAILURES.get(status) if status is not None else None
    if failure is not None or (outcome.ended and not decided):
        tail = " | ".join(outcome.output_tail.strip().splitlines()[-3:])
        raise JudgeFailed(
            f"the judge's pytest ended with exit status {status} "
            f"({failure or 'no test decided'}): {tail}"
        )


def run_flags(outcome: _sandbox.RunOutcome) -> list[str]:
    """What the run itself shows of tampering with the grader's channel or pytest."""
    flags = []
    if outcome.forged:
        flags.append(f"{outcome.forged} forged record(s) on the grader's channel")
    tamper = [w for r in outcome.records if r.get("type") == "tamper" for w in r["what"]]
    if tamper:
        flags.append("changed at run time: " + ", ".join(tamper))
    seen = [r["nodeid"] for r in outcome.records if r.get("type") == "test"]
    if len(seen) != len(set(seen)):
        flags.append("the grader's channel carried two records for one test")
    for hosted in _hosted(outcome):
        if hosted["wrong_canaries"] or hosted["forged"]:
            flags.append(
                "the tests run in the student's own process reported forged outcomes "
                f"({hosted['wrong_canaries']} canary test(s) that must fail did not, "
                f"{hosted['forged']} report(s) for tests not run there)"
            )
    return flags


def host_ended(outcome: _sandbox.RunOutcome) -> int | None:
    """The exit code of the student's process when it ended before the judge was done."""
    return next((r["exit_code"] for r in outcome.records if r.get("type") == "host"), None)


def host_stalled(outcome: _sandbox.RunOutcome) -> bool:
    """The in-host run could not go on: the student's process stopped answering the judge's
    batches (one never taken, or no answer within two tests' timeouts), or left no room to
    start the in-host pytest again. The judge then ran no more tests there."""
    return any(r.get("stalled") is True for r in _hosted(outcome))


CUT_SHORT = "the tests run in the student's own process ended before they all ran"


def host_cut_short(outcome: _sandbox.RunOutcome) -> str | None:
    """How the in-host pytest ended when tests sent to it were never run, second start
    included (hosted.py); None when every batch ran to its end or stalled (said apart)."""
    cut = [r for r in _hosted(outcome) if r.get("cut") is True and r.get("stalled") is not True]
    return _ends([code for r in cut for code in r["ended"]]) if cut else None


def restart_notes(outcome: _sandbox.RunOutcome) -> list[str]:
    """For review, no effect on the score: the in-host pytest ended during a batch that
    then ran to its end when started once more."""
    codes = [code for r in _hosted(outcome) if r.get("cut") is False for code in r["ended"]]
    if not codes:
        return []
    return [f"{CUT_SHORT} ({_ends(codes)}) and ran to the end when started once more"]


def _hosted(outcome: _sandbox.RunOutcome) -> list[dict[str, Any]]:
    return [r for r in outcome.records if r.get("type") == "hosted"]


def _ends(codes: list[int | None]) -> str:
    return ", then ".join(_end(code) for code in codes) or "it ended unseen"


def _end(code: int | None) -> str:
    if code is None:
        return "it closed the judge's pipe and ran on"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def judge_interrupted(outcome: _sandbox.RunOutcome) -> bool:
    """pytest's exit status 2: the judge was interrupted. Nothing but the student's own
    process (the judge's child) is placed to signal it."""
    return _exit_status(outcome) == 2


def _exit_status(outcome: _sandbox.RunOutcome) -> int | None:
    """The judge's pytest exit status, from its last record; None if it never sent one."""
    end = next((r for r in outcome.records if r.get("type") == "end"), None)
    status = end.get("exitstatus") if end is not None else None
    return status if isinstance(status, int) else None
