"""A directory that every test worker of one run shares, made by the first that needs it."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def made_once(
    tmp_path_factory: pytest.TempPathFactory,
    worker_id: str,
    name: str,
    make: Callable[[Path], object],
) -> Path:
    """``make(target)`` once per run, whichever worker comes first; the others wait for it
    and share the result, which nobody may change (tests use copies)."""
    if worker_id == "master":  # not under xdist: this run's own temporary directory
        shared = tmp_path_factory.mktemp("shared")
    else:  # the parent of every worker's temporary directory, this run's alone
        shared = tmp_path_factory.getbasetemp().parent
    target = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / f"{name}.done").exists():
            shutil.rmtree(target, ignore_errors=True)  # a worker that died halfway
            make(target)
            (shared / f"{name}.done").touch()
    return target
