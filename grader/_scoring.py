"""Scores from the pristine test inventory and the records of one run.

A stage's weight (lab.toml) is split evenly over its tests; challenge tests are a separate
bonus, one point each. Only a test the plugin saw run and pass scores.

A test decided in the student's own process (``where == "host"``: it needed the student's
objects in its process) is the student's report, not the judge's observation. It earns its
value times the share of the stage's judge-decided tests that passed: with nothing
implemented, forged in-host reports earn nothing; with a correct stage, nothing is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coursekit.lab import Lab
from grader.model import StageScore, TestResult, TestStatus, truncate


@dataclass(frozen=True)
class InventoryItem:
    nodeid: str
    stage: str
    challenge: bool


def score(
    lab: Lab, inventory: list[InventoryItem], records: list[dict[str, Any]], *, credit: bool
) -> tuple[list[StageScore], list[TestResult], float, float]:
    reported = {r["nodeid"]: r for r in records if r.get("type") == "test"}
    stages, tests = [], []
    bonus = 0.0
    overall = _judged_share(inventory, reported, 0.0)
    for stage in lab.stages:
        items = [i for i in inventory if i.stage == stage.id]
        required = [i for i in items if not i.challenge]
        shares = iter(_shares(stage.weight, len(required)))
        trust = _judged_share(items, reported, overall)
        earned = 0.0
        for item in items:
            record = reported.get(item.nodeid)
            status: TestStatus = (
                "not run" if record is None else "passed" if record["passed"] else "failed"
            )
            value = 1.0 if item.challenge else next(shares)
            points = value if status == "passed" and credit else 0.0
            if record is not None and record.get("where") == "host":
                points *= trust
            if item.challenge:
                bonus += points
            else:
                earned += points
            message = (
                ""
                if status == "passed"
                else (
                    truncate(str(record.get("message", ""))) if record else "the test did not run"
                )
            )
            tests.append(
                TestResult(
                    item.nodeid,
                    stage.id,
                    item.challenge,
                    status,
                    message,
                    points,
                    value,
                )
            )
        if stage.optional:  # an extension stage: its points are a bonus, as challenges are
            bonus += earned
        stages.append(
            StageScore(stage.id, stage.title, round(earned, 2), stage.weight, stage.optional)
        )
    max_bonus = float(sum(1 for i in inventory if i.challenge))
    max_bonus += sum(stage.weight for stage in lab.stages if stage.optional)
    return stages, tests, round(bonus, 2), max_bonus


def _shares(weight: float, count: int) -> list[float]:
    """``weight`` split over ``count`` tests in 4-decimal shares that add up to it exactly
    (a platform that sums the tests' points must see the stage's weight, not 100.0016)."""
    if count == 0:
        return []
    units = round(weight * 10_000)
    each, extra = divmod(units, count)
    return [(each + (1 if index < extra else 0)) / 10_000 for index in range(count)]


def _judged_share(
    items: list[InventoryItem], reported: dict[str, dict[str, Any]], default: float
) -> float:
    """The share of these tests the judge decided that passed, every test never reported
    counted as one that did not: the student's code can end a run (a signal to the judge,
    a crash, a hang) right before the first test it fails, and a run cut short must not
    raise the bound on in-host credit. ``default`` when every test of them was reported
    and none by the judge (a stage whose every test ran in the host: the whole run's share)."""
    judged = [
        reported[i.nodeid]
        for i in items
        if i.nodeid in reported and reported[i.nodeid].get("where") != "host"
    ]
    unreported = sum(1 for i in items if i.nodeid not in reported)
    if not judged and not unreported:
        return default
    return sum(1 for r in judged if r["passed"]) / (len(judged) + unreported)
