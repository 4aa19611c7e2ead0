"""The project's own scheduling: every grader test runs on one xdist worker, whatever
pytest-xdist's ``loadgroup`` does with the pytest at hand (tests/conftest.py)."""

from __future__ import annotations

import re
import subprocess
import sys

from coursekit.layout import COURSE_ROOT

# Fast grader tests of two modules, beside fast tests of another folder.
GRADER = ["tests/grader/test_results_store.py", "tests/grader/test_reports.py"]
OTHER = ["tests/runtime/test_tool.py"]


def test_grader_tests_share_one_worker_and_the_rest_spread() -> None:
    options = ("-v", "-p", "no:cacheprovider", "-n", "2")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", *options, *GRADER, *OTHER],
        cwd=COURSE_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    workers: dict[str, set[str]] = {"grader": set(), "other": set()}
    for worker, nodeid in re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", completed.stdout):
        workers["grader" if nodeid.startswith("tests/grader/") else "other"].add(worker)
    assert len(workers["grader"]) == 1, (
        f"grader tests ran on {sorted(workers['grader'])}: two grader runs at once cut into "
        "each other's wall limits (see _GraderTestsOnOneWorker in tests/conftest.py)"
    )
    assert workers["other"], completed.stdout[-3000:]
