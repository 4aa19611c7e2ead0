"""What the grading tests share: a submission made of reference modules, and the gradebook."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

from coursekit import load_lab
from coursekit.layout import SCAFFOLD, solution_root

LAB = load_lab("08")


def solved_modules(destination: Path, stages: list[str] | None = None) -> Path:
    """A minimal practice directory holding the reference modules of some stages."""
    for stage in LAB.stages:
        if stages is None or stage.id in stages:
            for module in stage.modules:
                target = destination / module
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(solution_root(LAB.root.name) / module, target)
    (destination / "src/picourse/coding_tools").mkdir(parents=True, exist_ok=True)
    return destination


def start_on_its_stub(destination: Path, module: str) -> None:
    """``module`` as the scaffold gives it, one comment apart: no longer the stub, so the
    grader runs its stage, on the stub's code."""
    target = destination / module
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text((SCAFFOLD / "template" / module).read_text() + "# started\n")


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))
    return {row["student"]: row for row in rows}


def result_of(out: Path, student: str) -> dict[str, Any]:
    """The ``result.json`` the grader wrote for ``student`` under ``out``."""
    data: dict[str, Any] = json.loads((out / "submissions" / student / "result.json").read_text())
    return data
