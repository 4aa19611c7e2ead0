"""Markers and fixtures of the Lab 8 tests. Keep this file as it is: grading uses its own copy."""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import stat
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import psutil
import pytest
from reaping import reap, snapshot

STAGES = {
    "lab8_1": "Lab 8.1 read: bounded line windows",
    "lab8_2": "Lab 8.2 paths: workspace containment",
    "lab8_3": "Lab 8.3 write: atomic replace and the mutation queue",
    "lab8_4": "Lab 8.4 edit: exact batched replacements",
    "lab8_5": "Lab 8.5 bash: a process group to one bounded end",
    "lab8_6": "Lab 8.6 loop: the tools through the agent loop",
    "lab8_7": "Lab 8.7 (optional) look around: read-only ls and glob",
    "lab8_8": "Lab 8.8 (optional) see before you write: diff and confirmation",
    "lab8_9": "Lab 8.9 (optional) edit like a careful colleague",
}


def pytest_configure(config: pytest.Config) -> None:
    for marker, title in STAGES.items():
        config.addinivalue_line("markers", f"{marker}: {title}")
    config.addinivalue_line(
        "markers", "challenge: proves more than the chapter asks; optional, scored as a bonus"
    )
    config.addinivalue_line(
        "markers",
        "watches_the_event_loop: the test's own event loop must run while a tool call runs, "
        "or must reach the call within one of its steps (the grader runs such a test in the "
        "process of the tools)",
    )


@pytest.fixture(autouse=True)
def reap_processes_left_behind(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """After each test, end every process it started (children, escapees that still work in
    its directory, their process groups), even when the code under test failed to: one
    test's leftovers must not disturb the next test, or the machine."""
    before = snapshot()
    yield
    reap(before, request.node.funcargs.get("tmp_path"))


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """An empty workspace directory; `outside` is its sibling, for escape attempts."""
    root = tmp_path / "workspace"
    root.mkdir()
    yield root
    _release_fifos(tmp_path)


def _release_fifos(directory: Path) -> None:
    """Code under test that opened a FIFO without O_NONBLOCK waits in a worker thread for
    the other end forever, and the interpreter waits for that thread when it exits: open
    the other end of every FIFO once, so that no test run hangs after its last test."""
    for folder, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(folder, name)
            if not stat.S_ISFIFO(os.lstat(path).st_mode):
                continue
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                with contextlib.suppress(OSError):  # ENXIO: nobody waits on the other end
                    os.close(os.open(path, flags))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    root = tmp_path / "outside"
    root.mkdir()
    (root / "secret.txt").write_text("TOP SECRET\n")
    return root


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Reports (JUnit XML) carry each test's markers, so tools can tell stages and
    # challenge tests apart without collecting again.
    for item in items:
        markers = " ".join(sorted({marker.name for marker in item.iter_markers()}))
        item.user_properties.append(("markers", markers))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    # CPython 3.11 before the fix of gh-106905 corrupts its AST state when a finalizer runs
    # while pytest parses source to show a failure (an unfinished stage leaves failed
    # asyncio tasks in reference cycles). Keep the collector off while the report is built.
    if call.excinfo is None:
        yield  # nothing to show, no source to parse
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish() -> None:
    # pytest keeps a failed test's error in sys.last_value (for post-mortem debugging) until
    # the next failure, and with it every frame of its traceback and what they allocated.
    # Code under test that filled the address space (the grader limits it) then left the
    # next test too little to start a thread. Each test starts without the last one's.
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        with contextlib.suppress(AttributeError):
            delattr(sys, name)
    # What code under test left in reference cycles waits for the collector; free it now
    # when the process is near its limit (the only time it matters).
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit != resource.RLIM_INFINITY and psutil.Process().memory_info().vms > limit // 2:
        gc.collect()
