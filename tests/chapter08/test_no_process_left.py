"""A red Lab 8.5 run leaves no process behind: not with a hanging implementation, not after
`practice.py break`. Everything a run starts works in, or names, a directory under the
test's own TMPDIR, so that is where leftovers are looked for (other runs on the machine
may use the same sample programs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT
from coursekit.runner import run_stage_tests
from tests.chapter08.labrun import build, run_beside_the_stubs

LAB = load_lab("08")
# A hanging implementation takes each stuck test to its deadline (15 s) before failing.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def processes_under(directory: Path) -> list[str]:
    root = str(directory.resolve())
    found = []
    for process in psutil.process_iter(["cwd", "cmdline", "status"]):
        info = process.info
        if info["status"] == psutil.STATUS_ZOMBIE:
            continue
        places = [(info["cwd"] or "").removesuffix(" (deleted)"), *(info["cmdline"] or [])]
        if process.pid != os.getpid() and any(p.startswith(root) for p in places):
            found.append(f"{process.pid} {' '.join(info['cmdline'] or [])}")
    return found


def test_a_red_run_of_a_hanging_implementation_leaves_no_process(
    practice_base: Path, tmp_path: Path
) -> None:
    hang = next(m for m in LAB.stage("8.5").mutants if m.name == "wait-for-the-pipes")
    directory = build(LAB, practice_base, tmp_path / "hanging", [s.id for s in LAB.stages], hang)
    run = run_stage_tests(directory, [LAB.stage("8.5")], extra=(f"--basetemp={tmp_path / 'runs'}",))
    failed = [o for o in run.outcomes if not o.passed]
    assert failed, "the hanging implementation must be red"
    assert "INTERNALERROR" not in run.output, run.output[-3000:]
    hung = [o for o in failed if "did not finish within" in o.message]
    assert hung and all("background child" in o.message for o in hung), (
        "a hang must fail with the deadline message that names the pipes as the likely cause: "
        + "; ".join(o.message[:200] for o in failed)
    )
    assert processes_under(tmp_path) == []


def test_break_kill_only_the_shell_leaves_no_process(tmp_path: Path) -> None:
    directory = tmp_path / "practice"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    practice = [sys.executable, str(COURSE_ROOT / "practice.py")]
    subprocess.run(
        [*practice, "08", str(directory)], check=True, capture_output=True, env=env, timeout=300
    )
    result = subprocess.run(
        [*practice, "break", "8.5", "kill-only-the-shell"],
        cwd=directory,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0 and "Caught" in result.stdout, result.stdout + result.stderr
    assert processes_under(tmp_path) == []


def test_a_read_that_blocks_the_event_loop_on_a_fifo_is_released_and_told_why(
    practice_base: Path, tmp_path: Path
) -> None:
    # The demo's partial read opens the file on the event loop itself (no thread, no
    # O_NONBLOCK): on a FIFO no deadline the loop runs can fire. The lab helper releases the
    # FIFO from a thread of its own, so each such test fails at once with its cause (not
    # after the watchdog's deadline, and never with pytest-timeout's bare "Timeout").
    partial = COURSE_ROOT / "grader/examples/submissions/partial" / LAB.stage("8.1").modules[0]
    directory = build(LAB, practice_base, tmp_path / "blocking", [])
    (directory / LAB.stage("8.1").modules[0]).write_bytes(partial.read_bytes())
    run = run_stage_tests(directory, [LAB.stage("8.1")], extra=("-k", "fifo"))
    assert len(run.outcomes) >= 3 and not any(o.passed for o in run.outcomes), run.output[-3000:]
    for outcome in run.outcomes:
        assert "waited" in outcome.message and "FIFO" in outcome.message, outcome.message[:500]
        assert "blocked the event loop" not in outcome.message, outcome.message[:500]
        assert "Timeout" not in outcome.message, outcome.message[:500]
    assert processes_under(tmp_path) == []


BLOCKS_THE_LOOP = """
import os

from lab_helpers import run


def test_a_fifo_opened_on_the_loop_with_nothing_to_release_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    async def blocking():
        with open(fifo, "rb") as file:  # no writer ever comes
            return file.read()

    run(blocking())
"""


def test_a_call_that_blocks_the_event_loop_fails_with_its_cause_before_pytest_timeout(
    practice_base: Path, tmp_path: Path
) -> None:
    # Where no test knows what to release, the helper's watchdog still ends the call, with
    # the cause, before pytest-timeout's bare "Timeout".
    run = run_beside_the_stubs(LAB, practice_base, tmp_path, "test_blocks.py", BLOCKS_THE_LOOP)
    (outcome,) = run.outcomes
    assert not outcome.passed
    assert "blocked the event loop itself" in outcome.message, outcome.message[:500]
    assert "Timeout" not in outcome.message, outcome.message[:500]
    assert processes_under(tmp_path) == []
