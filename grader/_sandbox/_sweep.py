"""Ending a grading run: its process group, its descendants, its escapees, and whatever a
job's uid or cgroup still holds."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

RUN_MARKER = "GRADER_RUN"
SWEEP_ROUNDS = 200  # a fork bomb under its process limit is ended in a few rounds


def kill_everything(
    process: subprocess.Popen[bytes], marker: str, started: float, groups: tuple[Path, ...] = ()
) -> None:
    """The group, every descendant, any process that left the tree but still carries this
    run's marker in its environment, and everything in the run's cgroups ``groups``
    (until they are empty: a sandbox's pid namespace ends only once all of it has exited);
    idempotent."""
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    descendants += marked(marker, started)
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()
    _wait_gone(descendants)
    for group in groups:
        drain_cgroup(group)


def end_every_run() -> None:
    """Everything the grader started, now: called when the grader itself is stopped."""
    with contextlib.suppress(psutil.Error):
        children = psutil.Process().children(recursive=True)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()


def end_uid(uid: int) -> bool:
    """Kill every process of ``uid`` until none is left; False if one survives."""
    for _ in range(SWEEP_ROUNDS):
        found = [
            p
            for p in psutil.process_iter(["uids"])
            if p.info["uids"] is not None and uid in p.info["uids"] and _alive(p)
        ]
        if not found:
            return True
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        _wait_gone(found, seconds=0.5)
    return False


def end_cgroup(group: Path) -> bool:
    """Kill every process in a cgroup and remove it; False if that fails."""
    for _ in range(SWEEP_ROUNDS):
        if not drain_cgroup(group):
            return False
        try:
            group.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            continue  # a process joined between the last look and the removal
        return True
    return False


def drain_cgroup(group: Path) -> bool:
    """Kill every process in a cgroup until it holds none (or no longer exists)."""
    for _ in range(SWEEP_ROUNDS):
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return True
        except OSError:
            return False
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)  # exiting takes the kernel a while; the next round reads what is left
    return False


def marked(marker: str, started: float) -> list[psutil.Process]:
    found = []
    for candidate in psutil.process_iter(["create_time"]):
        try:
            if candidate.info["create_time"] >= started - 1 and (
                candidate.environ().get(RUN_MARKER) == marker
            ):
                found.append(candidate)
        except psutil.Error:
            continue
    return found


def _wait_gone(processes: list[psutil.Process], seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not [p for p in processes if _alive(p)]:
            return
        time.sleep(0.01)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
