"""Credit earned before a submission hangs or crashes is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import GradeOptions, grade_submissions
from grader._sandbox import Limits
from tests.grader.graded_class import LAB, gradebook, solved_modules

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


# Stage 8.3's write.py, hanging in whichever of its functions a test calls first. Stages
# 8.1 and 8.2 take a few seconds: the wall below leaves them room on a loaded machine and
# stays short, since the test waits it out.
HANGING_WRITE = """
import time


def _hang():
    while True:  # swallows the per-test timeout too
        try:
            time.sleep(0.1)
        except BaseException:
            pass


async def write_file(options, path, content):
    _hang()


def write_atomic(path, data):
    _hang()
"""


def test_a_timeout_keeps_the_credit_of_finished_stages(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    student = solved_modules(submissions / "slowpoke", ["8.1", "8.2"])
    (student / LAB.stage("8.3").modules[0]).write_text(HANGING_WRITE)  # write.py
    out = tmp_path / "out"
    grade_submissions(submissions, out, GradeOptions(jobs=1, limits=Limits(wall_seconds=60)))
    row = gradebook(out)["slowpoke"]
    assert row["status"] == "timeout"
    assert float(row["total"]) == 35.0, "stages 8.1 and 8.2 finished before the hang in 8.3"
    assert float(row["stage 8.3"]) == 0


CRASHING_AGENT = """
import os
import signal


def build_system_prompt(cwd, tools):
    return ""


async def run_coding_agent(model, cwd, task, **options):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_crash_keeps_the_credit_earned_before_it(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    # Stages 8.1 and 8.2, judged, and 8.3, most of whose tests run in the host: both kinds
    # of credit earned before the crash are kept.
    student = solved_modules(submissions / "crasher", ["8.1", "8.2", "8.3"])
    (student / LAB.stage("8.6").modules[0]).write_text(CRASHING_AGENT)
    out = tmp_path / "out"
    grade_submissions(submissions, out, GradeOptions(jobs=1))
    row = gradebook(out)["crasher"]
    assert row["status"] == "crashed" and "ended early" in row["reason"]
    assert float(row["total"]) == 55.0, "stages 8.1-8.3 passed before the crash"
