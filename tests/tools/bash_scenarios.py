"""Fault scenarios for the reference bash tool, run in a process of their own (the solved
practice directory's ``src`` on PYTHONPATH). Each prints one JSON object.

    python bash_scenarios.py daemons N TOKEN   # N quick double-fork daemons
    python bash_scenarios.py hopper TOKEN      # a process that changes its pid every 2 ms
    python bash_scenarios.py late-orphans      # children that die after their shell
    python bash_scenarios.py fuzz              # hypothesis: every command gives a result
    python bash_scenarios.py unattached TOKEN  # a shell whose marker shows only on a late look
    python bash_scenarios.py exiting-parent TOKEN  # a parent caught exiting, its child not ours yet
    python bash_scenarios.py cancelled-start PIPE HOW TOKEN  # cancelled while PIPE connects
    python bash_scenarios.py cancelled-twice TOKEN   # cancelled again while it sweeps
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import select
import shlex
import sys
import tempfile
import threading
import time
from asyncio import base_subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import psutil

from picourse.coding_tools import create_coding_tools
from picourse.coding_tools.command_scope import RUN_MARKER, CommandScope
from picourse.tool import Tool, ToolContext, ToolOutput

_PR_SET_CHILD_SUBREAPER = 36

# Every generation holds the FIFO "alive" open for writing: its reader sees end-of-file
# exactly when no generation is left. A look at the process table cannot promise that: a
# process that changes its pid every 2 ms is gone before a scan reads what it listed.
HOPPER = """
import os, sys, time
alive = os.open("alive", os.O_WRONLY)
open("hopping", "w").close()
while True:
    time.sleep(0.002)
    if os.fork():
        os._exit(0)
    os.setsid()  # out of the group too: only the sweep can find it
"""


# Ends 0.3 s after SIGTERM, well within the grace: its shell, which dies at once, is gone by
# then, so it ends as an orphan already re-parented to the tool's process.
SLOW_TO_DIE = """
import os, signal, sys, time
def finish(*_):
    time.sleep(0.3)
    open(f"finished-{os.getpid()}", "w").close()
    os._exit(0)
signal.signal(signal.SIGTERM, finish)
open(f"started-{os.getpid()}", "w").close()
while True:
    time.sleep(1)
"""


def bash(workspace: Path, command: str, **options: Any) -> ToolOutput:
    tool = create_coding_tools(workspace, "unrestricted", **options).get("bash")
    assert tool is not None
    params = tool.schema.validate({"command": command})

    async def call() -> ToolOutput:
        return await tool.execute(params, ToolContext("scenario"))

    return asyncio.run(call())


def survivors(token: str) -> list[int]:
    found = []
    me = psutil.Process()
    observers = {me.pid, *(p.pid for p in me.parents())}
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.pid in observers:
            continue
        cmdline = process.info["cmdline"] or []
        if process.info["status"] != psutil.STATUS_ZOMBIE and any(token in a for a in cmdline):
            found.append(process.pid)
    return found


def daemons(workspace: Path, count: int, token: str) -> dict[str, Any]:
    # Each subshell starts a sleep in a session of its own and exits at once: the sleeps are
    # orphans, outside the group, some still starting while the shell is already gone.
    command = f"for i in $(seq {count}); do (setsid sleep 4321.{token} &); done"
    out = bash(workspace, command)
    return {"exit_code": out.details.exit_code, "survivors": survivors(token)}


def hopper(workspace: Path, token: str) -> dict[str, Any]:
    (workspace / "hopper.py").write_text(HOPPER)
    os.mkfifo(workspace / "alive")
    alive = os.open(workspace / "alive", os.O_RDONLY | os.O_NONBLOCK)
    command = (
        f"{shlex.quote(sys.executable)} hopper.py {token} & "
        "while [ ! -e hopping ]; do sleep 0.01; done; sleep 0.2"
    )
    try:
        out = bash(workspace, command)
        # End-of-file at once if the tool ended every generation; the wait is only a bound.
        survived = not _writers_gone(alive, HOPPER_BOUND_SECONDS)
    finally:
        _end_descendants()
        os.close(alive)
    return {
        "exit_code": out.details.exit_code,
        "hopped": (workspace / "hopping").exists(),
        "survivors": ["hopper"] if survived else [],
    }


HOPPER_BOUND_SECONDS = 10.0


def _writers_gone(reader: int, timeout: float) -> bool:
    """Whether every writer of the FIFO has closed it (end-of-file), waiting up to timeout."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        select.select([reader], [], [], left)
        try:
            if os.read(reader, 4096) == b"":
                return True
        except BlockingIOError:
            continue  # woken without end-of-file: look again
    return False


def _end_descendants() -> None:
    """Whatever the tool did, leave nothing: this process is a subreaper (set in main), so
    whatever survived the tool, even a process that changes its pid, is re-parented to it
    and killed here, until nothing is left."""
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        left = psutil.Process().children(recursive=True)
        if not left:
            return
        for child in left:
            with contextlib.suppress(psutil.Error):
                child.kill()


