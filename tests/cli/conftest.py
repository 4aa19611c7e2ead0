"""What the students' commands' tests share: one new practice directory, made once, and
a copy of it per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from coursekit.bytecode import compile_in_place
from tests.cli.commands import copy_of, practice
from tests.made_once import made_once


@pytest.fixture(scope="session")
def new_practice_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """``practice.py 08 DIR``, compiled as a student's first pytest run leaves it: made by
    the first test worker that needs it (seconds of CPU), never changed; tests use copies."""

    def make(target: Path) -> None:
        result = practice("08", target)
        assert result.returncode == 0, result.stderr
        compile_in_place(target)

    return made_once(tmp_path_factory, worker_id, "new-lab08", make)


@pytest.fixture(scope="module")
def fresh(new_practice_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A module's own new practice directory: commands run in it may leave their state."""
    return copy_of(new_practice_dir, tmp_path_factory.mktemp("fresh"))
