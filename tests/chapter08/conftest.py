"""Fixtures of the lab-suite checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .forked import ForkedPytest


@pytest.fixture(scope="session")
def forked_pytest() -> Iterator[ForkedPytest]:
    """Lab runs forked from one process per test worker (see forked.py)."""
    launch = ForkedPytest()
    yield launch
    launch.close()
