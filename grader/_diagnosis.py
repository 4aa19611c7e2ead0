"""Name the catalogued mistake each stage's failures look like, for the instructor's
reports and the student's feedback (the matching itself is coursekit.mistakes)."""

from __future__ import annotations

from pathlib import Path

from coursekit.lab import Lab
from coursekit.mistakes import diagnose, load_signatures
from grader.model import Diagnosed, SubmissionResult


class Diagnoser:
    """Loads the release's signatures once, for the pristine tests every job runs."""

    def __init__(self, lab: Lab, pristine_tests: Path) -> None:
        self.lab = lab
        self.signatures = load_signatures(lab, pristine_tests)

    def __call__(self, result: SubmissionResult) -> list[Diagnosed]:
        if self.signatures is None or result.status in ("invalid", "flagged"):
            return []
        found = []
        for stage in self.lab.stages:
            tests = [test for test in result.tests if test.stage == stage.id]
            if any(test.status == "not run" for test in tests):
                continue  # the run stopped before the stage was seen whole: no guess
            failures = [(test.nodeid, test.message) for test in tests if test.status == "failed"]
            diagnosis = diagnose(stage, failures, self.signatures)
            if diagnosis is not None:
                found.append(
                    Diagnosed(
                        stage.id,
                        [m.name for m in diagnosis.mistakes],
                        diagnosis.text,
                        round(diagnosis.similarity, 3),
                    )
                )
        return found
