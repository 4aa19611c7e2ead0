"""Write every report format from the result model; each format has its own module."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from coursekit.lab import Lab
from grader.model import SubmissionResult
from grader.report import exercism, gradebook, gradescope, html, junit


def write_submission_reports(directory: Path, result: SubmissionResult) -> None:
    """All of one submission's files appear together or not at all."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    (staging / "result.json").write_text(result.to_json(), encoding="utf-8")
    (staging / "gradescope").mkdir()
    (staging / "gradescope" / "results.json").write_text(gradescope.render(result), "utf-8")
    (staging / "exercism").mkdir()
    (staging / "exercism" / "results.json").write_text(exercism.render(result), "utf-8")
    (staging / "junit.xml").write_text(junit.render(result), encoding="utf-8")
    old = None
    if directory.exists():
        old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
        directory.rename(old)
    staging.rename(directory)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_class_reports(out: Path, lab: Lab, results: list[SubmissionResult]) -> None:
    _write_atomic(out / "gradebook.csv", gradebook.render(lab, results))
    _write_atomic(out / "report.html", html.render(lab, results))


def _write_atomic(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)
