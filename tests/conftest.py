"""Settings for running the project's tests in parallel (pytest-xdist, ``-n auto``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pytest_httpserver import HTTPServer
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling, Scheduling

GRADER_TESTS = "tests/grader/"


class _ModuleFixturesMadeOnce(LoadScopeScheduling):  # type: ignore[misc]  # untyped
    """pytest-xdist's load scheduling, except that the tests of one grader module stay on one
    worker, so that its module fixtures (the graded samples, a red team's class) are made
    once, not once per worker; other tests spread one by one (their fixtures are cheap).

    xdist's own ``--dist loadgroup`` cannot do this under pytest >= 9.2: it groups by
    rewriting node ids, which pytest no longer reads (pytest-dev/pytest-xdist#1386). Grader
    modules run side by side: each grader run keeps to itself (its own uids under a lock,
    its own cgroup), and a wall that a finishing run must not meet leaves room for a loaded
    machine.
    """

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return path if path.startswith(GRADER_TESTS) else nodeid


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    # Much of the suite waits rather than computes (lab deadlines, grader walls, hanging
    # samples): two workers more than the cores keep the cores busy meanwhile.
    return (os.cpu_count() or 1) + 2


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    # loadscopereorder (on by default) starts the largest scopes first.
    if config.getvalue("dist") == "loadgroup":
        return _ModuleFixturesMadeOnce(config, log)
    return None


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
