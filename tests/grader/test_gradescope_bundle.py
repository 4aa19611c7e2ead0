"""The Gradescope export: the bundle grades one submission as Gradescope runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from coursekit.layout import COURSE_ROOT
from tests.grader.graded_class import LAB, solved_modules

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
SOLVED = ["8.1", "8.2", "8.7"]


def test_the_gradescope_bundle_grades_one_submission(tmp_path: Path) -> None:
    bundle = tmp_path / "autograder.zip"
    subprocess.run(
        [sys.executable, "-m", "grader", "export", "gradescope", "--out", str(bundle)],
        cwd=COURSE_ROOT,
        check=True,
        capture_output=True,
    )
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)
        assert not any(name.startswith("source/solutions") for name in names)
        archive.extractall(root)
    # Two core stages, their challenge tests and an optional stage (which needs no more of
    # the core than these): every kind of credit, at a third of a whole solution's run.
    solved_modules(root / "submission", SOLVED)
    (root / "run_autograder").chmod(0o755)
    env = {**os.environ, "GRADER_AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(root / "run_autograder")],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    results = json.loads((root / "results" / "results.json").read_text())
    assert "score" not in results, "a top-level score would drop the extra credit"
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(100)
    weights = sum(LAB.stage(s).weight for s in SOLVED)
    challenges = [t for t in results["tests"] if "challenge]" in t["name"]]
    solved = [t for t in challenges if t["name"].startswith(tuple(f"[{s} " for s in SOLVED))]
    assert solved and all(t["score"] == 1 and t["max_score"] == 0 for t in solved)
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(weights + len(solved)), (
        "every test of the solved stages, the optional one and their challenge tests on top"
    )
    optional = sum(LAB.stage(s).weight for s in SOLVED if LAB.stage(s).optional)
    assert optional > 0 and weights - optional < 100, "the bonus is on top of a partial core"
    assert len(results["tests"]) > 90
    assert all(
        t["status"] in ("passed", "failed") and t["visibility"] == "visible"
        for t in results["tests"]
    )
