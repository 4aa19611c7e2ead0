"""A synthetic class of results for the report tests and the report benchmark."""

from __future__ import annotations

import random

from coursekit import load_lab
from coursekit.lab import Lab
from grader.model import Diagnosed, StageScore, Status, SubmissionResult, TestResult

LAB = load_lab("08")
TESTS_PER_STAGE = 8


def synthetic_class(size: int, seed: int = 8, lab: Lab = LAB) -> list[SubmissionResult]:
    """``size`` students: stage by stage each is done, half done or not started, some with a
    diagnosed mistake, a few timed out or flagged; deterministic for a seed."""
    rng = random.Random(seed)
    results = []
    for number in range(size):
        tests, stages, diagnoses = [], [], []
        skill = rng.random()
        for stage in lab.stages:
            per_test = stage.weight / TESTS_PER_STAGE
            passed_count = (
                TESTS_PER_STAGE if rng.random() < skill else rng.randrange(TESTS_PER_STAGE)
            )
            for index in range(TESTS_PER_STAGE):
                passed = index < passed_count
                tests.append(
                    TestResult(
                        f"tests/{stage.tests}::test_{stage.marker}_{index}",
                        stage.id,
                        False,
                        "passed" if passed else "failed",
                        "" if passed else f"AssertionError: invariant {index} of {stage.id}",
                        per_test if passed else 0,
                        per_test,
                    )
                )
            stages.append(
                StageScore(
                    stage.id, stage.title, per_test * passed_count, stage.weight, stage.optional
                )
            )
            if 0 < passed_count < TESTS_PER_STAGE and stage.mutants and rng.random() < 0.5:
                mutant = rng.choice(stage.mutants)
                diagnoses.append(
                    Diagnosed(stage.id, [mutant.name], f"Looks like: {mutant.description}", 0.8)
                )
        status: Status = (
            "timeout" if number % 37 == 5 else "flagged" if number % 53 == 7 else "graded"
        )
        results.append(
            SubmissionResult(
                f"student-{number:03}",
                status,
                "" if status == "graded" else f"{status} for the sample",
                "bwrap",
                stages,
                tests,
                seconds=round(rng.uniform(8, 40), 2),
                diagnoses=diagnoses,
            )
        )
    return results
