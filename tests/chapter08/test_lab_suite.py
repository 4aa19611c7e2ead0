"""The lab tests against the reference solution, the stubs and every catalogued mutant.

The equivalent of `rustlings dev check`: every stage fails unsolved (with its own
NotImplementedError only), passes solved, and kills each of its mutants.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

from coursekit import Lab, load_lab
from coursekit.lab import Mutant
from coursekit.mistakes import load_signatures
from coursekit.runner import TestOutcome, run_lab_tests, run_stage_tests

from .forked import ForkedPytest
from .labrun import build, run_beside_the_stubs

pytestmark = pytest.mark.slow  # each test runs whole stages: 30-100 s on an idle machine
LAB = load_lab("08")


def stage_of(outcomes: dict[str, TestOutcome], lab: Lab, stage_id: str) -> dict[str, TestOutcome]:
    test_file = lab.stage(stage_id).tests
    return {name: o for name, o in outcomes.items() if o.test_file.endswith(test_file)}


def outcomes_of(
    directory: Path, launch: ForkedPytest, stage_ids: list[str] | None = None
) -> dict[str, TestOutcome]:
    """Every outcome of the stages (default: every lab test, whatever its marker)."""
    if stage_ids is None:
        run = run_lab_tests(directory, launch=launch)
    else:
        run = run_stage_tests(directory, [LAB.stage(s) for s in stage_ids], launch=launch)
    return {o.nodeid: o for o in run.outcomes}


def test_the_solution_passes_every_lab_test(
    practice_base: Path, tmp_path: Path, forked_pytest: ForkedPytest
) -> None:
    solved = build(LAB, practice_base, tmp_path / "solved", [s.id for s in LAB.stages])
    outcomes = outcomes_of(solved, forked_pytest)
    failed = {name: o.message[:300] for name, o in outcomes.items() if not o.passed}
    assert not failed, f"the reference solution fails lab tests: {failed}"
    for stage in LAB.stages:
        assert stage_of(outcomes, LAB, stage.id), f"stage {stage.id} has no tests"
    assert len(outcomes) >= 90


def test_a_lab_run_loads_pytest_timeout_and_no_other_installed_plugin(
    practice_base: Path, tmp_path: Path
) -> None:
    installed = {
        entry.value.split(":")[0].split(".")[0]
        for distribution in importlib.metadata.distributions()
        for entry in distribution.entry_points
        if entry.group == "pytest11"
    }
    directory = build(LAB, practice_base, tmp_path / "stubs", [])  # the base stays untouched
    output = run_lab_tests(directory, extra=("--trace-config", "--collect-only")).output
    active = {
        name.split(".")[0] for name in re.findall(r"PLUGIN registered: <module '([\w.]+)'", output)
    }
    assert "pytest_timeout" in active, "the lab tests' timeouts need pytest-timeout"
    assert active & installed == {"pytest_timeout"}, (
        f"a lab run loaded {sorted(active & installed - {'pytest_timeout'})} too: each costs "
        "every run's start, and nothing but pytest-timeout belongs in a run that judges "
        "student code (coursekit.runner.LAB_PYTEST_ENV)"
    )


def test_a_stage_run_collects_only_the_stages_files_and_skips_a_missing_one(
    tmp_path: Path,
) -> None:
    # A stage run names its stages' test files beside -m (collecting all of the lab's tests
    # to keep one stage's costs about half of a short run), and leaves out a file the
    # directory no longer has: pytest would refuse the whole run for a missing path.
    read, paths = LAB.stage("8.1"), LAB.stage("8.2")
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    marked = f"import pytest\n\npytestmark = pytest.mark.{read.marker}\n\n\n"
    (tmp_path / "tests" / read.tests).write_text(marked + "def test_in_its_file():\n    pass\n")
    (tmp_path / "tests" / "test_elsewhere.py").write_text(
        marked + "def test_marked_in_another_file():\n    pass\n"
    )
    assert not (tmp_path / "tests" / paths.tests).exists()
    run = run_stage_tests(tmp_path, [read, paths])
    assert [o.name for o in run.outcomes] == ["test_in_its_file"], run.output[-2000:]


LEFT_BEHIND = """
import asyncio
import gc

from lab_helpers import run


def test_a_task_nobody_awaited_is_reported_in_one_line(capsys):
    async def fail():
        raise RuntimeError("left behind")

    async def scenario():
        task = asyncio.get_running_loop().create_task(fail())
        await asyncio.wait({task})  # it fails, and nobody asks for its exception

    run(scenario())
    gc.collect()
    err = capsys.readouterr().err
    assert err == "asyncio: Task exception was never retrieved: RuntimeError('left behind')\\n", err
