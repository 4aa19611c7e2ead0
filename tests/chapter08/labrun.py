"""Build variants of a practice directory for the project's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from coursekit import Lab
from coursekit.assemble import add_lab_tests, apply_mutant, overlay_solution, render_scaffold
from coursekit.lab import Mutant


def build(
    lab: Lab, base: Path, destination: Path, solved: list[str], mutant: Mutant | None = None
) -> Path:
    """Copy a rendered base directory and overlay solutions (and a mutant) on it."""
    shutil.copytree(base, destination)
    overlay_solution(lab, destination, solved)
    if mutant is not None:
        apply_mutant(destination, mutant)
    return destination


def render_base(lab: Lab, destination: Path) -> Path:
    render_scaffold(lab, destination)
    add_lab_tests(lab, destination)
    return destination
