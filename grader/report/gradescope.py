"""Gradescope autograder results.json: one entry per test, each with its score.

There is no top-level ``score`` on purpose: Gradescope's format lets it override the tests'
total, and the total must keep the extra credit of bonus tests (``max_score`` 0)."""

from __future__ import annotations

import json

from grader.model import SubmissionResult


def render(result: SubmissionResult) -> str:
    optional = {s.stage for s in result.stages if s.optional}
    tests = [
        {
            "name": f"[{t.stage}{_kind(t.stage in optional, t.challenge)}] {t.name}",
            "number": f"{t.stage}.{index}",
            "score": t.points,
            # Bonus tests are extra credit: Gradescope adds their points above max_score.
            "max_score": 0 if t.challenge or t.stage in optional else t.max_points,
            "status": "passed" if t.status == "passed" else "failed",
            "output": t.message or "passed",
            "visibility": "visible",
        }
        for index, t in enumerate(result.tests, start=1)
    ]
    output = f"Status: {result.status}." + (f" {result.reason}" if result.reason else "")
    output += (
        f" Bonus (challenge tests and optional stages): {result.bonus:g} of {result.max_bonus:g}."
    )
    for diagnosis in result.diagnoses:
        output += f"\nStage {diagnosis.stage}: {diagnosis.text}"
    return json.dumps(
        {
            "output": output,
            "execution_time": result.seconds,
            "tests": tests,
        },
        indent=2,
        ensure_ascii=False,
    )


def _kind(optional: bool, challenge: bool) -> str:
    return (" optional" if optional else "") + (" challenge" if challenge else "")
