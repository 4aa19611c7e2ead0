"""Stages still on their stubs: recorded as their stubs fail them, never run.

A stage's behaviour lives in its own modules and in those its catalogued mistakes patch
(lab.toml: confirmation is wired into write, edit and bash; careful edits into write and
edit). When all of these are still the pristine stubs, every test of the stage fails with
the stub's NotImplementedError (the project's ``test_each_stage_fails_on_its_stub_alone``
proves it of every test, with the reference elsewhere). Running those tests would cost a
judge and an in-host pytest a collection and hundreds of failing tests each: the grader
records the same failures instead, and starts no sandbox at all for a submission whose
every stage is still its stub. Only what the stub-alone proof cannot cover is given up:
code of a stage placed in a module of another stage, which its catalogue does not name
(say containment checked inside read.py, with containment.py left the stub).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coursekit.lab import Lab, Stage
from coursekit.runner import NOT_IMPLEMENTED
from grader._scoring import InventoryItem

# Written where the judge's message would be; NOT_IMPLEMENTED first, as in a stub's failure
# (what the diagnosis and the reports read as "unfinished, not mistaken").
STUB_FAILURE = (
    NOT_IMPLEMENTED + ": Lab {stage} is not implemented yet "
    "(not run: every module of the stage is still its stub)"
)


def stages_on_their_stubs(lab: Lab, pristine: Path, modules: dict[str, bytes]) -> set[str]:
    """The stages whose every module, and every module their mutants patch, is byte for byte
    the pristine copy's: a module the submission lacks stays the stub (the judge runs the
    stub for it), as does a module of the given runtime (the judge runs its own)."""
    return {
        stage.id
        for stage in lab.stages
        if all(modules.get(m) in (None, (pristine / m).read_bytes()) for m in _reached(stage))
    }


def _reached(stage: Stage) -> set[str]:
    return {*stage.modules, *(mutant.module for mutant in stage.mutants)}


def with_stub_records(
    records: list[dict[str, Any]], inventory: list[InventoryItem], stubbed: set[str]
) -> tuple[list[dict[str, Any]], int]:
    """The run's ``records`` with the tests of ``stubbed`` stages recorded failed, as their
    stubs fail them; and how many records the run had for those tests, dropped: their files
    were never collected, so an honest run has none."""
    skipped = {item.nodeid for item in inventory if item.stage in stubbed}
    kept = [r for r in records if r.get("type") != "test" or r.get("nodeid") not in skipped]
    return kept + [
        {
            "type": "test",
            "nodeid": item.nodeid,
            "passed": False,
            "message": STUB_FAILURE.format(stage=item.stage),
        }
        for item in inventory
        if item.stage in stubbed
    ], len(records) - len(kept)
