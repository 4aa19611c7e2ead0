"""Settings for running the project's tests in parallel (pytest-xdist, ``-n auto``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling, Scheduling
from xdist.workermanage import WorkerController

from coursekit import load_lab
from tests.chapter08.labrun import render_base
from tests.made_once import made_once

GRADER_TESTS = "tests/grader/"
# Folders whose modules each keep to one worker: their module fixtures are costly (a graded
# class; a solved practice directory, or a whole lab run of the reference's fault scenarios).
KEPT_TOGETHER = (GRADER_TESTS, "tests/tools/")


class _ModuleFixturesMadeOnce(LoadScopeScheduling):  # type: ignore[misc]  # untyped
    """pytest-xdist's load scheduling, except that the tests of one grader or tools module
    stay on one worker, so that its module fixtures (the graded samples, a red team's class,
    the fault scenarios' lab run) are made once, not once per worker (spread one by one, the
    twelve read-fault tests made their module's lab run on all six workers); other tests
    spread one by one (their fixtures are cheap).

    xdist's own ``--dist loadgroup`` cannot do this under pytest >= 9.2: it groups by
    rewriting node ids, which pytest no longer reads (pytest-dev/pytest-xdist#1386). Grader
    modules run side by side: each grader run keeps to itself (its own uids under a lock,
    its own cgroup), and a wall that a finishing run must not meet leaves room for a loaded
    machine.
    """

    _starting = False

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)

    def schedule(self) -> None:
        self._starting = True
        try:
            super().schedule()
        finally:
            self._starting = False

    def _assign_work_unit(self, node: WorkerController) -> None:
        # At the start xdist gives every worker one scope, then one more at once to each
        # worker whose scope has at most two tests (a worker runs a test only once it knows
        # the next): that second one waits for the first to end. So it is the queue's last
        # (a short test: LONGEST_FIRST puts the long ones first), not the next long one,
        # which would start a minute or two late and leave a core idle at the end.
        if self._starting and self.assigned_work.get(node):
            self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
        super()._assign_work_unit(node)


def scope_of(nodeid: str) -> str:
    """What a worker takes whole: the test's module if it is kept together, else the test."""
    path = nodeid.split("::", 1)[0]
    return path if path.startswith(KEPT_TOGETHER) else nodeid


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    # Much of the suite waits rather than computes (lab deadlines, grader walls, hanging
    # samples, a few of them for a minute or more): eight workers more than the cores keep
    # the cores busy meanwhile. Measured as root on 2 cores with the start order below,
    # taking turns: 10 workers 231, 230, 225 and 217 s; 8 workers 238 and 240 s; 12
    # workers 225 and 227 s. (Before the grader stopped running the stubs' tests, more
    # CPU went to contention than was gained: 6 workers 5:19, 4 6:25, 8 5:32.)
    return (os.cpu_count() or 1) + 8


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    if config.getvalue("dist") == "loadgroup":
        # Work starts in collection order (LONGEST_FIRST), not largest scope first: the
        # largest scopes (most tests) are not the longest.
        config.option.loadscopereorder = False
        return _ModuleFixturesMadeOnce(config, log)
    return None


# The order work starts in; everything not named keeps its collection order, after these.
# What takes the longest (a minute or more on 2 cores, much of it waiting on deadlines,
# walls and sandboxed runs) starts first, longest first, so that its waiting overlaps the
# short tests; started late, it trails them with a core idle (measured as root on 2 cores:
# with the watch journey queued behind the hanging bash run and the finished core behind
# `break`, they started at 117 s and 169 s, and a core idled for the last 25 to 35 s of
# runs of 259 to 268 s; started at once, the workers end within 3 s of each other).
LONGEST_FIRST = (
    "tests/grader/test_grading.py",
    "tests/chapter08/test_no_process_left.py::test_break_kill_only_the_shell",
    "tests/cli/test_practice_cli.py::test_watch_reruns_on_save",
    "tests/cli/test_practice_cli.py::test_a_finished_core",
    "tests/chapter08/test_no_process_left.py::test_a_red_run_of_a_hanging",
    "tests/grader/test_partial_credit.py",
    "tests/chapter08/test_lab_suite.py::test_the_solution_passes",
    "tests/grader/test_isolation_red_team.py",
    "tests/grader/test_red_team.py",
    "tests/chapter08/test_diagnosis.py::test_honest_partial_submissions",
    "tests/chapter08/test_no_process_left.py::test_a_read_that_blocks_the_event_loop",
    "tests/grader/test_resume.py",
    "tests/chapter08/test_no_process_left.py::test_a_call_that_blocks_the_event_loop",
    "tests/grader/test_gradescope_bundle.py",
    "tests/grader/test_robustness.py",
    # Then what comes in long pieces (journeys of 5 to 40 s, Lab 8.5's mutants that wait
    # out deadlines and graces, whole modules on one worker), so that the run ends on many
    # short tests (the other mutants, the runtime's tests) that fill both cores to the
    # end, not on a piece one worker runs alone while the other core idles.
    "tests/cli/",
    "tests/chapter08/test_lab_suite.py::test_each_stage_fails_on_its_stub",
    "tests/chapter08/test_lab_suite.py::test_each_catalogued_mutant_is_killed_by_its_stage[8.5-",
    "tests/test_scheduling.py",
    *KEPT_TOGETHER,
)


SLOW_TEST_SECONDS = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next(
            (i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)),
            len(LONGEST_FIRST),
        )

    items.sort(key=rank)  # stable: the rest in collection order
    for item in items:
        # A slow test runs practice directories and lab suites in subprocesses: tens of
        # seconds idle, several times that when the cores are shared (two suites on 2 cores
        # took a copier journey past the default 120 s). Its own marker, if any, stands.
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TEST_SECONDS))


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    """A local HTTP server for the model tests. Threaded: a handler that holds a stream open
    must not stop the server answering."""
    http = HTTPServer(threaded=True)
    http.start()
    yield http
    http.clear()
    if http.is_running():
        http.stop()


@pytest.fixture(scope="session")
def practice_base(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A new practice directory (the scaffold rendered, the lab's tests added), compiled
    (coursekit.bytecode): rendered once per run for every test worker, never changed; tests
    build their solved, staged and mutant directories as copies of it (labrun.build)."""
    return made_once(
        tmp_path_factory,
        worker_id,
        "practice-base",
        lambda target: render_base(load_lab("08"), target, compiled=True),
    )
