"""What the reference tools' fault tests share: a solved practice directory per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from coursekit import assemble_practice_dir, load_lab


@pytest.fixture(scope="module")
def solved_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``src`` of a practice directory with every stage solved (the reference)."""
    lab = load_lab("08")
    directory = tmp_path_factory.mktemp("solved") / "practice"
    assemble_practice_dir(lab, directory, solved_stages=[s.id for s in lab.stages])
    return directory / "src"