"""


def test_a_task_a_failed_test_left_behind_is_reported_without_a_traceback(
    practice_base: Path, tmp_path: Path
) -> None:
    # A stub or a wrong implementation often fails a test before it awaits every task it
    # started. asyncio's default handler formats a traceback when the task is freed, which
    # can happen inside pytest's own ast.parse: on Python 3.11.7 and older that ended the
    # whole stub run of 8.1 with "SystemError: AST constructor recursion depth mismatch".
    run = run_beside_the_stubs(LAB, practice_base, tmp_path, "test_left_behind.py", LEFT_BEHIND)
    assert [o.passed for o in run.outcomes] == [True], run.output[-3000:]


FILLS_MEMORY = """
import resource
import threading

import psutil

from lab_helpers import run

before = psutil.Process().memory_info().vms


def test_code_under_test_fills_the_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (before + (1 << 30), resource.RLIM_INFINITY))

    async def hoard():
        kept = []
        while True:  # untouched pages: the limit is met without the machine's memory
            kept.append(bytes(64 << 20))

    run(hoard())


def test_the_next_test_starts_with_that_memory_free():
    grown = psutil.Process().memory_info().vms - before
    assert grown < 256 << 20, f"{grown >> 20} MiB of the last test's memory is still held"
    started = threading.Event()
    threading.Thread(target=started.set).start()
    assert started.wait(10)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="only Linux enforces an address-space limit")
def test_memory_a_failed_test_filled_is_free_when_the_next_test_starts(
    practice_base: Path, tmp_path: Path
) -> None:
    # The grader limits the address space. A wrong read that allocates until MemoryError
    # left its memory held by pytest's sys.last_value (and the task's reference cycle) into
    # the next test, whose new thread then failed to start and Thread.start() waited for it
    # until pytest-timeout: every in-host test of the submission lost a timeout's time.
    run = run_beside_the_stubs(LAB, practice_base, tmp_path, "test_fills_memory.py", FILLS_MEMORY)
    assert [o.passed for o in run.outcomes] == [False, True], run.output[-3000:]
    assert "MemoryError" in run.outcomes[0].message


CORE = [s.id for s in LAB.stages if not s.optional]
OPTIONAL = [s.id for s in LAB.stages if s.optional]


# Core stage k: the solution before k, stubs from k on. The optional stages need only the
# core (test_each_optional_stage_needs_only_the_core), so one run judges them all: the core
# solved, every optional stage a stub, each failing with its own NotImplementedError only
# (stricter than one run per stage: no optional stage may lean on another's stub either).
# The stage just before k must stay green meanwhile. So each stage is proven green with every
# later stage a stub, the most any student has left; with none (the solution's run) too.
@pytest.mark.parametrize("stub_ids", [*([k] for k in CORE), OPTIONAL], ids=[*CORE, "optional"])
def test_each_stage_fails_on_its_stub_alone(
    practice_base: Path, tmp_path: Path, stub_ids: list[str], forked_pytest: ForkedPytest
) -> None:
    earlier = [s.id for s in LAB.stages_before(stub_ids[0])]
    directory = build(LAB, practice_base, tmp_path / "staged", earlier)
    # Only the stages this test judges: the one just before and the stubbed ones.
    done_before = earlier[-1:]
    outcomes = outcomes_of(directory, forked_pytest, [*done_before, *stub_ids])
    for done in done_before:
        broken = [n for n, o in stage_of(outcomes, LAB, done).items() if not o.passed]
        assert not broken, f"stage {done} must stay green when {stub_ids} are stubs: {broken}"
    for stage_id in stub_ids:
        current = stage_of(outcomes, LAB, stage_id)
        assert current, f"no tests found for stage {stage_id}"
        marker = f"NotImplementedError: Lab {stage_id}"
        for name, outcome in current.items():
            assert not outcome.passed, f"{name} passes against the stub: it cannot fail"
            assert marker in outcome.message, (
                f"{name} must fail with {marker!r} only, not: {outcome.message[:400]}"
            )


@pytest.mark.parametrize("stage_id", OPTIONAL)
def test_each_optional_stage_needs_only_the_core(
    practice_base: Path, tmp_path: Path, stage_id: str, forked_pytest: ForkedPytest
) -> None:
    directory = build(LAB, practice_base, tmp_path / "extension", [*CORE, stage_id])
    outcomes = stage_of(outcomes_of(directory, forked_pytest, [stage_id]), LAB, stage_id)
    failed = {name: o.message[:300] for name, o in outcomes.items() if not o.passed}
    assert outcomes and not failed, (
        f"optional stage {stage_id} must pass on the core alone, whatever the other "
        f"optional stages are: {failed}"
    )


MUTANTS = [m for s in LAB.stages for m in s.mutants]


