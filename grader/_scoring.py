"""Scores from the pristine test inventory and the records of one run.

A stage's weight (lab.toml) is split evenly over its tests; challenge tests are a separate
bonus, one point each. Only a test the plugin saw run and pass scores.

A test decided in the student's own process (``where == "host"``: it needed the student's
objects in its process) is the student's report, not the judge's observation. It earns its
value times the share of the stage's judge-decided tests that passed: with nothing
implemented, forged in-host reports earn nothing; with a correct stage, nothing is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursekit.assemble import add_lab_tests, render_scaffold
from coursekit.bytecode import CopiedFiles, hash_checked, writing_env
from coursekit.lab import Lab
from grader.model import StageScore, TestResult, TestStatus, truncate


@dataclass(frozen=True)
class InventoryItem:
    nodeid: str
    stage: str
    challenge: bool


_COLLECT = """
import json, sys, pytest
class Collector:
    items = []
    def pytest_collection_modifyitems(self, items):
        for item in items:
            self.items.append([item.nodeid, sorted({m.name for m in item.iter_markers()})])
collector = Collector()
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                   plugins=[collector])
print("INVENTORY" + json.dumps(collector.items))
"""


@dataclass(frozen=True)
class _Pristine:
    inventory: tuple[InventoryItem, ...]
    files: CopiedFiles  # every file of the copy, its compiled code included


# The pristine copies made in this process, by grading key: the key covers everything a
# copy is made of (tests, lab.toml, scaffold), and making one takes a render (copier, about
# 0.4 CPU-seconds) and a pytest start and collection (about a second), which a process that
# grades again need not repeat.
_MADE: dict[str, _Pristine] = {}


def make_pristine(lab: Lab, pristine: Path, key: str) -> list[InventoryItem]:
    """Make the pristine copy (the scaffold rendered and the lab's tests) at ``pristine``,
    compiled for the runs of every job (``coursekit.bytecode``: the judge and the in-host
    pytest then rewrite no test module), and return every test of it with its stage. Once
    per process for a grading ``key``; a later copy under that key is written from the
    files of the first, as they were before any job ran."""
    known = _MADE.get(key)
    if known is None:
        render_scaffold(lab, pristine)
        add_lab_tests(lab, pristine)
        inventory = tuple(_collect(lab, pristine))
        known = _MADE[key] = _Pristine(inventory, CopiedFiles.of(pristine, "*"))
    else:
        known.files.install(pristine)
    return list(known.inventory)


def _collect(lab: Lab, pristine: Path) -> list[InventoryItem]:
    """Collect, writing the bytecode of the tests as pytest rewrites them; then every other
    module compiled hash-checked (a student's module mounted on its stub is never served the
    stub's code)."""
    result = subprocess.run(
        [sys.executable, "-c", _COLLECT],
        cwd=pristine,
        env=writing_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in result.stdout.splitlines() if x.startswith("INVENTORY")), None)
    if line is None:
        raise RuntimeError(f"cannot collect the pristine tests:\n{result.stdout}{result.stderr}")
    hash_checked(pristine)
    by_marker = {stage.marker: stage.id for stage in lab.stages}
    items = []
    for nodeid, markers in json.loads(line.removeprefix("INVENTORY")):
        stage = next((by_marker[m] for m in markers if m in by_marker), None)
        if stage is not None:
            items.append(InventoryItem(nodeid, stage, "challenge" in markers))
    return items


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
