"""Ending a grading run: its process group, its descendants and its escapees."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil

RUN_MARKER = "GRADER_RUN"


def kill_everything(process: subprocess.Popen[bytes], marker: str, started: float) -> None:
    """The group, every descendant, and any process that left the tree but still carries
    this run's marker in its environment; idempotent."""
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
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [c for c in descendants if _alive(c)]
        if not alive:
            return
        time.sleep(0.01)


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


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
