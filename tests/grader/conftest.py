"""What every grader test worker shares: the grader's pristine copy of the lab."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from grader import _pristine
from grader._scoring import InventoryItem
from grader._session import grading_key
from tests.grader.graded_class import LAB
from tests.made_once import made_once


@pytest.fixture(scope="session", autouse=True)
def pristine_made_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> None:
    """The grader makes its pristine copy of the lab (a render and a pytest collection,
    about 2 CPU-seconds) once per process and grading key; here it is made once per run,
    by the first worker that grades, and every other worker's grader starts from it, as a
    second grading in one process does (test_judge proves that path). Grader processes the
    tests start make their own."""
    key = grading_key(LAB)

    def make(target: Path) -> None:
        inventory = _pristine.make_pristine(LAB, target / "copy", key)
        (target / "inventory.json").write_text(
            json.dumps([dataclasses.astuple(item) for item in inventory])
        )

    shared = made_once(tmp_path_factory, worker_id, f"pristine-{key}", make)
    inventory = json.loads((shared / "inventory.json").read_text())
    _pristine.remember_pristine(key, shared / "copy", (InventoryItem(*x) for x in inventory))
