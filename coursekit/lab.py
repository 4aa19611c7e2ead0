"""A lab as its ``lab.toml`` describes it: stages, modules, hints, weights and mutants.

The data file is the single source of these facts; the CLI, the project's tests and the
grader read them from here. A mutant's patch of the reference solution quotes the
reference code, so it lives with the solution (``solutions/NN-*/mutants.toml``): where a
release of the kit ships no solution, a mutant has no replacements (and nothing could be
patched anyway).
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from coursekit.layout import lab_root, solution_root

MUTANT_PATCHES = "mutants.toml"


@dataclass(frozen=True)
class Replacement:
    find: str
    replace: str


@dataclass(frozen=True)
class Mutant:
    name: str
    stage: str
    description: str
    invariant: str
    module: str  # path inside a practice directory, e.g. src/picourse/coding_tools/read.py
    replacements: tuple[Replacement, ...]  # empty where the kit ships no solution


@dataclass(frozen=True)
class Stage:
    id: str  # "8.1"
    marker: str  # "lab8_1"
    title: str
    modules: tuple[str, ...]
    tests: str  # the stage's test file, relative to the lab's tests/ folder
    weight: float
    optional: bool
    hints: tuple[str, ...]
    mutants: tuple[Mutant, ...]


@dataclass(frozen=True)
class Lab:
    root: Path
    chapter: str
    title: str
    stages: tuple[Stage, ...]

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    def stage(self, stage_id: str) -> Stage:
        for stage in self.stages:
            if stage.id == stage_id:
                return stage
        known = ", ".join(s.id for s in self.stages)
        raise KeyError(f"Unknown stage {stage_id!r}; this lab has {known}.")

    def stages_before(self, stage_id: str) -> tuple[Stage, ...]:
        ids = [s.id for s in self.stages]
        return self.stages[: ids.index(self.stage(stage_id).id)]

    @property
    def lab_modules(self) -> tuple[str, ...]:
        """Every module a student writes (what a graded submission contributes)."""
        return tuple(module for stage in self.stages for module in stage.modules)


def load_lab(chapter: str = "08") -> Lab:
    root = lab_root(chapter)
    patches = solution_root(root.name) / MUTANT_PATCHES
    return _parsed(
        root,
        (root / "lab.toml").read_text(encoding="utf-8"),
        patches.read_text(encoding="utf-8") if patches.is_file() else None,
    )


# Parsed once per process and content: a test run loads the lab in every test module (and
# tomllib takes ~15 ms for the two files), while a Lab is immutable; a changed file is a
# new key, so nothing stale is ever returned.
@functools.lru_cache(maxsize=8)
def _parsed(root: Path, lab_toml: str, mutants_toml: str | None) -> Lab:
    data = tomllib.loads(lab_toml)
    patches = _mutant_patches(mutants_toml)
    stages = []
    for raw in data["stages"]:
        mutants = tuple(
            Mutant(
                name=m["name"],
                stage=raw["id"],
                description=m["description"],
                invariant=m["invariant"],
                module=m["module"],
                replacements=_take_patch(patches, raw["id"], m["name"]),
            )
            for m in raw.get("mutants", [])
        )
        stages.append(
            Stage(
                id=raw["id"],
                marker=raw["marker"],
                title=raw["title"],
                modules=tuple(raw["modules"]),
                tests=raw["tests"],
                weight=float(raw["weight"]),
                optional=bool(raw.get("optional", False)),
                hints=tuple(raw.get("hints", ())),
                mutants=mutants,
            )
        )
    if patches:
        extra = ", ".join(f"{stage} {name}" for stage, name in patches)
        raise ValueError(f"{MUTANT_PATCHES} patches mutants lab.toml does not list: {extra}")
    return Lab(root, data["lab"]["chapter"], data["lab"]["title"], tuple(stages))


def _take_patch(
    patches: dict[tuple[str, str], tuple[Replacement, ...]] | None, stage: str, name: str
) -> tuple[Replacement, ...]:
    if patches is None:
        return ()
    try:
        return patches.pop((stage, name))
    except KeyError:
        raise ValueError(
            f"{MUTANT_PATCHES} of the solution has no patch for mutant {name!r} of stage "
            f"{stage}: add one, or remove the mutant from lab.toml"
        ) from None


def _mutant_patches(text: str | None) -> dict[tuple[str, str], tuple[Replacement, ...]] | None:
    """Each mutant's replacements by (stage, name), from the solution's mutants.toml; None
    where the kit ships no solution."""
    if text is None:
        return None
    data = tomllib.loads(text)
    return {
        (m["stage"], m["name"]): tuple(Replacement(r["find"], r["replace"]) for r in m["replace"])
        for m in data["mutant"]
    }
