"""Fault scenarios of the reference read and path resolution (issue 11), run against a
solved practice directory: FIFOs and devices end within a second, an abort or a
cancellation mid-scan stops the worker, the line index is never stale, and no fuzzed
argument makes a tool raise. The scenarios live in ``read_fault_cases.py``."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from coursekit.runner import TestOutcome, run_lab_tests

pytestmark = pytest.mark.slow
CASES = Path(__file__).with_name("read_fault_cases.py")
NAMES = [
    node.name
    for node in ast.parse(CASES.read_text()).body
    if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
]


@pytest.fixture(scope="module")
def outcomes(solved: Path) -> dict[str, list[TestOutcome]]:
    shutil.copyfile(CASES, solved / "tests" / CASES.name)
    # The thread method ends a hung run (a thread stuck in a blocking open cannot be
    # interrupted) instead of waiting on it; every case has a deadline well below it.
    run = run_lab_tests(
        solved,
        extra=(f"tests/{CASES.name}", "--timeout=60", "--timeout-method=thread"),
        timeout=600,
    )
    found: dict[str, list[TestOutcome]] = {name: [] for name in NAMES}
    for outcome in run.outcomes:
        found.setdefault(outcome.name.split("[")[0], []).append(outcome)
    assert run.outcomes, f"the fault scenarios did not run:\n{run.output[-3000:]}"
    return found


@pytest.mark.parametrize("case", NAMES)
def test_fault_scenario(outcomes: dict[str, list[TestOutcome]], case: str) -> None:
    assert outcomes[case], f"{case} did not run (the run was cut short: a hang?)"
    failed = [f"{o.name}: {o.details[-1500:]}" for o in outcomes[case] if not o.passed]
    assert not failed, "\n\n".join(failed)
