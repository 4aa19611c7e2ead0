"""What the students' commands' tests share: one new practice directory, made once, and
a copy of it per module."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import pytest

from coursekit.bytecode import compile_in_place
from tests.cli.commands import copy_of, practice


@pytest.fixture(scope="session")
def new_practice_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """``practice.py 08 DIR``, compiled as a student's first pytest run leaves it: made by
    the first test worker that needs it (seconds of CPU), never changed; tests use copies."""
    if worker_id == "master":  # not under xdist: this run's own temporary directory
        shared = tmp_path_factory.mktemp("shared")
    else:  # the parent of every worker's temporary directory, this run's alone
        shared = tmp_path_factory.getbasetemp().parent
    target = shared / "new-lab08"
    with open(shared / "new-lab08.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "new-lab08.done").exists():
            shutil.rmtree(target, ignore_errors=True)  # a worker that died halfway
            result = practice("08", target)
            assert result.returncode == 0, result.stderr
            compile_in_place(target)
            (shared / "new-lab08.done").touch()
    return target


@pytest.fixture(scope="module")
def fresh(new_practice_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A module's own new practice directory: commands run in it may leave their state."""
    return copy_of(new_practice_dir, tmp_path_factory.mktemp("fresh"))
