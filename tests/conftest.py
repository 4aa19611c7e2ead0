"""Settings for running the project's tests in parallel (pytest-xdist, ``-n auto``)."""

from __future__ import annotations

from pathlib import Path

import pytest

GRADER_TESTS = Path(__file__).parent / "grader"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The grader gives each parallel job a fixed unprivileged uid (61000, 61001, ...) when it
    # runs as root, and the process limit counts every process of a uid: two grader runs at
    # once would share uids and limits. One xdist worker runs all grader tests, one at a time;
    # its module fixtures (the graded samples) are then made once, not once per worker.
    for item in items:
        if item.path.is_relative_to(GRADER_TESTS):
            item.add_marker(pytest.mark.xdist_group("grader"))