def late_orphans(workspace: Path) -> dict[str, Any]:
    (workspace / "slow.py").write_text(SLOW_TO_DIE)
    python = shlex.quote(sys.executable)
    # Without the run's marker in their environment: only their process group says whose
    # they are once their shell is gone.
    command = (
        f"for i in 1 2 3 4 5; do env -u {RUN_MARKER} {python} slow.py & done; "
        "while [ $(ls | grep -c started-) -lt 5 ]; do sleep 0.01; done; wait"
    )
    out = bash(workspace, command, bash_timeout_ms=2000)
    started = [int(p.name.split("-")[1]) for p in workspace.glob("started-*")]
    left = [pid for pid in started if psutil.pid_exists(pid)]  # a zombie counts: unreaped
    graced = len(list(workspace.glob("finished-*")))
    return {
        "timed_out": out.details.timed_out,
        "started": len(started),
        "graced": graced,
        "left": left,
    }


def fuzz(workspace: Path) -> dict[str, Any]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    hazards = st.sampled_from(["\0", "\ud800", "\udfff", "x" * 131_072, "é" * 70_000])
    hazardous = st.builds(lambda a, h, b: a + h + b, st.text(max_size=20), hazards, st.text())
    checked = {"hazards": 0, "printed": 0}

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(hazardous)
    def refused(command: str) -> None:
        out = bash(workspace, command)
        assert isinstance(out, ToolOutput) and out.is_error, command[:80]
        assert out.details.exit_code is None
        checked["hazards"] += 1

    # Arbitrary text, printed (so nothing in it runs) with a small budget.
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\0")),
        st.integers(min_value=1, max_value=64),
    )
    def printed(value: str, budget: int) -> None:
        out = bash(workspace, f"printf %s {shlex.quote(value)}", max_bash_output_bytes=budget)
        rendered = "".join(part.text for part in out.content)
        assert len(rendered.encode()) <= budget, (budget, rendered)
        checked["printed"] += 1

    refused()
    printed()
    return checked


def unattached(workspace: Path, token: str) -> dict[str, Any]:
    """A shell that was started but whose pid never reached the tool (no thread to watch
    it), swept while its marker cannot be read yet: in the middle of an exec a process
    shows an empty environment. The first looks at each process are made to see none."""
    import subprocess

    from picourse.coding_tools import command_scope

    scope = command_scope.CommandScope()
    shell = subprocess.Popen(
        scope.argv(f"exec sleep 600.{token}"),
        cwd=workspace,
        env=scope.env(),
        start_new_session=True,
    )
    looks: dict[int, int] = {}
    marker_of = command_scope._marker_of

    def late_marker(pid: int) -> str | None:
        looks[pid] = looks.get(pid, 0) + 1
        return None if looks[pid] <= 4 else marker_of(pid)

    with mock.patch.object(command_scope, "_marker_of", late_marker):
        scope.sweep_unattached()
    survived = shell.poll() is None
    shell.kill()
    shell.wait()
    return {"looks": looks.get(shell.pid, 0), "survived": survived}


def exiting_parent(workspace: Path, token: str) -> dict[str, Any]:
    """A process of the call caught in the middle of its exit, on the sweep's first passes:
    its environment (the marker) already gone, its child, in a session of its own, not yet
    handed over to the tool's process. A pid hopper on a busy machine is caught so between
    two hops. The first looks at the shell are made to see it so; the sweep must go on
    until it is done, not end at two quiet passes."""
    import subprocess

    from picourse.coding_tools import command_scope

    scope = command_scope.CommandScope()
    os.mkfifo(workspace / "started")
    shell = subprocess.Popen(
        scope.argv(f"setsid sleep 600.{token} & echo started > started; wait"),
        cwd=workspace,
        env=scope.env(),
        start_new_session=True,
    )
    (workspace / "started").read_text()  # the child runs (the shell wrote after starting it)
    exiting_looks = 0
    exiting, marker_of = command_scope._exiting, command_scope._marker_of

    def caught_exiting(pid: int) -> bool:
        nonlocal exiting_looks
        if pid == shell.pid and exiting_looks < 3:
            exiting_looks += 1
            return True
        return exiting(pid)

    def gone_while_exiting(pid: int) -> str | None:
        return None if pid == shell.pid and exiting_looks < 3 else marker_of(pid)

    with (
        mock.patch.object(command_scope, "_exiting", caught_exiting),
        mock.patch.object(command_scope, "_marker_of", gone_while_exiting),
    ):
        scope.sweep()
    left = survivors(token)
    shell.kill()
    shell.wait()
    return {"exiting_looks": exiting_looks, "survivors": left}


def _gated_bash(workspace: Path, token: str) -> tuple[Tool, dict[str, Any]]:
    """The bash tool and a command whose shell writes into the FIFO ``started`` once its
    background child runs: a read of the FIFO returns exactly then."""
    tool = create_coding_tools(workspace, "unrestricted").get("bash")
    assert tool is not None
    os.mkfifo(workspace / "started")
    params = tool.schema.validate({"command": f"sleep 600.{token} & echo started > started; wait"})
    return tool, params


