"""Diagnosis: a failure set is matched to the catalogued mistake it looks like, and an
honest, unfinished or differently wrong submission is never told it made one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from pytest_timeout import PYTEST_FAILURE_MESSAGE as TEST_TIMEOUT

from coursekit import load_lab, mistakes
from coursekit.lab import Mutant, Stage
from coursekit.mistakes import (
    SIGNATURES_FILE,
    diagnose,
    load_signatures,
    signature_key,
    solution_key,
)
from coursekit.runner import TestOutcome, TestRun, run_stage_tests
from grader._diagnosis import Diagnoser
from grader.model import SubmissionResult, TestResult

from .labrun import build, over_time_limit_prefix

LAB = load_lab("08")
ASSERTION = "AssertionError: the invariant broke"


def current_signatures() -> dict[str, dict[str, frozenset[str]]]:
    signatures = load_signatures(LAB)
    assert signatures is not None, (
        "labs/08-coding-tools/mistakes.json is missing or stale (key "
        f"{signature_key(LAB)}): the lab tests or lab.toml changed. Run "
        "`python -m grader signatures` and commit the file."
    )
    return signatures


def failures_of(tests: frozenset[str]) -> list[tuple[str, str]]:
    return [(f"tests/{name}", ASSERTION) for name in sorted(tests)]


def test_the_signatures_were_made_from_this_solution_and_its_mutants() -> None:
    # The key students' copies check covers the lab tests and lab.toml only (they have no
    # solution); a change of the solution or of a patch changed a mutant's failures unseen
    # (one went from 3 failing tests to 36, and was no longer diagnosed).
    recorded = json.loads((LAB.root / SIGNATURES_FILE).read_text(encoding="utf-8"))
    assert recorded.get("solution_key") == solution_key(LAB), (
        "labs/08-coding-tools/mistakes.json was made from another solution or other mutant "
        "patches than solutions/08-coding-tools holds now: run `python -m grader "
        "signatures` and commit the file"
    )


def test_every_catalogued_mistake_has_a_current_signature() -> None:
    signatures = current_signatures()
    for stage in LAB.stages:
        for mutant in stage.mutants:
            assert signatures[stage.id].get(mutant.name), (
                f"{stage.id} {mutant.name} has no signature (no test fails for it?)"
            )


def named(diagnosis: object, mutant: Mutant) -> bool:
    """Named without doubt: the mistake itself, alone or with at most one look-alike."""
    mistakes = getattr(diagnosis, "mistakes", ())
    return mutant in mistakes and len(mistakes) <= 2


def test_a_class_of_single_mistakes_is_diagnosed_right() -> None:
    signatures = current_signatures()
    students = [(stage, m) for stage in LAB.stages for m in stage.mutants]
    right = [
        (stage, m)
        for stage, m in students
        if named(diagnose(stage, failures_of(signatures[stage.id][m.name]), signatures), m)
    ]
    rate = len(right) / len(students)
    wrong = sorted(
        {f"{s.id} {m.name}" for s, m in students} - {f"{s.id} {m.name}" for s, m in right}
    )
    assert rate >= 0.9, f"diagnosis names the right mistake for {rate:.0%}; missed: {wrong}"


def test_two_mistakes_in_two_stages_are_both_named() -> None:
    signatures = current_signatures()
    core = [s for s in LAB.stages if not s.optional]
    for first, second in itertools.pairwise(core):
        a, b = first.mutants[0], second.mutants[-1]
        assert named(diagnose(first, failures_of(signatures[first.id][a.name]), signatures), a)
        assert named(diagnose(second, failures_of(signatures[second.id][b.name]), signatures), b)


def test_unfinished_or_unrelated_failures_get_no_diagnosis() -> None:
    signatures = current_signatures()
    stage: Stage = LAB.stage("8.1")
    some = next(iter(signatures["8.1"].values()))
    stubbed = [
        (f"tests/{t}", "NotImplementedError: Lab 8.1 read is not implemented yet") for t in some
    ]
    assert diagnose(stage, stubbed, signatures) is None, "a stub is unfinished, not mistaken"
    # One function still on its stub among real failures (the demo's attack samples matched
    # an 8.6 mistake that way): still unfinished.
    largest = max(signatures["8.1"].values(), key=len)
    first, *rest = failures_of(largest)
    mixed = [*rest, (first[0], "NotImplementedError: Lab 8.1 read is not implemented yet")]
    assert diagnose(stage, mixed, signatures) is None, "a stub among the failures: unfinished"
    assert diagnose(stage, [], signatures) is None
    unrelated = [("tests/test_lab8_1_read.py::test_that_does_not_exist", ASSERTION)]
    assert diagnose(stage, unrelated, signatures) is None
    assert diagnose(stage, failures_of(some), None) is None, "stale signatures: no guess"


def test_the_grader_diagnoses_only_a_stage_whose_tests_all_ran() -> None:
    signatures = current_signatures()
    stage: Stage = LAB.stage("8.2")
    mutant = stage.mutants[0]
    signature = signatures[stage.id][mutant.name]
    stage_tests = sorted(
        LAB.root.joinpath("tests").glob(f"test_lab{stage.id.replace('.', '_')}_*.py")
    )
    assert stage_tests, "the stage's test file"
    failing = [
        TestResult(f"tests/{name}", stage.id, False, "failed", ASSERTION, 0, 1)
        for name in sorted(signature)
    ]
    passing = TestResult(f"{stage_tests[0].relative_to(LAB.root)}::other", stage.id, False,
                         "passed", "", 1, 1)  # fmt: skip
    diagnoser = Diagnoser(LAB, LAB.root / "tests")
    whole = SubmissionResult("ann", "graded", "", "bwrap", tests=[*failing, passing])
    assert [d.mistakes for d in diagnoser(whole)] == [
        [m.name for m in diagnose(stage, failures_of(signature), signatures).mistakes]  # type: ignore[union-attr]
    ]
    unrun = TestResult(f"{stage_tests[0].relative_to(LAB.root)}::later", stage.id, False,
                       "not run", "the test did not run", 0, 1)  # fmt: skip
    stopped = SubmissionResult("ben", "timeout", "", "bwrap", tests=[*failing, unrun])
    assert diagnoser(stopped) == [], "a stage the run never finished is not diagnosed"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_honest_partial_submissions_are_never_told_they_made_a_known_mistake(
    practice_base: Path, tmp_path: Path
) -> None:
    signatures = current_signatures()
    partial_read = (
        Path(__file__).resolve().parents[2]
        / "grader/examples/submissions/partial/src/picourse/coding_tools/read.py"
    )
    honest = build(LAB, practice_base, tmp_path / "honest", ["8.2", "8.3", "8.4", "8.5", "8.6"])
    (honest / LAB.stage("8.1").modules[0]).write_bytes(partial_read.read_bytes())
    outcomes = run_stage_tests(honest, [LAB.stage("8.1")]).outcomes
    claims = []
    for stage in LAB.stages:
        failing = [
            (o.nodeid, o.message)
            for o in outcomes
            if not o.passed and o.test_file.endswith(stage.tests)
        ]
        found = diagnose(stage, failing, signatures)
        if found is not None:
            claims.append(
                f"{stage.id}: {[m.name for m in found.mistakes]} ({found.similarity:.2f})"
            )
    assert not claims, f"honest work diagnosed as a known mistake: {claims}"
    assert any(not o.passed for o in outcomes if o.test_file.endswith(LAB.stage("8.1").tests)), (
        "the partial read must fail some 8.1 tests, or this proves nothing"
    )


def test_a_time_limit_failure_joins_a_signature_only_if_it_fails_again_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A busy machine (signatures are recorded with two jobs on two cores) can make a mutant
    # miss a deadline that it meets on its own: that test is not part of the mistake.
    plain, slow, hang = (f"tests/test_lab8_1_read.py::test_{n}" for n in ("plain", "slow", "hang"))
    first = (
        TestOutcome(plain, False, "AssertionError: wrong text", ""),
        TestOutcome(slow, False, f"AssertionError: {over_time_limit_prefix(LAB)}too slow", ""),
        TestOutcome(hang, False, "Failed: " + TEST_TIMEOUT % 30, ""),
        TestOutcome("tests/test_lab8_1_read.py::test_fine", True, "", ""),
    )
    again = (TestOutcome(slow, True, "", ""), TestOutcome(hang, False, TEST_TIMEOUT % 30, ""))
    reruns: list[tuple[str, ...]] = []

    def stage_run(directory: Path, stages: list[Stage], **options: Any) -> TestRun:
        return TestRun(first, "")

    def lab_run(directory: Path, marker: str | None = None, **options: Any) -> TestRun:
        assert marker is None, "the rerun is of the timed-out tests alone, not of a stage"
        reruns.append(options["extra"])
        return TestRun(again, "")

    monkeypatch.setattr(mistakes, "assemble_practice_dir", lambda *args, **kw: tmp_path)
    monkeypatch.setattr(mistakes, "run_stage_tests", stage_run)
    monkeypatch.setattr(mistakes, "run_lab_tests", lab_run)
    signatures = mistakes.compute_signatures(LAB, jobs=1)
    mutant = LAB.stages[0].mutants[0]
    assert signatures[LAB.stages[0].id][mutant.name] == sorted(
        mistakes.test_key(nodeid) for nodeid in (plain, hang)
    )
    assert reruns[0] == (hang, slow), "only the failures over a time limit run again"
