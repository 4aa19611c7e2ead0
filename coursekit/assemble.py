"""Put a practice directory together from the course's overlays.

practice directory = scaffold rendered (copier) + the lab's tests
solved directory   = that + the solution's modules for some or all stages
mutant directory   = a solved directory with one mutant applied to one module
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from coursekit.lab import Lab, Mutant
from coursekit.layout import SCAFFOLD, solution_root
from coursekit.release import Release


class AssemblyError(Exception):
    """The overlays do not fit together (missing solution, stale mutant)."""


def assemble_practice_dir(
    lab: Lab,
    destination: Path,
    *,
    solved_stages: Iterable[str] = (),
    mutant: Mutant | None = None,
    release: Release | None = None,
) -> Path:
    """Render a practice directory at ``destination`` (which must not exist yet), from a
    template release (so that copier can update it later) or straight from scaffold/."""
    if release is not None:
        render_release(lab, destination, release)
    else:
        render_scaffold(lab, destination)
        add_lab_tests(lab, destination)
    overlay_solution(lab, destination, solved_stages)
    if mutant is not None:
        apply_mutant(destination, mutant)
    return destination


def render_scaffold(lab: Lab, destination: Path) -> None:
    _render(lab, SCAFFOLD, destination)


def render_release(lab: Lab, destination: Path, release: Release) -> None:
    """The same template with the tests inside, from a tagged release: copier records
    where it came from (_src_path, _commit) in the answers file."""
    _render(lab, release.repository, destination, release.version)


def _render(lab: Lab, template: Path, destination: Path, version: str | None = None) -> None:
    import copier  # here, not at the top: its import costs every command ~0.5 s of CPU

    copier.run_copy(
        str(template),
        str(destination),
        data={"chapter": lab.chapter, "chapter_title": lab.title, "lab_dir": lab.root.name},
        vcs_ref=version,
        defaults=True,
        quiet=True,
    )


def add_lab_tests(lab: Lab, destination: Path) -> None:
    shutil.copytree(
        lab.tests_dir,
        destination / "tests",
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )


def overlay_solution(lab: Lab, destination: Path, stage_ids: Iterable[str]) -> None:
    for stage_id in stage_ids:
        for module in lab.stage(stage_id).modules:
            source = solution_root(lab.root.name) / module
            if not source.is_file():
                raise AssemblyError(
                    f"The solution of stage {stage_id} is missing {module}; solutions/ is not "
                    "shipped in a student release of the kit."
                )
            shutil.copyfile(source, destination / module)


def apply_mutant(directory: Path, mutant: Mutant) -> None:
    target = directory / mutant.module
    code = target.read_text(encoding="utf-8")
    for replacement in mutant.replacements:
        found = code.count(replacement.find)
        if found != 1:
            raise AssemblyError(
                f"Mutant {mutant.name!r}: the text to replace occurs {found} times in "
                f"{mutant.module} (it must occur once); update its patch in the solution's "
                "mutants.toml."
            )
        code = code.replace(replacement.find, replacement.replace)
    target.write_text(code, encoding="utf-8")
