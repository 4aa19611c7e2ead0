"""Fault scenarios of the reference bash tool (issue: cleanup at any scale, no exception
for any input). Each runs in a process of its own against a solved practice directory, so
that its subreaper setting and its processes stay out of this test process."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCENARIOS = Path(__file__).with_name("bash_scenarios.py")

pytestmark = pytest.mark.slow


def scenario(src: Path, *args: str, cgroup: bool = True) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    if not cgroup:
        env["BASH_SCENARIO_NO_CGROUP"] = "1"
    completed = subprocess.run(
        [sys.executable, str(SCENARIOS), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Exception in callback" not in completed.stderr, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout.splitlines()[-1])
    return result


# Where the kernel lets this user create a cgroup, the tool uses it; the sweep alone (the
# path every other user takes) is proven too.
@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-if-allowed", "sweep-only"])
def test_quick_double_fork_daemons_leave_no_survivor(solved_src: Path, cgroup: bool) -> None:
    token = str(secrets.randbelow(10**8))
    result = scenario(solved_src, "daemons", "170", token, cgroup=cgroup)
    assert result["exit_code"] == 0
    assert result["survivors"] == [], f"{len(result['survivors'])} of 170 daemons survived"


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-if-allowed", "sweep-only"])
def test_a_process_that_changes_its_pid_every_2ms_does_not_survive(
    solved_src: Path, cgroup: bool
) -> None:
    token = str(secrets.randbelow(10**8))
    result = scenario(solved_src, "hopper", token, cgroup=cgroup)
    assert result["hopped"], "the hopper never started"
    assert result["survivors"] == [], f"the pid hopper survived as {result['survivors']}"


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-if-allowed", "sweep-only"])
def test_children_that_outlive_their_shell_get_the_grace_and_are_reaped(
    solved_src: Path, cgroup: bool
) -> None:
    result = scenario(solved_src, "late-orphans", cgroup=cgroup)
    assert result["timed_out"] and result["started"] == 5, result
    assert result["graced"] == 5, f"only {result['graced']} of 5 got the grace after SIGTERM"
    assert result["left"] == [], f"left unreaped (zombies of the tool's process): {result['left']}"


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-if-allowed", "sweep-only"])
def test_a_shell_started_but_never_attached_is_found_however_late_it_shows(
    solved_src: Path, cgroup: bool
) -> None:
    # Where asyncio cannot start the thread that watches bash, the tool never learns its
    # pid; two quiet passes right after the spawn can both fall inside its exec.
    result = scenario(solved_src, "unattached", str(secrets.randbelow(10**8)), cgroup=cgroup)
    assert not result["survived"], (
        f"the shell outlived the sweep of an unattached call after {result['looks']} looks: "
        "keep sweeping until something of the call is found or seen to die"
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sweep by /proc is Linux's")
def test_a_process_of_the_call_caught_in_its_exit_does_not_end_the_sweep(solved_src: Path) -> None:
    # The sweep alone (a cgroup would find the child by itself): while a child of the tool's
    # process exits, nothing leads to its own child, which only then becomes the tool's.
    result = scenario(solved_src, "exiting-parent", str(secrets.randbelow(10**8)), cgroup=False)
    assert result["survivors"] == [], (
        f"{result['survivors']} outlived the sweep, which ended at two quiet passes while a "
        f"process of the call was still exiting ({result['exiting_looks']} looks saw it so): "
        "a pass that sees a child of the tool's process exiting is not quiet"
    )


@pytest.mark.parametrize("pipe", [1, 2], ids=["stdout", "stderr"])
@pytest.mark.parametrize(
    ("how", "ends_with"), [("cancel", "cancelled"), ("timeout", "TimeoutError")]
)
def test_a_call_cancelled_while_its_shell_starts_leaves_nothing_running(
    solved_src: Path, pipe: int, how: str, ends_with: str
) -> None:
    # asyncio connects a new process's pipes over a few turns of the event loop after the
    # fork; a cancellation that lands there makes asyncio kill the shell alone and drop it.
    token = str(secrets.randbelow(10**8))
    result = scenario(solved_src, "cancelled-start", str(pipe), how, token)
    assert result["finished"], "the cancelled call hung (asyncio waits for the pipes)"
    assert result["ended"] == ends_with, (
        f"the call ended {result['ended']}: the cancellation must go on as it came (an "
        "asyncio.timeout turns only its own cancellation into TimeoutError)"
    )
    assert result["survivors"] == [], (
        f"the command's background child {result['survivors']} outlived the cancelled call: "
        "let the start finish, then sweep what it started"
    )


def test_a_call_cancelled_again_while_it_sweeps_still_ends_its_command_first(
    solved_src: Path,
) -> None:
    result = scenario(solved_src, "cancelled-twice", str(secrets.randbelow(10**8)))
    assert not result["ended_before_its_sweep"], (
        "the call ended at the second cancellation while its sweep still ran unawaited"
    )
    assert result["finished"] and result["ended"] == "cancelled", result
    assert result["transport_closed"], "the pipes were never let go (transport.close())"
    assert result["survivors"] == [], result


def test_every_command_gives_a_result_never_an_exception(solved_src: Path) -> None:
    result = scenario(solved_src, "fuzz")
    assert result["hazards"] >= 30 and result["printed"] >= 20, result


_FORKED_SUBREAPER = """
import ctypes, json, os
from picourse.coding_tools import command_scope

def subreaper() -> int:
    flag = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_...
    return flag.value

command_scope._become_subreaper()
pid = os.fork()
if pid == 0:
    command_scope._become_subreaper()
    os._exit(subreaper())
_, status = os.waitpid(pid, 0)
print(json.dumps({"parent": subreaper(), "child": os.waitstatus_to_exitcode(status)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are Linux's")
def test_a_forked_process_becomes_a_subreaper_of_its_own(solved_src: Path) -> None:
    # The flag is per process and fork does not pass it on: a child that took the parent's
    # "already done" for its own would lose its calls' orphans to the parent (which then
    # reaps, or trips over, processes it never started: mutmut's workers did).
    completed = subprocess.run(
        [sys.executable, "-c", _FORKED_SUBREAPER],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(solved_src)},
        timeout=60,
        check=True,
    )
    assert json.loads(completed.stdout) == {"parent": 1, "child": 1}, completed.stdout
