"""End every process a test left behind, even when the code under test is wrong.

The Lab 8 conftest runs this after each test; ``practice.py break`` runs it after a mutant's
test run. Keep this file as it is: grading uses its own copy.

A process counts as left behind when it did not exist before the test (its pid is not in
the snapshot taken then; process start times are too coarse to tell) and is a descendant of
the test process, or works in (or names) the test's directory: that catches children that
escaped their parent with setsid or a double fork, as their working directory stays.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import psutil

_GONE_TIMEOUT_SECONDS = 5.0


def snapshot() -> set[int]:
    """The processes that exist now: never reaped."""
    return set(psutil.pids())


def leftovers(before: set[int], directory: Path | None) -> list[psutil.Process]:
    """Live processes that belong to the test and are not in ``before``. Only processes
    new since the snapshot are looked at, so the cost follows what the test started."""
    # The test process and its ancestors are in ``before``: they existed when it was taken.
    me = psutil.Process()
    spared = before | {me.pid}
    root = str(directory.resolve()) if directory is not None else None
    found = []
    for pid in set(psutil.pids()) - spared:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if _alive(process) and (_descends_from(process, me.pid) or _works_in(process, root)):
                found.append(process)
    return found


def _descends_from(process: psutil.Process, ancestor: int) -> bool:
    return any(parent.pid == ancestor for parent in process.parents())


def _works_in(process: psutil.Process, root: str | None) -> bool:
    if root is None:
        return False
    # A deleted directory still shows as the cwd, with a suffix.
    places = [process.cwd().removesuffix(" (deleted)"), *process.cmdline()]
    return any(place == root or place.startswith(root + os.sep) for place in places)


def reap(before: set[int], directory: Path | None = None) -> int:
    """SIGKILL what the test left behind (and the process groups they lead); wait until it
    is gone. Returns how many processes were killed."""
    total = 0
    for _ in range(5):  # a process may fork while it is killed: look again
        victims = leftovers(before, directory)
        if not victims:
            break
        for process in victims:
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(process.pid) == process.pid:
                    os.killpg(process.pid, signal.SIGKILL)
                process.kill()
        psutil.wait_procs(victims, timeout=_GONE_TIMEOUT_SECONDS)
        total += len(victims)
    return total


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
