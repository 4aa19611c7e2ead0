"""Where the parts of the course live in the repository."""

from __future__ import annotations

from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
LABS = COURSE_ROOT / "labs"
SCAFFOLD = COURSE_ROOT / "scaffold"
SOLUTIONS = COURSE_ROOT / "solutions"


class LayoutError(Exception):
    """A part of the course is missing; the message says which and what to do."""


def lab_root(chapter: str) -> Path:
    """The chapter's folder, found by its number (``08`` finds ``labs/08-coding-tools``)."""
    matches = sorted(LABS.glob(f"{chapter}-*")) if LABS.is_dir() else []
    if not matches:
        known = ", ".join(sorted(p.name.split("-")[0] for p in LABS.glob("*-*"))) or "none"
        raise LayoutError(f"No lab for chapter {chapter!r} under {LABS}. Known chapters: {known}.")
    return matches[0]


def solution_root(lab_dir_name: str) -> Path:
    return SOLUTIONS / lab_dir_name
