"""Gradescope autograder results.json (score, max_score, one entry per test)."""

from __future__ import annotations

import json

from grader.model import SubmissionResult


def render(result: SubmissionResult) -> str:
    tests = [
        {
            "name": f"[{t.stage}{' challenge' if t.challenge else ''}] {t.name}",
            "number": f"{t.stage}.{index}",
            "score": t.points,
            "max_score": 0 if t.challenge else t.max_points,
            "status": "passed" if t.status == "passed" else "failed",
            "output": t.message or "passed",
            "visibility": "visible",
        }
        for index, t in enumerate(result.tests, start=1)
    ]
    output = f"Status: {result.status}." + (f" {result.reason}" if result.reason else "")
    output += f" Bonus (challenge tests): {result.bonus:g} of {result.max_bonus:g}."
    return json.dumps(
        {
            "score": result.score,
            "max_score": result.max_score,
            "output": output,
            "execution_time": result.seconds,
            "tests": tests,
        },
        indent=2,
        ensure_ascii=False,
    )
