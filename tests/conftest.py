"""Settings for running the project's tests in parallel (pytest-xdist, ``-n auto``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling, Scheduling

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

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def scope_of(nodeid: str) -> str:
    """What a worker takes whole: the test's module if it is kept together, else the test."""
    path = nodeid.split("::", 1)[0]
    return path if path.startswith(KEPT_TOGETHER) else nodeid


# The suite starts about 900 Python processes (practice.py, the grader, lab runs), each
# importing pytest and the kit. Where the environment says not to write bytecode (CI images
# often do), nothing is ever compiled once for all and every process compiles them again:
# a fresh clone as root, 2 cores, the suite 4:12 with it set, 3:44 with this. So the
# workers and what they start write bytecode as anywhere else; lab runs still never do
# (coursekit.runner sets it for every run).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    # Much of the suite waits rather than computes (lab deadlines, grader walls, hanging
    # samples, a few of them for a minute or more): six workers more than the cores keep
    # the cores busy meanwhile. Measured on 2 cores, since the grader stopped running the
    # stubs' tests: 8 workers 4:35, 6 workers 4:54 (before it: 6 workers 5:19, 4 workers
    # 6:25, and 8 5:32, when more CPU went to contention than was gained).
    return (os.cpu_count() or 1) + 6


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    if config.getvalue("dist") == "loadgroup":
        # Work starts in collection order (LONGEST_FIRST), not largest scope first: the
        # largest scopes (most tests) are not the longest.
        config.option.loadscopereorder = False
        return _ModuleFixturesMadeOnce(config, log)
    return None


# What takes the longest (a minute or more on 2 cores, much of it waiting on deadlines,
# walls and sandboxed runs), longest first: started first, it overlaps the many short
# tests; started last, it trailed them by a minute. Everything else keeps its order.
LONGEST_FIRST = (
    "tests/grader/test_grading.py",
    "tests/grader/test_red_team.py",
    "tests/grader/test_isolation_red_team.py",
    "tests/chapter08/test_diagnosis.py::test_honest_partial_submissions",
    "tests/chapter08/test_no_process_left.py",
    "tests/grader/test_partial_credit.py",
    "tests/cli/test_practice_cli.py::test_watch_reruns_on_save",
    "tests/cli/test_practice_cli.py::test_a_finished_core",
    "tests/chapter08/test_lab_suite.py::test_the_solution_passes",
    "tests/grader/test_resume.py",
    "tests/grader/test_gradescope_bundle.py",
    "tests/grader/test_robustness.py",
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
