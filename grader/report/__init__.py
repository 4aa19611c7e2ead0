"""Write every report format from the result model; each format has its own module."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from coursekit.lab import Lab
from grader.model import Skipped, SubmissionResult
from grader.report import exercism, gradebook, gradescope, html, junit


def write_submission_reports(directory: Path, result: SubmissionResult) -> None:
    """All of one submission's files appear together or not at all."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Random names, never the student's: a long or odd name must not break the temporary ones.
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=directory.parent))
    try:
        (staging / "result.json").write_text(result.to_json(), encoding="utf-8")
        (staging / "gradescope").mkdir()
        (staging / "gradescope" / "results.json").write_text(gradescope.render(result), "utf-8")
        (staging / "exercism").mkdir()
        (staging / "exercism" / "results.json").write_text(exercism.render(result), "utf-8")
        (staging / "junit.xml").write_text(junit.render(result), encoding="utf-8")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = None
    if directory.exists():
        old = Path(tempfile.mkdtemp(prefix=".old-", dir=directory.parent)) / "result"
        directory.rename(old)
    staging.rename(directory)
    if old is not None:
        shutil.rmtree(old.parent, ignore_errors=True)


def write_class_reports(
    out: Path, lab: Lab, results: list[SubmissionResult], skipped: Sequence[Skipped] = ()
) -> None:
    _write_atomic(out / "gradebook.csv", gradebook.render(lab, results))
    _write_atomic(out / "report.html", html.render(lab, results, skipped))


def _write_atomic(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)
