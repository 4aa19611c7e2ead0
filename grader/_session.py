"""One grading run's shared state, and the grading of one submission in it.

The run shares the pristine copy, the test inventory, the pool of unprivileged users and the
store; each submission is taken, scanned, run sandboxed beside the judge, and given the
status its run earned (flagged, timeout, crashed, graded), with the credit a flagged run
would have earned held for review.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from coursekit.lab import Lab
from coursekit.layout import SCAFFOLD
from grader import _sandbox
from grader._diagnosis import Diagnoser
from grader._intake import InvalidSubmission, Submission, take
from grader._pristine import make_pristine
from grader._run_records import (
    CUT_SHORT,
    check_the_judge,
    host_cut_short,
    host_ended,
    host_stalled,
    judge_interrupted,
    restart_notes,
    run_flags,
)
from grader._scan import ScanReport, scan
from grader._scoring import InventoryItem, score
from grader._store import ResultStore
from grader._stubbed import stages_on_their_stubs, with_stub_records
from grader.model import Status, SubmissionResult, truncate

# The isolation of a submission whose every stage is still its stub: nothing of it ran.
NOTHING_RAN = "none needed: every stage is still its stub (nothing ran)"
# CPython gh-106905: ast.parse in two threads at once can crash the interpreter (3.11, 3.12).
_SCAN_LOCK = threading.Lock()


@dataclass
class GradingSession:
    """What every submission of one grading run shares: the pristine copy, the test
    inventory, the pool of unprivileged users and the store of trusted results."""

    lab: Lab
    sandbox: _sandbox.SandboxMode
    limits: _sandbox.Limits
    staging: Path
    pristine: Path
    inventory: list[InventoryItem]
    key: str
    users: _sandbox.UserPool
    store: ResultStore
    diagnose: Diagnoser

    @classmethod
    def start(
        cls,
        lab: Lab,
        sandbox: _sandbox.SandboxMode,
        limits: _sandbox.Limits,
        staging: Path,
        users: _sandbox.UserPool,
        store: ResultStore,
    ) -> GradingSession:
        with users.user() as user:  # refuse now, not once per submission
            _sandbox.require_sandbox(sandbox, limits, user)
        # Traversable but not listable: a job's unprivileged user reaches its own directory
        # without seeing its neighbours' names.
        staging.chmod(0o711)
        pristine = staging / "pristine"
        key = grading_key(lab)
        inventory = make_pristine(lab, pristine, key)  # compiled for every job
        _sandbox.share_read_only(pristine)  # mounted read-only into every sandboxed run
        return cls(
            lab,
            sandbox,
            limits,
            staging,
            pristine,
            inventory,
            key,
            users,
            store,
            Diagnoser(lab, pristine / "tests"),
        )

    def grade(self, submission: Submission) -> SubmissionResult:
        """Always a result: the student's failures as theirs, the grader's as ``error``."""
        started = time.monotonic()
        digest = ""  # a refused submission is looked at again on every run
        for attempt in (1, 2):
            try:
                result, credited, digest = self._attempt(submission)
                if credited is not None:
                    credited.input_digest, credited.grading_key = digest, self.key
                    self.store.hold(submission.student, credited)
                break
            except InvalidSubmission as error:
                result = self._unscored(submission, "invalid", str(error))
                break
            except _sandbox.SandboxError:
                raise  # the instructor's configuration: no submission can be graded
            except Exception as error:  # noqa: BLE001 - any other failure is the grader's
                failure = f"{type(error).__name__}: {error}"
                result = self._unscored(
                    submission,
                    "error",
                    f"the grader failed twice, not the student ({failure}); the next run "
                    "grades this submission again",
                )
                if attempt == 1:
                    continue
        result.input_digest, result.grading_key = digest, self.key
        result.diagnoses = self.diagnose(result)
        result.seconds = round(time.monotonic() - started, 2)
        return result

    def _attempt(
        self, submission: Submission
    ) -> tuple[SubmissionResult, SubmissionResult | None, str]:
        """The result, the credit held for review, and the digest of what was graded."""
        # A random name: a student's name never reaches a path the job sees (PYTHONPATH).
        scratch = Path(tempfile.mkdtemp(prefix="job-", dir=self.staging))
        try:
            scratch.chmod(0o711)
            taken = take(submission, self.lab, scratch)  # read once, by descriptors
            with self.users.user() as user:
                return (*self._grade(submission, taken.modules, scratch, user), taken.digest)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _unscored(self, submission: Submission, status: Status, reason: str) -> SubmissionResult:
        result = SubmissionResult(submission.student, status, reason, "none")
        result.stages, result.tests, result.bonus, result.max_bonus = score(
            self.lab, self.inventory, [], credit=False
        )
        return result

    def _grade(
        self,
        submission: Submission,
        modules: dict[str, bytes],
        scratch: Path,
        user: _sandbox.JobUser | None,
    ) -> tuple[SubmissionResult, SubmissionResult | None]:
        """The result, and for a flagged run the credit it earned, held for review."""
        findings = _scan(modules)
        flags = list(findings.verdict)
        limits = self.limits
        stubbed = stages_on_their_stubs(self.lab, self.pristine, modules)
        outcome = self._run(
            modules, [s.tests for s in self.lab.stages if s.id not in stubbed], scratch, user
        )
        flags += run_flags(outcome)
        records, unrun = with_stub_records(outcome.records, self.inventory, stubbed)
        if unrun:
            flags.append(f"{unrun} record(s) for tests that were never run")
        credited = None
        stages, tests, bonus, max_bonus = score(self.lab, self.inventory, records, credit=not flags)
        result = SubmissionResult(
            submission.student, "graded", "", outcome.isolation, stages, tests, bonus, max_bonus
        )
        if flags:
            would, tests, bonus, max_bonus = score(self.lab, self.inventory, records, credit=True)
            credited = SubmissionResult(
                submission.student,
                "graded",
                truncate("released after review of: " + "; ".join(flags), 2000),
                outcome.isolation,
                would,
                tests,
                bonus,
                max_bonus,
            )
            result.status = "flagged"
            result.reason = truncate(
                "; ".join(flags) + " (the run itself passed tests worth "
                f"{sum(s.score for s in would):g} points; no credit until reviewed)",
                2000,
            )
        elif outcome.timed_out:
            result.status = "timeout"
            result.reason = (
                f"stopped after the wall limit of {limits.wall_seconds:g}s; "
                "tests that passed before it still count"
            )
        elif host_ended(outcome) is not None:
            result.status = "crashed"
            result.reason = (
                f"the student's process ended early (exit code {host_ended(outcome)}); "
                "tests that passed before it still count"
            )
        elif host_stalled(outcome):
            result.status = "crashed"
            result.reason = (
                "the tests run in the student's own process could not go on (it stopped "
                "answering them: code that blocks or turns off pytest's timeout; or it left "
                "no room to start the process that runs them), so those tests earn nothing; "
                "tests that passed before it and the judge's own still count"
            )
        elif (cut := host_cut_short(outcome)) is not None:
            result.status = "crashed"
            result.reason = (
                f"{CUT_SHORT} ({cut}), so those not run earn nothing; tests that passed "
                "before it and the judge's own still count"
            )
        elif judge_interrupted(outcome):
            result.status = "crashed"
            result.reason = (
                "the judge was interrupted before it finished (a signal from the student's "
                "process); tests that passed before it still count"
            )
        elif not outcome.ended:
            result.status = "crashed"
            tail = outcome.output_tail.strip().splitlines()[-3:]
            result.reason = truncate(
                f"the test process ended early (exit code {outcome.exit_code}); tests that "
                "passed before it still count. Last output (the student's code writes there too): "
                + " | ".join(tail),
                2000,
            )
        elif notes := findings.notes + restart_notes(outcome):
            result.reason = truncate(
                "for review, no effect on the score: " + "; ".join(notes), 2000
            )
        return result, credited

    def _run(
        self,
        modules: dict[str, bytes],
        test_files: list[str],
        scratch: Path,
        user: _sandbox.JobUser | None,
    ) -> _sandbox.RunOutcome:
        """The judge's run of ``test_files`` beside the student's ``modules``; with no file to
        run (every stage still its stub), no run at all: no student code differs from the
        stubs, and the stubs' failures are recorded without it."""
        if not test_files:
            return _sandbox.RunOutcome(NOTHING_RAN, [{"type": "end", "exitstatus": 1}])
        judge = _sandbox.Judge(self.pristine, student_modules(self.lab), modules, tuple(test_files))
        outcome = _sandbox.run_tests(
            scratch / "work", scratch, self.limits, self.sandbox, user, judge
        )
        if not outcome.records and not outcome.timed_out:
            # Not one record, not even the plugin's first: the test process never started
            # (a sandbox or system failure), so no student code ran.
            raise _JobNeverStarted(
                f"the test process ended before pytest started (exit code {outcome.exit_code}): "
                + " | ".join(outcome.output_tail.strip().splitlines()[-3:])
            )
        check_the_judge(outcome)
        return outcome


def _scan(modules: dict[str, bytes]) -> ScanReport:
    with _SCAN_LOCK:
        return scan(modules)


class _JobNeverStarted(Exception):
    """The sandbox or the system failed before the tests began."""


def student_modules(lab: Lab) -> list[str]:
    """``src/picourse/coding_tools/read.py`` -> ``picourse.coding_tools.read``."""
    return [
        Path(module).relative_to("src").with_suffix("").as_posix().replace("/", ".")
        for module in lab.lab_modules
    ]


def grading_key(lab: Lab) -> str:
    """Changes whenever anything that decides a grade changes: tests, weights, scaffold,
    grader. A rerun regrades every submission graded under another key."""
    hasher = hashlib.sha256()
    roots = [lab.tests_dir, lab.root / "lab.toml", SCAFFOLD, Path(__file__).parent]
    for root in roots:
        for path in sorted(root.rglob("*") if root.is_dir() else [root]):
            if path.is_file() and "__pycache__" not in path.parts:
                hasher.update(path.read_bytes())
    return hasher.hexdigest()[:16]
