"""Settings for running the project's tests in parallel (pytest-xdist, ``-n auto``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

GRADER_TESTS = Path(__file__).parent / "grader"


# tryfirst: pytest-xdist reads the xdist_group marks in its own collection hook, which
# must see them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Each grader run already keeps to itself (uids it claims with a lock, its own pids
    # cgroup), but two of them at once on two cores would cut into each other's wall limits.
    # One xdist worker runs all grader tests, one at a time; its module fixtures (the graded
    # samples) are then made once, not once per worker.
    for item in items:
        if item.path.is_relative_to(GRADER_TESTS):
            item.add_marker(pytest.mark.xdist_group("grader"))


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
