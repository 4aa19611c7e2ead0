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
    """Live processes that belong to the test and are not in ``before``."""
    me = psutil.Process()
    spared = before | {me.pid} | {parent.pid for parent in me.parents()}
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        for child in me.children(recursive=True):
            found[child.pid] = child
    if directory is not None:
        root = str(directory.resolve())
        for process in psutil.process_iter(["create_time", "cwd", "cmdline"]):
            info = process.info
            # A deleted directory still shows as the cwd, with a suffix.
            places = [(info["cwd"] or "").removesuffix(" (deleted)"), *(info["cmdline"] or [])]
            if any(place == root or place.startswith(root + os.sep) for place in places):
                found[process.pid] = process
    return [process for pid, process in found.items() if pid not in spared and _alive(process)]


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