def test_each_stage_has_a_catalogue_of_mutants() -> None:
    short = {s.id: len(s.mutants) for s in LAB.stages if len(s.mutants) < (6 if s.optional else 10)}
    assert not short, f"each core stage needs 10 catalogued mutants, each optional one 6: {short}"


# What each mutant failed when its signature was recorded (labs/08-coding-tools/mistakes.json;
# test_diagnosis fails when it is stale). Empty when missing: the whole stage runs.
RECORDED = load_signatures(LAB) or {}


# What a patch that no longer fits the solution's code fails with, rather than with the
# mistake it describes: a call that no longer matches its function, a name that is gone.
_BROKEN_PATCH = re.compile(
    r"^(?:\w+\.)*(?:TypeError: .*(?:positional argument|keyword argument|required argument)"
    r"|NameError|UnboundLocalError|SyntaxError|IndentationError|ImportError|ModuleNotFoundError"
    r"|AttributeError: module )[^\n]*",
    re.MULTILINE,
)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[f"{m.stage}-{m.name}" for m in MUTANTS])
def test_each_catalogued_mutant_is_killed_by_its_stage(
    practice_base: Path, tmp_path: Path, mutant: Mutant, forked_pytest: ForkedPytest
) -> None:
    directory = build(LAB, practice_base, tmp_path / "mutant", [s.id for s in LAB.stages], mutant)
    stage = LAB.stage(mutant.stage)
    # One failing test kills the mutant: -x stops there instead of running the rest. Only
    # the tests it failed when its signature was recorded run (a few seconds instead of the
    # stage), and one of them must fail again; the whole stage runs only for a mutant
    # without a record. Either way the kill must come from the mistake, not a broken patch.
    recorded = sorted(RECORDED.get(stage.id, {}).get(mutant.name, ()))
    nodeids = tuple(f"tests/{key}" for key in recorded)
    if nodeids:
        run = run_lab_tests(directory, stage.marker, extra=("-x", *nodeids), launch=forked_pytest)
        assert any(not o.passed for o in run.outcomes), (
            f"mutant {mutant.name!r} of stage {stage.id} no longer fails the tests recorded "
            "for it in mistakes.json (a change of the solution or of its patch): if it is "
            "still the mistake it describes, run `python -m grader signatures` and commit "
            "the file"
        )
    else:
        run = run_stage_tests(directory, [stage], extra=("-x",), launch=forked_pytest)
    killed = [o for o in run.outcomes if not o.passed]
    assert killed, (
        f"no test of stage {stage.id} kills mutant {mutant.name!r} ({mutant.description}); "
        f"a test is missing for: {mutant.invariant}"
    )
    broken = _BROKEN_PATCH.search(killed[0].message + "\n" + killed[0].details)
    assert broken is None, (
        f"mutant {mutant.name!r} is killed by code its patch broke ({broken and broken[0]}), "
        "not by the mistake it describes: mend its patch in solutions/08-coding-tools/"
        "mutants.toml so it follows the solution's current code"
    )


# A descheduled test process, made reproducible: the event loop stalls while asyncio connects
# a new process's pipes, so the command's child writes its file before the start is done.
_STALLED_PIPES = """
import asyncio.base_events, time

_connect = asyncio.base_events.BaseEventLoop.connect_read_pipe

async def _stalled(self, *args, **kwargs):
    time.sleep(0.5)
    return await _connect(self, *args, **kwargs)

asyncio.base_events.BaseEventLoop.connect_read_pipe = _stalled
"""

# A bash written from the core of the handout: it cleans up in a finally block, but a
# cancellation that lands inside asyncio's start never reaches it (only a challenge test asks
# for that: the reference lets the start finish).
_PLAIN_START = next(m for m in LAB.stage("8.5").mutants if m.name == "plain-start")


def test_a_cancellation_comes_after_the_start_even_on_a_stalled_machine(
    practice_base: Path, tmp_path: Path
) -> None:
    plain = build(LAB, practice_base, tmp_path / "plain", [s.id for s in LAB.stages], _PLAIN_START)
    (plain / "stalled_pipes.py").write_text(_STALLED_PIPES)
    test = "tests/test_lab8_5_bash.py::test_a_cancelled_call_leaves_no_process_running"
    run = run_lab_tests(plain, extra=("-p", "stalled_pipes", test))
    cases = ("plain", "grandchild-ignores-sigterm")
    assert [(o.nodeid, o.passed) for o in run.outcomes] == [
        (f"{test}[{c}]", True) for c in cases
    ], (
        "a tool that cleans up in a finally block failed the cancellation test on a stalled "
        "machine: the test must cancel only after asyncio's start of the process is done "
        f"(START_TURNS). {[o.message[:500] for o in run.outcomes]} {run.output[-1500:]}"
    )
