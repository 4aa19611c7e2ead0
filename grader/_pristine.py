"""The pristine copy a grading run shares: the scaffold rendered with the lab's tests,
compiled for the runs of every job, and the inventory of its tests. Made once per process
and grading key."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from coursekit.assemble import assemble_practice_dir
from coursekit.bytecode import CopiedFiles, hash_checked, writing_env
from coursekit.lab import Lab
from grader._scoring import InventoryItem

_COLLECT = """
import json, sys, pytest
class Collector:
    items = []
    def pytest_collection_modifyitems(self, items):
        for item in items:
            self.items.append([item.nodeid, sorted({m.name for m in item.iter_markers()})])
collector = Collector()
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                   plugins=[collector])
print("INVENTORY" + json.dumps(collector.items))
"""


@dataclass(frozen=True)
class _Pristine:
    inventory: tuple[InventoryItem, ...]
    files: CopiedFiles  # every file of the copy, its compiled code included


# The pristine copies made in this process, by grading key: the key covers everything a
# copy is made of (tests, lab.toml, scaffold), and making one takes a render (copier, about
# 0.2 CPU-seconds) and a pytest start and collection (about a second), which a process that
# grades again need not repeat.
_MADE: dict[str, _Pristine] = {}


def make_pristine(lab: Lab, pristine: Path, key: str) -> list[InventoryItem]:
    """Make the pristine copy (the scaffold rendered and the lab's tests) at ``pristine``,
    compiled for the runs of every job (``coursekit.bytecode``: the judge and the in-host
    pytest then rewrite no test module), and return every test of it with its stage. Once
    per process for a grading ``key``; a later copy under that key is written from the
    files of the first, as they were before any job ran."""
    known = _MADE.get(key)
    if known is None:
        assemble_practice_dir(lab, pristine)
        known = remember_pristine(key, pristine, _collect(lab, pristine))
    else:
        known.files.install(pristine)
    return list(known.inventory)


def remember_pristine(key: str, pristine: Path, inventory: Iterable[InventoryItem]) -> _Pristine:
    """Keep ``pristine``, a copy made by ``make_pristine`` under ``key`` (in this process or
    another: the project's tests share one per run), and its inventory as this process's
    copy for that key; a copy already kept for it stays."""
    known = _MADE.get(key)
    if known is None:
        known = _MADE[key] = _Pristine(tuple(inventory), CopiedFiles.of(pristine, "*"))
    return known


def _collect(lab: Lab, pristine: Path) -> list[InventoryItem]:
    """Collect, writing the bytecode of the tests as pytest rewrites them; then every other
    module compiled hash-checked (a student's module mounted on its stub is never served the
    stub's code)."""
    result = subprocess.run(
        [sys.executable, "-c", _COLLECT],
        cwd=pristine,
        env=writing_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in result.stdout.splitlines() if x.startswith("INVENTORY")), None)
    if line is None:
        raise RuntimeError(f"cannot collect the pristine tests:\n{result.stdout}{result.stderr}")
    hash_checked(pristine)
    by_marker = {stage.marker: stage.id for stage in lab.stages}
    items = []
    for nodeid, markers in json.loads(line.removeprefix("INVENTORY")):
        stage = next((by_marker[m] for m in markers if m in by_marker), None)
        if stage is not None:
            items.append(InventoryItem(nodeid, stage, "challenge" in markers))
    return items