def cancelled_start(workspace: Path, pipe: int, how: str, token: str) -> dict[str, Any]:
    """The call cancelled while asyncio still connects the new shell's pipe ``pipe`` (1
    stdout, 2 stderr), once the command's background child runs: by ``how`` = "cancel"
    (its agent loop torn down) or "timeout" (an ``asyncio.timeout`` around it expires).
    asyncio, cancelled there, kills the shell alone and never hands back its pid."""
    tool, params = _gated_bash(workspace, token)

    async def scenario() -> tuple[bool, str]:
        loop = asyncio.get_running_loop()
        connect = loop.connect_read_pipe
        connected = 0
        deadline = asyncio.timeout(None)

        async def cancel_while_connecting(*args: Any, **kwargs: Any) -> Any:
            nonlocal connected
            connected += 1
            if connected == pipe:
                await asyncio.to_thread((workspace / "started").read_text)
                if how == "timeout":
                    deadline.reschedule(loop.time())  # expires at the loop's next turn
                else:
                    call.cancel()
            return await connect(*args, **kwargs)

        async def under_deadline() -> ToolOutput:
            async with deadline:
                return await tool.execute(params, ToolContext("scenario"))

        loop.connect_read_pipe = cancel_while_connecting  # type: ignore[method-assign]
        call = asyncio.ensure_future(under_deadline())
        # Only a bound against a hang: the call ends in milliseconds once it sweeps.
        done, _ = await asyncio.wait({call}, timeout=60)
        if not done:
            return False, "still running"
        if call.cancelled():
            return True, "cancelled"
        error = call.exception()
        return True, "returned" if error is None else type(error).__name__

    finished, ended = asyncio.run(scenario())
    return {"finished": finished, "ended": ended, "survivors": survivors(token)}


def cancelled_twice(workspace: Path, token: str) -> dict[str, Any]:
    """The call cancelled, then cancelled again while its cleanup sweeps (as asyncio.run's
    teardown cancels every task it finds). The sweep is held until the second cancellation
    has been delivered."""
    tool, params = _gated_bash(workspace, token)
    sweeping, go = threading.Event(), threading.Event()
    sweep, close = CommandScope.sweep, base_subprocess.BaseSubprocessTransport.close
    closed: list[bool] = []

    def held_sweep(scope: CommandScope) -> None:
        sweeping.set()
        go.wait(60)
        sweep(scope)

    def counted_close(transport: base_subprocess.BaseSubprocessTransport) -> None:
        closed.append(True)
        close(transport)

    CommandScope.sweep = held_sweep  # type: ignore[method-assign,assignment]
    base_subprocess.BaseSubprocessTransport.close = counted_close  # type: ignore[method-assign,assignment]

    async def scenario() -> tuple[bool, bool, str]:
        call = asyncio.ensure_future(tool.execute(params, ToolContext("scenario")))
        await asyncio.to_thread((workspace / "started").read_text)
        call.cancel()
        await asyncio.to_thread(sweeping.wait, 60)
        call.cancel()
        for _ in range(5):  # the task takes the second cancellation at its next step
            await asyncio.sleep(0)
        ended_before_its_sweep = call.done()
        go.set()
        done, _ = await asyncio.wait({call}, timeout=60)  # only a bound against a hang
        return ended_before_its_sweep, bool(done), "cancelled" if call.cancelled() else "not"

    try:
        early, finished, ended = asyncio.run(scenario())
    finally:
        go.set()
    return {
        "ended_before_its_sweep": early,
        "finished": finished,
        "ended": ended,
        "transport_closed": bool(closed),
        "survivors": survivors(token),
    }


def main() -> None:
    scenario, *args = sys.argv[1:]
    # Orphans of what the scenario starts come back to this process, whatever the code under
    # test does, so a scenario can always end them.
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.environ.get("BASH_SCENARIO_NO_CGROUP"):
        # The path of every user who may not create a cgroup: the sweep alone.
        from picourse.coding_tools import command_scope

        command_scope._new_cgroup = lambda marker: None
    try:
        with tempfile.TemporaryDirectory(prefix="bash-scenario-") as scratch:
            workspace = Path(scratch)
            if scenario == "daemons":
                result = daemons(workspace, int(args[0]), args[1])
            elif scenario == "hopper":
                result = hopper(workspace, args[0])
            elif scenario == "late-orphans":
                result = late_orphans(workspace)
            elif scenario == "unattached":
                result = unattached(workspace, args[0])
            elif scenario == "exiting-parent":
                result = exiting_parent(workspace, args[0])
            elif scenario == "cancelled-twice":
                result = cancelled_twice(workspace, args[0])
            elif scenario == "cancelled-start":
                result = cancelled_start(workspace, int(args[0]), args[1], args[2])
            else:
                result = fuzz(workspace)
    finally:
        _end_descendants()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
