"""A stage still on its stub is recorded as its stub fails it, never run; a changed one runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from coursekit.layout import SCAFFOLD
from grader import GradeOptions, grade_submissions
from grader._sandbox import Limits
from grader._session import NOTHING_RAN
from grader._stubbed import STUB_FAILURE, stages_on_their_stubs
from tests.grader.graded_class import LAB, result_of, solved_modules, start_on_its_stub

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_only_the_stages_that_differ_from_their_stubs_run(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    started = solved_modules(submissions / "started", ["8.1"])
    # Stage 8.2 started and left as it was given, one comment apart: it runs, on its stub.
    start_on_its_stub(started, LAB.stage("8.2").modules[0])
    (submissions / "untouched" / "src/picourse/coding_tools").mkdir(parents=True)
    out = tmp_path / "out"
    grade_submissions(submissions, out, GradeOptions(jobs=2, limits=Limits(wall_seconds=300)))

    result = result_of(out, "started")
    assert result["status"] == "graded" and str(result["isolation"]).startswith("bwrap")
    tests = result["tests"]
    assert isinstance(tests, list)
    by_stage: dict[str, list[dict[str, str]]] = {}
    for test in tests:
        by_stage.setdefault(test["stage"], []).append(test)
    assert all(t["status"] == "passed" for t in by_stage["8.1"]), "the solved stage ran"
    for test in by_stage["8.2"]:
        assert test["status"] == "failed", test
        assert test["message"].startswith("NotImplementedError: Lab 8.2 "), test
        assert "not run" not in test["message"], f"a changed stub runs: {test}"
    for stage in LAB.stages[2:]:
        assert by_stage[stage.id], f"stage {stage.id} has its tests in the results"
        for test in by_stage[stage.id]:
            assert (test["status"], test["message"]) == (
                "failed",
                STUB_FAILURE.format(stage=stage.id),
            ), f"stage {stage.id} is still its stub: recorded failed, not run"
    assert result["score"] == 20.0, "the stub that ran earns what the recorded ones earn: 0"

    untouched = result_of(out, "untouched")
    assert untouched["isolation"] == NOTHING_RAN, "no sandbox runs for nothing but stubs"
    assert untouched["status"] == "graded" and untouched["score"] == 0
    assert untouched["bonus"] == 0 and untouched["diagnoses"] == []
    every = untouched["tests"]
    assert isinstance(every, list) and len(every) == len(tests), "every test has its record"
    assert {t["message"] for t in every} == {
        STUB_FAILURE.format(stage=stage.id) for stage in LAB.stages
    }


def changed(*modules: str) -> dict[str, bytes]:
    """A submission's modules: these changed by a comment, the rest as given."""
    every = {m for stage in LAB.stages for m in stage.modules}
    stubs = {m: (SCAFFOLD / "template" / m).read_bytes() for m in every}
    return stubs | {m: stubs[m] + b"# changed\n" for m in modules}


def module(name: str) -> str:
    return f"src/picourse/coding_tools/{name}.py"


@pytest.mark.parametrize(
    ("touched", "runs"),
    [
        ((), set()),
        (("read",), {"8.1"}),
        (("containment",), {"8.2"}),
        # Confirmation is wired into bash, write and edit, careful edits into write and edit
        # (their catalogued mistakes patch those): a gate in bash.py with confirm.py still
        # the stub earns its 8.8 tests, as it did when every stage ran.
        (("bash",), {"8.5", "8.8"}),
        (("write",), {"8.3", "8.8", "8.9"}),
        (("edit",), {"8.4", "8.8", "8.9"}),
        (("mutation_queue", "agent", "glob"), {"8.3", "8.6", "8.7"}),
        (("confirm",), {"8.8"}),
    ],
)
def test_a_stage_runs_when_a_module_its_behaviour_lives_in_changed(
    touched: tuple[str, ...], runs: set[str]
) -> None:
    modules = changed(*(module(name) for name in touched))
    stubbed = stages_on_their_stubs(LAB, SCAFFOLD / "template", modules)
    assert {s.id for s in LAB.stages} - stubbed == runs
    without_read = {m: b for m, b in modules.items() if m != module("read")}
    assert stages_on_their_stubs(LAB, SCAFFOLD / "template", without_read) == stubbed | {"8.1"}, (
        "a module the submission lacks stays its stub"
    )
