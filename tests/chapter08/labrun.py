"""Build variants of a practice directory for the project's tests."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from coursekit import Lab
from coursekit.assemble import apply_mutant, assemble_practice_dir, overlay_solution
from coursekit.bytecode import CopiedFiles, compile_in_place, hash_checked
from coursekit.lab import Mutant
from coursekit.runner import TestRun, run_lab_tests


def build(
    lab: Lab, base: Path, destination: Path, solved: list[str], mutant: Mutant | None = None
) -> Path:
    """Copy a rendered base directory (its compiled code too) and overlay solutions (and a
    mutant) on it."""
    shutil.copytree(base, destination)
    solve(lab, destination, solved)
    if mutant is not None:
        apply_mutant(destination, mutant)
    return destination


def solve(lab: Lab, directory: Path, stage_ids: Iterable[str]) -> None:
    """The solution's modules of these stages in place of the directory's, with their
    compiled code (hash-checked: a module changed later is compiled afresh, never stale)."""
    stage_ids = tuple(stage_ids)
    overlay_solution(lab, directory, stage_ids)
    _solution_code(lab, stage_ids).install(directory)


@functools.cache
def _solution_code(lab: Lab, stage_ids: tuple[str, ...]) -> CopiedFiles:
    """The solution's modules of these stages compiled hash-checked, once per process."""
    with tempfile.TemporaryDirectory(prefix="solution-code-") as scratch:
        root = Path(scratch)
        for module in (m for stage_id in stage_ids for m in lab.stage(stage_id).modules):
            (root / module).parent.mkdir(parents=True, exist_ok=True)
        overlay_solution(lab, root, stage_ids)
        hash_checked(root)
        return CopiedFiles.of(root)


def run_beside_the_stubs(lab: Lab, base: Path, tmp_path: Path, name: str, source: str) -> TestRun:
    """Run one extra test file (with the lab's conftest and helpers) in a stub directory."""
    directory = build(lab, base, tmp_path / "stubs", [])
    (directory / "tests" / name).write_text(source, encoding="utf-8")
    return run_lab_tests(directory, extra=(f"tests/{name}",))


def render_base(lab: Lab, destination: Path, *, compiled: bool = False) -> Path:
    """A practice directory; ``compiled`` once (a collection's CPU) for the many runs of its
    copies."""
    assemble_practice_dir(lab, destination)
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
