"""The reference write and edit under fault injection: benchmarks/faults.py, run small.

Each scenario runs in its own process group, so whatever the tools leave running is
ended with the group, also when the script hangs or fails.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.tools.own_session import communicate_in_own_session

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "benchmarks" / "faults.py"

pytestmark = pytest.mark.slow


def faults(*arguments: str) -> dict[str, dict[str, int]]:
    out, err = communicate_in_own_session(
        [sys.executable, str(FAULTS), "--json", *arguments], timeout=240
    )
    assert out.strip(), f"faults.py printed no result: {err[-2000:]}"
    counts: dict[str, dict[str, int]] = json.loads(out.strip().splitlines()[-1])
    return counts


def test_killed_writers_leave_a_whole_file_and_no_temp_after_the_next_write() -> None:
    counts = faults("--only", "kills", "--kills", "15")["kills"]
    assert (counts["kills"], counts["corrupt"], counts["leaked"]) == (15, 0, 0), (
        "a SIGKILL during a write must leave one whole version, and the next write in the "
        f"directory must remove the dead writer's temp file: {counts}"
    )


def test_no_edit_reported_applied_is_lost_across_processes_loops_and_cancels() -> None:
    counts = faults("--only", "processes,loops,cancelled", "--edits", "100", "--trials", "10")
    assert counts["processes"] == {"reported": 200, "lost": 0}, counts["processes"]
    assert counts["loops"] == {"reported": 200, "lost": 0}, counts["loops"]
    assert counts["cancelled"] == {"trials": 10, "lost": 0}, counts["cancelled"]


def test_special_files_are_refused_at_once_and_left_alone() -> None:
    counts = faults("--only", "special")["special"]
    assert counts == {"calls": 8, "errors": 8, "hung": 0, "changed": 0}, counts


def test_no_exception_escapes_write_or_edit() -> None:
    counts = faults("--only", "fuzz", "--fuzz", "150")["fuzz"]
    assert counts == {"examples": 300, "escaped": 0}, counts


def test_the_next_write_removes_only_the_temp_files_of_dead_writers() -> None:
    counts = faults("--only", "stale")["stale"]
    assert counts == {"leaked": 0, "live_kept": 1}, (
        f"a dead writer's temp file goes, a live writer's stays: {counts}"
    )


def test_write_and_edit_keep_mode_owner_and_extended_attributes() -> None:
    counts = faults("--only", "metadata")["metadata"]
    assert counts["changed"] == 0, counts
    if os.geteuid() == 0:
        assert counts["owner_checked"] == 1, counts
