"""What the reference tools' fault tests share: a solved practice directory per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from coursekit import load_lab
from tests.chapter08.labrun import build


@pytest.fixture(scope="module")
def solved(practice_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A practice directory with every stage solved (the reference), the module's own."""
    lab = load_lab("08")
    directory = tmp_path_factory.mktemp("solved") / "practice"
    return build(lab, practice_base, directory, [s.id for s in lab.stages])


@pytest.fixture(scope="module")
def solved_src(solved: Path) -> Path:
    """The ``src`` of the module's solved practice directory."""
    return solved / "src"
