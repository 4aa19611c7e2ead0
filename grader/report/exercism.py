"""Exercism test-runner results.json, version 3 (task_id is the stage's position)."""

from __future__ import annotations

import json

from grader.model import SubmissionResult


def render(result: SubmissionResult) -> str:
    task_of = {stage.stage: number for number, stage in enumerate(result.stages, start=1)}
    # The diagnosis goes with the first failing test of its stage, where the student looks.
    told = {d.stage: d.text for d in result.diagnoses}
    diagnosed_at = {}
    for test in result.tests:
        if test.status != "passed" and test.stage in told and test.stage not in diagnosed_at:
            diagnosed_at[test.stage] = test.nodeid
    message: str | None
    if result.status in ("invalid", "crashed", "flagged", "error"):
        status, message = "error", result.reason
    else:
        status = (
            "pass" if all(t.status == "passed" for t in result.tests if not t.challenge) else "fail"
        )
        message = result.reason or None
    return json.dumps(
        {
            "version": 3,
            "status": status,
            "message": message,
            "tests": [
                {
                    "name": t.name,
                    "status": "pass" if t.status == "passed" else "fail",
                    "message": t.message or None,
                    **({"output": told[t.stage]} if diagnosed_at.get(t.stage) == t.nodeid else {}),
                    "test_code": t.nodeid,
                    "task_id": task_of[t.stage],
                }
                for t in result.tests
            ],
        },
        indent=2,
        ensure_ascii=False,
    )
