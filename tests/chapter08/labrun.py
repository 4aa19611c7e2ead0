"""Build variants of a practice directory for the project's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from coursekit import Lab
from coursekit.assemble import add_lab_tests, apply_mutant, overlay_solution, render_scaffold
from coursekit.bytecode import compile_in_place
from coursekit.lab import Mutant
from coursekit.runner import TestRun, run_lab_tests


def build(
    lab: Lab, base: Path, destination: Path, solved: list[str], mutant: Mutant | None = None
) -> Path:
    """Copy a rendered base directory (its compiled code too) and overlay solutions (and a
    mutant) on it."""
    shutil.copytree(base, destination)
    overlay_solution(lab, destination, solved)
    if mutant is not None:
        apply_mutant(destination, mutant)
    return destination


def run_beside_the_stubs(lab: Lab, base: Path, tmp_path: Path, name: str, source: str) -> TestRun:
    """Run one extra test file (with the lab's conftest and helpers) in a stub directory."""
    directory = build(lab, base, tmp_path / "stubs", [])
    (directory / "tests" / name).write_text(source, encoding="utf-8")
    return run_lab_tests(directory, extra=(f"tests/{name}",))


def render_base(lab: Lab, destination: Path, *, compiled: bool = False) -> Path:
    """A practice directory; ``compiled`` once (a collection's CPU) for the many runs of its
    copies."""
    render_scaffold(lab, destination)
    add_lab_tests(lab, destination)
    if compiled:
        compile_in_place(destination)
    return destination


def over_time_limit_prefix(lab: Lab) -> str:
    """The prefix the lab tests give a failure decided by wall-clock time, read from the
    lab's own helpers (the grader and the signatures recognise it there)."""
    source = (lab.root / "tests" / "lab_helpers.py").read_text(encoding="utf-8")
    line = next(x for x in source.splitlines() if x.startswith("OVER_TIME_LIMIT = "))
    value = line.removeprefix("OVER_TIME_LIMIT = ")
    assert value.startswith('"') and value.endswith('"'), line
    return value.strip('"')
