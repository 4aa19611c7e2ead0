"""A grading run that is killed resumes: graded input is kept, nothing is lost or doubled."""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coursekit.layout import COURSE_ROOT
from tests.grader.graded_class import solved_modules

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_a_rerun_skips_graded_input_and_survives_a_kill(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    # Stage 8.2 alone: what is checked here is which input is graded, not how well, and
    # 8.1's reference run (64 MB files among others) would add to each of seven gradings.
    for name in ("ann", "ben", "cy"):
        solved_modules(submissions / name, ["8.2"])
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "grader",
        "grade",
        str(submissions),
        "--out",
        str(out),
        "-j",
        "1",
    ]
    grader = subprocess.Popen(
        command,
        cwd=COURSE_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not (out / "submissions" / "ann" / "result.json").exists():
        assert time.monotonic() < deadline and grader.poll() is None, "no first result"
        time.sleep(0.05)
    os.killpg(grader.pid, signal.SIGKILL)  # mid-run, while ben is being graded
    grader.wait()
    result = out / "submissions/ann/result.json"
    first = result.stat().st_ino
    rerun = subprocess.run(command, cwd=COURSE_ROOT, capture_output=True, text=True, check=True)
    assert "ann" in rerun.stdout
    assert result.stat().st_ino == first, "ann's unchanged input was not graded again"
    assert sorted(p.name for p in (out / "submissions").iterdir()) == ["ann", "ben", "cy"]
    students = [
        r["student"] for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))
    ]
    assert students == ["ann", "ben", "cy"], "nothing lost, nothing duplicated"
    # ann alone in the folder: --regrade grades her again, unchanged, and keeps the class.
    for late in ("ben", "cy"):
        shutil.rmtree(submissions / late)
    subprocess.run([*command, "--regrade"], cwd=COURSE_ROOT, capture_output=True, check=True)
    assert result.stat().st_ino != first, "--regrade grades again"
    assert (out / "submissions/ben/result.json").is_file(), "the class is kept"
