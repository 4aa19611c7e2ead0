"""Lab 8.5 — bash runs a process group to exactly one bounded end.

Child programs are Python (sys.executable -S: they need only the standard library, and
without site, which reads the environment's .pth files, each starts two to three times
faster). Its path is absolute, so process tests run with containment="unrestricted"; the
guardrail tests use workspace mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from lab_helpers import (
    DEADLINE_SECONDS,
    OVER_TIME_LIMIT,
    call,
    call_now,
    raise_task_failures,
    refuse_to_spawn,
    run,
    spy_on_listeners,
    text_of,
    utf8_len,
    wait_for_file,
    waiting_at,
)
from picourse.abort import AbortController
from picourse.coding_tools import BashDetails, create_coding_tools
from picourse.coding_tools.command_scope import CommandScope
from picourse.coding_tools.output_budget import OutputBudget
from picourse.tool import ToolOutput, ToolRegistry

pytestmark = pytest.mark.lab8_5

PY = f"{shlex.quote(sys.executable)} -S"


def unrestricted(workspace: Path, **options: Any) -> ToolRegistry:
    return create_coding_tools(workspace, "unrestricted", **options)


def script(workspace: Path, name: str, code: str) -> str:
    (workspace / name).write_text(textwrap.dedent(code))
    return f"{PY} {name}"


# A child that starts a grandchild, reports both pids, then waits forever.
FAMILY = """
    import os, signal, subprocess, sys, time
    if "--grandchild" in sys.argv:
        if "--ignore-term" in sys.argv:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open("grandchild.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        for _ in range(120):  # a leftover still ends by itself, in 2 minutes
            time.sleep(1)
    args = [sys.executable, "-S", sys.argv[0], "--grandchild", *sys.argv[1:]]
    grandchild = subprocess.Popen(args)
    while not os.path.exists("grandchild.pid"):
        time.sleep(0.01)
    with open("family.pid", "w") as f:
        f.write(f"{os.getpid()} {grandchild.pid}\\n")
    for _ in range(120):  # a leftover still ends by itself, in 2 minutes
        time.sleep(1)
"""


def still_running(pid: int, script_name: str) -> bool:
    """Whether the process runs this test's script (not a zombie, not a reused pid)."""
    try:
        process = psutil.Process(pid)
        alive = process.status() != psutil.STATUS_ZOMBIE
        ours = any(script_name in part for part in process.cmdline())
    except psutil.NoSuchProcess:
        return False
    return alive and ours


def family_still_running(workspace: Path, script_name: str) -> list[int]:
    """The processes of family.pid that still run the script, after giving a process
    SIGKILLed as the call ended a moment (up to 2 s) to die."""
    family = [int(pid) for pid in (workspace / "family.pid").read_text().split()]
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(still_running(p, script_name) for p in family):
        time.sleep(0.01)
    return [pid for pid in family if still_running(pid, script_name)]


def assert_gone(pid: int, script_name: str) -> None:
    assert not still_running(pid, script_name), (
        f"process {pid} ({script_name}) outlived the bash call: signal the whole process group "
        "(os.killpg), and wait for the cleanup before returning"
    )


# A child and a grandchild that record a SIGTERM (in term-PID files) and then exit.
TERM_RECORDERS = """
    import os, signal, subprocess, sys, time
    def record(signum, frame):
        with open(f"term-{os.getpid()}", "w") as f:
            f.write("TERM\\n")
        os._exit(0)
    signal.signal(signal.SIGTERM, record)
    if "--grandchild" in sys.argv:
        with open("grandchild.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
    else:
        grandchild = subprocess.Popen([sys.executable, "-S", sys.argv[0], "--grandchild"])
        while not os.path.exists("grandchild.pid"):
            time.sleep(0.01)
        with open("family.pid", "w") as f:
            f.write(f"{os.getpid()} {grandchild.pid}\\n")
    for _ in range(2400):  # a leftover still ends by itself, in 2 minutes
        time.sleep(0.05)
"""


def abort_when_ready(workspace: Path, command: str) -> tuple[ToolOutput, float]:
    """Run the command, abort once it wrote family.pid. Returns the result and the seconds
    from the abort to the result."""

    async def scenario() -> tuple[ToolOutput, float]:
        controller = AbortController()
        task = asyncio.create_task(
            call(unrestricted(workspace), "bash", {"command": command}, signal=controller.signal)
        )
        await wait_for_file(workspace / "family.pid", task)
        aborted = time.monotonic()
        controller.abort("user pressed Esc")
        out = await task
        return out, time.monotonic() - aborted

    return run(scenario())


def with_longer_timeouts(
    workspace: Path, first_timeout_ms: int, attempt: Callable[[int], ToolOutput | None]
) -> ToolOutput:
    """The result of ``attempt(timeout_ms)`` under the first timeout with which the command's
    child got ready before the timeout ended it (``attempt`` returns None when it did not).
    A loaded machine may start a Python child more slowly than a short timeout allows, which
    says nothing about the tool: try again with a longer one, from a clean workspace (its
    scripts kept)."""
    for timeout_ms in (first_timeout_ms, 5000, 10000):
        for leftover in workspace.iterdir():
            if leftover.suffix != ".py":
                leftover.unlink()
        out = attempt(timeout_ms)
        if out is not None:
            return out
    pytest.fail(f"{OVER_TIME_LIMIT}the command's child never got ready within 10 s")


def call_until_ready(
    workspace: Path, command: str, ready: str, first_timeout_ms: int, **options: Any
) -> ToolOutput:
    """Run ``command`` until its child gets ready (writes the file ``ready``) before the
    timeout ends it."""

    def attempt(timeout_ms: int) -> ToolOutput | None:
        tools = unrestricted(workspace, bash_timeout_ms=timeout_ms, **options)
        out = call_now(tools, "bash", command=command)
        return out if (workspace / ready).exists() else None

    return with_longer_timeouts(workspace, first_timeout_ms, attempt)


def assert_each_got_sigterm(workspace: Path) -> None:
    family = [int(pid) for pid in (workspace / "family.pid").read_text().split()]
    missed = [pid for pid in family if not (workspace / f"term-{pid}").exists()]
    assert not missed, (
        f"processes {missed} of the command's group never received SIGTERM: on timeout and "
        "abort, send SIGTERM to the whole process group first (os.killpg), give it a short "
        "grace to exit, and only then SIGKILL what is left"
    )


# A TERM handler that needs a moment to clean up (0.4 s), then records that it finished. A
# second SIGTERM (a tool may send one to the group and one to each process) changes nothing.
SLOW_CLEANUP = """
    import os, signal, time
    handling = False
    def clean_up(signum, frame):
        global handling
        if handling:
            return
        handling = True
        time.sleep(0.4)  # flushing, removing temporary files...
        with open("cleaned-up", "w") as f:
            f.write("done\\n")
        os._exit(0)
    signal.signal(signal.SIGTERM, clean_up)
    with open("family.pid", "w") as f:
        f.write(f"{os.getpid()}\\n")
    for _ in range(2400):  # a leftover still ends by itself, in 2 minutes
        time.sleep(0.05)
"""

# A TERM handler that cleans up in a handshake with the test's event loop: it writes ping-N
# and waits for pong-N, which only a task on that loop writes, HANDSHAKE_ROUNDS times. It
# records "graceful" only if all rounds end within 0.7 s of the SIGTERM, before any grace of
# about 1 s runs out. While the loop is blocked no pong comes: the rounds cannot finish.
HANDSHAKE_ROUNDS = 5
HANDSHAKE = f"""
    import os, signal, time
    handling = False
    def clean_up(signum, frame):
        global handling
        if handling:
            return
        handling = True
        deadline = time.monotonic() + 0.7
        for n in range({HANDSHAKE_ROUNDS}):
            with open(f"ping-{{n}}", "w") as f:
                f.write("ping\\n")
            while not os.path.exists(f"pong-{{n}}"):
                if time.monotonic() > deadline:
                    os._exit(1)
                time.sleep(0.005)
        if time.monotonic() <= deadline:
            with open("graceful", "w") as f:
                f.write("done\\n")
        os._exit(0)
    signal.signal(signal.SIGTERM, clean_up)
    with open("family.pid", "w") as f:
        f.write(f"{{os.getpid()}}\\n")
    for _ in range(2400):  # a leftover still ends by itself, in 2 minutes
        time.sleep(0.05)
"""


async def answer_pings(workspace: Path, call: asyncio.Task[Any]) -> None:
    """The event loop's side of HANDSHAKE: answer each ping-N with pong-N while the call
    runs. It can only answer when the loop is free to run it."""
    for n in range(HANDSHAKE_ROUNDS):
        while not (workspace / f"ping-{n}").exists():
            if call.done():
                return
            await asyncio.sleep(0.005)
        (workspace / f"pong-{n}").write_text("pong\n")


# The timer of a call under test: its timeout is this far away, well past anything else the
# test's loop schedules (the test deadline is 15 s).
FAR_TIMEOUT_MS = 600_000


def far_timers(loop: asyncio.AbstractEventLoop) -> list[asyncio.TimerHandle]:
    """Timer handles on the loop that are still pending and due more than 300 s from now:
    whatever a call with FAR_TIMEOUT_MS scheduled for its timeout (call_later, call_at,
    asyncio.timeout, wait_for and asyncio.sleep all put one there)."""
    scheduled: list[asyncio.TimerHandle] = getattr(loop, "_scheduled", [])
    horizon = loop.time() + 300
    return [handle for handle in scheduled if not handle.cancelled() and handle.when() > horizon]


async def leftovers_on_the_loop(
    before: set[asyncio.Task[Any]],
) -> tuple[list[asyncio.TimerHandle], set[asyncio.Task[Any]]]:
    """The call's timers still pending and its tasks still unfinished after it returned.
    A task cancelled on the way out needs a few loop iterations to finish: give it up to
    2 s, returning as soon as nothing is left."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + 2
    while True:
        timers = far_timers(loop)
        tasks = asyncio.all_tasks() - before - {asyncio.current_task()}
        if (not timers and not tasks) or time.monotonic() > deadline:
            return timers, tasks
        await asyncio.sleep(0.01)


@pytest.fixture
def stdin_with_a_secret() -> Iterator[None]:
    """This process's fd 0 is a pipe holding a line: a command that inherits stdin reads it."""
    saved = os.dup(0)
    read_end, write_end = os.pipe()
    os.write(write_end, b"LEAKED-STDIN\n")
    os.close(write_end)
    os.dup2(read_end, 0)
    os.close(read_end)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)


# ---------------------------------------------------------------- endings


def test_success_returns_stdout_and_stderr_and_runs_in_the_workspace(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="echo hello; echo oops >&2; pwd")
    assert not out.is_error, f"exit 0 is a success, got: {text_of(out)}"
    assert "hello" in text_of(out) and "oops" in text_of(out), "stdout and stderr both count"
    assert str(workspace.resolve()) in text_of(out), "the command must run in the workspace"
    assert out.details == BashDetails("echo hello; echo oops >&2; pwd", 0, False, False, False)


def test_calls_side_by_side_each_show_their_own_output(workspace: Path) -> None:
    registry = create_coding_tools(workspace)
    # The first call prints, waits (at most 10 s) while the second runs whole, then prints.
    first_command = (
        "echo first-before; echo > first-waits; "
        "for i in $(seq 1000); do [ -e second-done ] && break; sleep 0.01; done; "
        "echo first-after"
    )

    async def side_by_side() -> tuple[ToolOutput, ToolOutput]:
        first = asyncio.create_task(call(registry, "bash", {"command": first_command}))
        try:
            await wait_for_file(workspace / "first-waits", first)
            second = await call(registry, "bash", {"command": "echo second-only"})
        finally:
            (workspace / "second-done").touch()
        return await first, second

    first, second = run(side_by_side())
    assert "first-before" in text_of(first) and "first-after" in text_of(first), text_of(first)
    assert "second-only" not in text_of(first) and "first" not in text_of(second), (
        "invariant: each call's text is its own command's output alone: make a new "
        "OutputBudget in each call (never one kept for the tool, or for a limit). The first "
        f"call showed {text_of(first)!r}, the second {text_of(second)!r}"
    )


def test_no_output_gives_a_short_status(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="true")
    assert not out.is_error
    assert text_of(out).startswith("(no output") and "0" in text_of(out), (
        "when a command prints nothing, say so with its exit status, e.g. '(no output, exit 0)'"
    )


def test_a_non_zero_exit_is_an_error_result_that_keeps_the_code(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="echo partial; exit 3")
    assert out.is_error, "a non-zero exit must be an error result"
    assert "partial" in text_of(out), "the output before the failure must be kept"
    assert out.details.exit_code == 3 and not out.details.timed_out


def test_death_by_signal_has_no_exit_code(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="kill -KILL $$")
    assert out.is_error
    assert out.details.exit_code is None, "killed by a signal: exit_code is None"


def test_a_timeout_sends_sigterm_to_the_whole_group_then_returns(workspace: Path) -> None:
    command = script(workspace, "term_timeout.py", TERM_RECORDERS)
    out = call_until_ready(workspace, command, "family.pid", 3000)
    assert out.is_error and out.details.timed_out and not out.details.aborted, (
        "a command still running at the timeout must end as timed_out (and not aborted)"
    )
    assert_each_got_sigterm(workspace)
    for pid in map(int, (workspace / "family.pid").read_text().split()):
        assert_gone(pid, "term_timeout.py")


def test_an_abort_while_running_kills_the_group_and_is_not_a_timeout(workspace: Path) -> None:
    command = script(workspace, "family_abort.py", FAMILY)

    out, _ = abort_when_ready(workspace, command)
    assert out.is_error and out.details.aborted and not out.details.timed_out, (
        "an abort while running must end as aborted (not timed out)"
    )
    for pid in map(int, (workspace / "family.pid").read_text().split()):
        assert_gone(pid, "family_abort.py")


def test_a_descendant_that_ignores_sigterm_does_not_outlive_the_call(workspace: Path) -> None:
    command = script(workspace, "stubborn.py", FAMILY) + " --ignore-term"

    out, _ = abort_when_ready(workspace, command)
    assert out.details.aborted
    grandchild = int((workspace / "grandchild.pid").read_text())
    assert_gone(grandchild, "stubborn.py")


def test_an_abort_sends_sigterm_to_the_whole_group_first(workspace: Path) -> None:
    command = script(workspace, "term_abort.py", TERM_RECORDERS)

    out, _ = abort_when_ready(workspace, command)
    assert out.details.aborted, text_of(out)
    assert_each_got_sigterm(workspace)


# A process that survives SIGTERM (its handler notes the moment and carries on) and notes on
# its own clock, every 10 ms, that it is still alive: the last note minus the SIGTERM is how
# long the grace at least lasted, however the tool sent its signals (killpg, kill with a
# negative pid, kill to each process, a cgroup). A busy machine delays the notes, which can
# only make the measure shorter.
OUTLIVES_SIGTERM = """
    import os, signal, time
    def note_term(signum, frame):
        if not os.path.exists("term.at"):
            with open("term.at", "w") as f:
                f.write(f"{time.monotonic()}\\n")
    signal.signal(signal.SIGTERM, note_term)
    with open("family.pid", "w") as f:
        f.write(f"{os.getpid()}\\n")
    end = time.monotonic() + 120  # a leftover still ends by itself, in 2 minutes
    while time.monotonic() < end:
        with open("alive.tmp", "w") as f:
            f.write(f"{time.monotonic()}\\n")
        os.replace("alive.tmp", "alive.at")
        time.sleep(0.01)
"""


def noted_time(path: Path) -> float | None:
    """The clock reading a child noted in the file, or None if it noted none (in full)."""
    noted = path.read_text() if path.exists() else ""
    return float(noted) if noted.endswith("\n") else None


def test_the_grace_after_sigterm_is_short(workspace: Path) -> None:
    command = script(workspace, "slow_to_die.py", OUTLIVES_SIGTERM)

    try:
        _, seconds = abort_when_ready(workspace, command)
    finally:
        kill_and_reap(workspace / "family.pid")
    term, alive = noted_time(workspace / "term.at"), noted_time(workspace / "alive.at")
    assert term is not None, (
        "the command never got to handle a SIGTERM: on abort, send SIGTERM to the whole "
        "process group first, give it a short grace, and only then SIGKILL what is left"
    )
    outlived = 0.0 if alive is None else alive - term
    assert outlived < 2.5, (
        f"{OVER_TIME_LIMIT}a process that ignored SIGTERM still ran {outlived:.1f} s after "
        "it: the grace after SIGTERM is short (about 1 s, at most 2 s); then SIGKILL what is left"
    )
    assert seconds < 4, (
        f"{OVER_TIME_LIMIT}the call returned {seconds:.1f} s after the abort: a process "
        "that ignores SIGTERM gets a short grace (about 1 s, at most 2 s), then SIGKILL"
    )


@pytest.mark.parametrize(
    "shape", ["{}", "{}; true", "{} & wait"], ids=["alone", "then-more", "in-background"]
)
def test_the_group_gets_a_grace_to_clean_up_before_sigkill(workspace: Path, shape: str) -> None:
    # In the last two shapes the shell itself dies of the SIGTERM at once, while its child
    # still cleans up: the grace lasts until the group is gone, not until the shell is.
    command = shape.format(script(workspace, "slow_cleanup.py", SLOW_CLEANUP))

    out, _ = abort_when_ready(workspace, command)
    assert out.details.aborted, text_of(out)
    assert (workspace / "cleaned-up").exists(), (
        f"{command!r} got SIGTERM and its child needed 0.4 s to clean up, but was killed "
        "before it could: after SIGTERM, give the whole group a short grace (about 1 s, at "
        "most 2 s) to exit, however soon the shell itself exits, and SIGKILL only what is "
        "still left after it"
    )


@pytest.mark.watches_the_event_loop
def test_the_event_loop_keeps_running_during_the_grace(workspace: Path) -> None:
    command = script(workspace, "handshake.py", HANDSHAKE)

    async def scenario() -> ToolOutput:
        controller = AbortController()
        task = asyncio.create_task(
            call(unrestricted(workspace), "bash", {"command": command}, signal=controller.signal)
        )
        await wait_for_file(workspace / "family.pid", task)
        answerer = asyncio.create_task(answer_pings(workspace, task))
        controller.abort("user pressed Esc")
        try:
            return await task
        finally:
            answerer.cancel()
            await asyncio.wait({answerer})

    out = run(scenario())
    assert out.details.aborted, text_of(out)
    answered = sum((workspace / f"pong-{n}").exists() for n in range(HANDSHAKE_ROUNDS))
    assert (workspace / "graceful").exists(), (
        f"{OVER_TIME_LIMIT}after SIGTERM the command's cleanup needed {HANDSHAKE_ROUNDS} "
        "answers from a task on the event loop within 0.7 s and did not get them "
        f"({answered} in all): the event loop must keep running during the grace. Wait it "
        "out without blocking the loop (await asyncio.sleep between checks, or "
        "asyncio.to_thread for a blocking wait), never time.sleep on the loop's thread; and "
        "give the group that grace (about 1 s) before SIGKILL"
    )


# Turns of the event loop that asyncio's start of a process (connecting its pipes after the
# fork, then returning to the caller) takes at most, with room to spare: about eight.
START_TURNS = 50


async def past_the_start() -> None:
    """Let asyncio's start of a process finish before a test cancels the call: on a busy
    machine the command's child can write its file before asyncio has connected the new
    process's pipes, which takes a few turns of the event loop and no waiting."""
    for _ in range(START_TURNS):
        await asyncio.sleep(0)


def far_bash_call(
    workspace: Path, command: str, controller: AbortController
) -> asyncio.Task[ToolOutput]:
    """The bash call of ``command`` as a task: its timeout far away, ``controller``'s signal."""
    return asyncio.create_task(
        call(
            unrestricted(workspace, bash_timeout_ms=FAR_TIMEOUT_MS),
            "bash",
            {"command": command},
            signal=controller.signal,
        )
    )


async def cancel_and_wait(task: asyncio.Task[ToolOutput]) -> tuple[bool, str]:
    """Cancel the call, as when the agent loop around it is torn down: whether it finished
    within 10 s, and where it was waiting if not."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    return bool(done), "" if done else waiting_at(task)


def assert_ended_by_the_cancellation(
    workspace: Path,
    script_name: str,
    outcome: tuple[asyncio.Task[ToolOutput], bool, str],
    rule: str,
) -> None:
    """A cancelled call (``cancel_and_wait``'s outcome) ended, and left none of the
    processes of family.pid running ``script_name``."""
    task, finished, where = outcome
    assert finished, (
        f"{OVER_TIME_LIMIT}the call was cancelled and had not finished 10 s later (it was "
        f"waiting at {where}): clean up (kill the group) and let the cancellation through"
    )
    if not task.cancelled():
        raise_task_failures(task)
    running = family_still_running(workspace, script_name)
    assert not running, (
        f"{OVER_TIME_LIMIT}processes {running} of the command still run 2 s after its call was "
        f"cancelled: {rule}"
    )


@pytest.mark.parametrize(
    "flags", ["", " --ignore-term"], ids=["plain", "grandchild-ignores-sigterm"]
)
def test_a_cancelled_call_leaves_no_process_running(workspace: Path, flags: str) -> None:
    # "; true" keeps bash running as the parent of the command's child and grandchild. A
    # grandchild that ignores SIGTERM must die too: SIGTERM alone is no end.
    command = script(workspace, "cancelled.py", FAMILY) + flags + "; true"

    async def scenario() -> tuple[asyncio.Task[ToolOutput], bool, str, int]:
        controller = AbortController()
        listeners = spy_on_listeners(controller.signal)
        task = far_bash_call(workspace, command, controller)
        await wait_for_file(workspace / "family.pid", task)
        await past_the_start()
        finished, where = await cancel_and_wait(task)
        return task, finished, where, listeners()

    task, finished, where, listeners = run(scenario())
    assert_ended_by_the_cancellation(
        workspace,
        "cancelled.py",
        (task, finished, where),
        "when the call's task is cancelled (the agent loop around it is torn down), kill the "
        "whole process group before the cancellation goes on (in a finally block, or on "
        "asyncio.CancelledError): nothing the command started may outlive the call",
    )
    assert listeners == 0, (
        "the abort listener is still registered after the call was cancelled: remove it on "
        "every path, cancellation included (in a finally block)"
    )


# A command that notes SIGTERM in a file and lives on: the grace after SIGTERM lasts, and
# the test knows it has begun.
NOTES_TERM = """
    import os, signal, time
    def noted(signum, frame):
        with open("got-term", "w") as f:
            f.write("term\\n")
    signal.signal(signal.SIGTERM, noted)
    with open("family.pid", "w") as f:
        f.write(f"{os.getpid()}\\n")
    for _ in range(1200):  # a leftover still ends by itself, in 2 minutes
        time.sleep(0.1)
"""


def test_a_call_cancelled_during_the_grace_still_kills_the_group(workspace: Path) -> None:
    command = script(workspace, "grace.py", NOTES_TERM) + "; true"

    async def scenario() -> tuple[asyncio.Task[ToolOutput], bool, str]:
        controller = AbortController()
        task = far_bash_call(workspace, command, controller)
        await wait_for_file(workspace / "family.pid", task)
        await past_the_start()
        controller.abort()
        await wait_for_file(workspace / "got-term", task)  # the grace has begun
        finished, where = await cancel_and_wait(task)
        return task, finished, where

    assert_ended_by_the_cancellation(
        workspace,
        "grace.py",
        run(scenario()),
        "it was cancelled during the grace after SIGTERM, and SIGTERM is no end: whatever the "
        "call was waiting for, the group still gets its SIGKILL (mark it swept only after "
        "the SIGKILL sweep)",
    )


def test_a_call_cancelled_again_while_it_cleans_up_still_ends_its_command(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncio.run's teardown (or a timeout around the call) can cancel a call a second time
    # while the clean-up of the first cancellation runs. The given CommandScope.sweep, if
    # the tool uses it, is held at a gate here (in its worker thread): the call must not
    # end before its sweep has.
    command = script(workspace, "twice.py", FAMILY) + "; true"
    sweeping, gate = threading.Event(), threading.Event()
    real_sweep = CommandScope.sweep
    loop_thread = threading.current_thread()

    def gated_sweep(scope: CommandScope) -> None:
        if threading.current_thread() is not loop_thread:  # never hold up the event loop
            sweeping.set()
            gate.wait(DEADLINE_SECONDS)
        real_sweep(scope)

    monkeypatch.setattr(CommandScope, "sweep", gated_sweep)

    async def scenario() -> tuple[asyncio.Task[ToolOutput], bool, bool, str]:
        task = far_bash_call(workspace, command, AbortController())
        await wait_for_file(workspace / "family.pid", task)
        await past_the_start()
        task.cancel()
        deadline = time.monotonic() + 10
        while not (sweeping.is_set() or task.done()):  # a tool may not use the given sweep
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        ended_before_its_sweep = False
        if sweeping.is_set():
            task.cancel()  # the second cancellation, while the sweep is held
            await past_the_start()
            ended_before_its_sweep = task.done()
        gate.set()
        done, _ = await asyncio.wait({task}, timeout=10)
        return task, ended_before_its_sweep, bool(done), "" if done else waiting_at(task)

    try:
        task, ended_before_its_sweep, finished, where = run(scenario())
    finally:
        gate.set()
    assert not ended_before_its_sweep, (
        "the call was cancelled, then cancelled again while its clean-up sweep ran (in a "
        "worker thread), and it ended at once, before the sweep had killed anything: the "
        "clean-up of a cancelled call must finish even if the call is cancelled again (await "
        "the sweep to its end, catching the second CancelledError, then let the cancellation "
        "go on); asyncio.shield alone leaves the sweep running unawaited"
    )
    assert_ended_by_the_cancellation(
        workspace,
        "twice.py",
        (task, finished, where),
        "a call cancelled twice still kills its whole process group before it ends",
    )


def test_an_abort_during_the_grace_of_a_timeout_is_still_a_timeout(workspace: Path) -> None:
    # The timeout ends the command first (SIGTERM, which the child notes and outlives); the
    # signal aborts during the grace that follows. One ending, the first: a timeout.
    command = script(workspace, "late_abort.py", NOTES_TERM) + "; true"

    async def attempt(timeout_ms: int) -> ToolOutput | None:
        controller = AbortController()
        task = asyncio.create_task(
            call(
                unrestricted(workspace, bash_timeout_ms=timeout_ms),
                "bash",
                {"command": command},
                signal=controller.signal,
            )
        )
        deadline = time.monotonic() + timeout_ms / 1000 + 10
        while not (workspace / "got-term").exists() and time.monotonic() < deadline:
            if task.done():
                raise_task_failures(task)
                # None: the timeout came before the child was ready (a loaded machine).
                return task.result() if (workspace / "family.pid").exists() else None
            await asyncio.sleep(0.01)
        controller.abort()
        return await task

    out = with_longer_timeouts(workspace, 1000, lambda timeout_ms: run(attempt(timeout_ms)))
    assert out.details.timed_out and not out.details.aborted and "timed out" in text_of(out), (
        "the command timed out, and the signal aborted only during the grace after its "
        "SIGTERM: a call ends in exactly one way, the first (decide the reason when the "
        "timeout or the abort comes, never read signal.aborted afterwards). Got "
        f"{out.details} and {text_of(out)[:200]!r}"
    )


@pytest.mark.challenge
@pytest.mark.parametrize("how", ["cancel", "timeout"])
def test_a_call_cancelled_while_bash_starts_still_ends_its_command(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # The cancellation lands inside asyncio's start of the process: after the fork, while it
    # connects the pipes, once the command's child runs. "timeout": an asyncio.timeout
    # around the call expires there.
    command = script(workspace, "starting.py", FAMILY) + "; true"

    async def scenario() -> tuple[asyncio.Task[ToolOutput], bool, str]:
        loop = asyncio.get_running_loop()
        connect = loop.connect_read_pipe
        in_start, go_on = asyncio.Event(), asyncio.Event()

        async def parked_while_connecting(*args: Any, **kwargs: Any) -> Any:
            if not in_start.is_set():
                in_start.set()
                await go_on.wait()  # the cancellation is thrown in here
            return await connect(*args, **kwargs)

        monkeypatch.setattr(loop, "connect_read_pipe", parked_while_connecting)
        deadline = asyncio.timeout(None)

        async def under_deadline() -> ToolOutput:
            async with deadline:
                return await call(
                    unrestricted(workspace, bash_timeout_ms=FAR_TIMEOUT_MS),
                    "bash",
                    {"command": command},
                )

        task = asyncio.create_task(under_deadline())
        await wait_for_file(workspace / "family.pid", task)
        if how == "timeout":
            deadline.reschedule(loop.time())  # expires at the loop's next turn
        else:
            task.cancel()
        go_on.set()
        done, _ = await asyncio.wait({task}, timeout=10)
        return task, bool(done), "" if done else waiting_at(task)

    task, finished, where = run(scenario())
    assert finished, (
        f"{OVER_TIME_LIMIT}the call was cancelled while asyncio was still starting bash (it "
        f"connects the pipes after the fork) and had not finished 10 s later (waiting at "
        f"{where}). Either asyncio, cancelled there, killed the shell alone and waits for "
        "the pipes that the command's children hold (let the start finish despite the "
        "cancellation, then kill the group), or the cancellation was caught and never passed "
        "on, so the call runs the command on (cancel the task again once the start is done)"
    )
    running = family_still_running(workspace, "starting.py")
    assert not running, (
        f"{OVER_TIME_LIMIT}processes {running} of the command still run 2 s after its call was "
        "cancelled during the start: asyncio, cancelled while it starts a process, kills the "
        "shell alone and never hands back its pid; let the start finish, then kill the group"
    )
    ended = (
        "cancelled"
        if task.cancelled()
        else "a result"
        if task.exception() is None
        else type(task.exception()).__name__
    )
    expected = {"cancel": "cancelled", "timeout": "TimeoutError"}[how]
    assert ended == expected, (
        f"the call ended with {ended}, not {expected}: a cancellation that came during the "
        "start must go on as it came once the command is ended (never swallowed into a "
        "result), and an asyncio.timeout around the call must still raise TimeoutError: "
        "after catching CancelledError, call uncancel() on the task and cancel() it again, "
        "so that the timeout recognises its own cancellation"
    )


def test_bash_runs_the_command_in_a_new_session_it_leads(workspace: Path) -> None:
    command = f"echo shell $$; {PY} -c \"import os; print('child', os.getsid(0), os.getpgrp())\""
    out = call_now(unrestricted(workspace), "bash", command=command)
    words = text_of(out).split()
    shell = words[words.index("shell") + 1]
    session, group = words[words.index("child") + 1 : words.index("child") + 3]
    assert session == group == shell, (
        f"the command's session is {session} and its group {group}, but bash is {shell}: "
        "start bash in a new session (start_new_session=True), so that it leads its own "
        "process group and has no controlling terminal to read a password from"
    )


def test_the_command_runs_in_bash_not_sh(workspace: Path) -> None:
    command = "[[ -n $BASH_VERSION ]] && ! shopt -oq posix && arr=(a bash) && echo is-${arr[1]}"
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert not out.is_error and "is-bash" in text_of(out), (
        f"bash syntax failed ({text_of(out)!r}): run the command with bash -c, not sh -c "
        "(on many systems sh is a smaller shell without [[ ]] or arrays)"
    )


def test_stdin_is_empty_not_the_agents_input(workspace: Path, stdin_with_a_secret: None) -> None:
    out = call_now(
        create_coding_tools(workspace, bash_timeout_ms=5000),
        "bash",
        command="cat; echo end-of-input",
    )
    assert not out.details.timed_out and "end-of-input" in text_of(out), (
        "a command that reads stdin must see end of input at once: give it /dev/null as stdin "
        "(stdin=subprocess.DEVNULL), never a pipe nobody writes to"
    )
    assert "LEAKED-STDIN" not in text_of(out), (
        "the command read this process's own stdin: give it /dev/null (stdin=subprocess.DEVNULL)"
    )


@pytest.mark.parametrize("ending", ["exit", "timeout", "spawn-failure"])
def test_the_abort_listener_is_removed_when_the_call_ends(workspace: Path, ending: str) -> None:
    controller = AbortController()
    left = spy_on_listeners(controller.signal)
    command = "sleep 30" if ending == "timeout" else "true"
    cwd = workspace / "deleted" if ending == "spawn-failure" else workspace
    cwd.mkdir(exist_ok=True)
    tools = create_coding_tools(cwd, bash_timeout_ms=1000)
    if ending == "spawn-failure":
        cwd.rmdir()  # bash cannot start in it
    out = run(call(tools, "bash", {"command": command}, signal=controller.signal))
    assert out.details.timed_out == (ending == "timeout"), text_of(out)
    assert out.is_error == (ending != "exit"), text_of(out)
    assert left() == 0, (
        f"{left()} abort listener(s) still registered after the call ended ({ending}): remove "
        "the listener on every path (the function add_listener returns), or each call leaks one"
    )


@pytest.mark.parametrize("ending", ["exit", "abort", "cancel"])
def test_the_timer_is_removed_when_the_call_ends(
    workspace: Path, ending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This test looks at the event loop the tool runs on, so it must run in the tool's own
    # process: a grader that keeps student code in a process of its own reruns tests that
    # patch the process (here, one harmless variable) where that code lives.
    monkeypatch.setenv("PICOURSE_LOOKS_AT_THE_LOOP", "1")
    command = "true" if ending == "exit" else "echo ready > ready.txt; sleep 30"

    async def scenario() -> tuple[ToolOutput | None, list[asyncio.TimerHandle], set[Any]]:
        before = asyncio.all_tasks()
        controller = AbortController()
        tools = create_coding_tools(workspace, bash_timeout_ms=FAR_TIMEOUT_MS)
        task = asyncio.create_task(
            call(tools, "bash", {"command": command}, signal=controller.signal)
        )
        if ending != "exit":
            await wait_for_file(workspace / "ready.txt", task)
        if ending == "abort":
            controller.abort("user pressed Esc")
        out = None
        if ending == "cancel":
            await past_the_start()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        else:
            out = await task
        return (out, *await leftovers_on_the_loop(before | {task}))

    out, timers, tasks = run(scenario())
    if out is not None:
        assert out.details.aborted == (ending == "abort"), text_of(out)
    assert not timers and not tasks, (
        f"after the call ended ({ending}), its timeout timer (or a task of the call) is still "
        f"pending on the event loop: {timers or tasks}. Remove the timer on every path (cancel "
        "the handle or the task, or leave the asyncio.timeout block), or every call leaves one "
        "behind until it fires"
    )


def test_the_timeout_lasts_bash_timeout_ms_to_the_millisecond(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every asyncio timer (call_later, asyncio.timeout, wait_for, wait, sleep) is scheduled
    # through loop.call_at: the spy records how far ahead each one is due when it is made.
    # A timeout timer made anywhere else (a thread) is not on the loop, and is not judged.
    timeout_ms = FAR_TIMEOUT_MS + 500

    async def scenario() -> tuple[ToolOutput, list[float]]:
        loop = asyncio.get_running_loop()
        delays: list[float] = []
        schedule = loop.call_at

        def record_and_schedule(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            delays.append(when - loop.time())
            return schedule(when, *args, **kwargs)

        monkeypatch.setattr(loop, "call_at", record_and_schedule)
        controller = AbortController()
        tools = create_coding_tools(workspace, bash_timeout_ms=timeout_ms)
        command = "echo ready > ready.txt; sleep 30"
        task = asyncio.create_task(
            call(tools, "bash", {"command": command}, signal=controller.signal)
        )
        await wait_for_file(workspace / "ready.txt", task)
        controller.abort("the test has seen the timer")
        return await task, delays

    out, delays = run(scenario())
    assert out.details.aborted, text_of(out)
    far = [delay for delay in delays if delay > 300]
    # 0.25 s of slack for the moment between reading the clock and scheduling; rounding to
    # whole seconds loses up to 0.999 s.
    assert not far or max(far) > timeout_ms / 1000 - 0.25, (
        f"bash_timeout_ms={timeout_ms} must give a timeout of {timeout_ms / 1000:g} s, but the "
        f"call's timer was due in {max(far or [0]):.3f} s: convert milliseconds to seconds "
        "with bash_timeout_ms / 1000, never round to whole seconds (// 1000, int(...))"
    )


def test_an_abort_before_start_spawns_nothing(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned = refuse_to_spawn(monkeypatch)
    controller = AbortController()
    controller.abort()
    out = run(
        call(
            create_coding_tools(workspace),
            "bash",
            {"command": "touch spawned.txt"},
            signal=controller.signal,
        )
    )
    assert not spawned, (
        f"the call started a process ({spawned[0]}) although the signal was already aborted: "
        "check signal.aborted before spawning anything"
    )
    assert out.is_error and out.details.aborted, "an already-aborted call must end as aborted"


def test_a_background_process_does_not_outlive_a_successful_command(workspace: Path) -> None:
    child = script(
        workspace,
        "lingering.py",
        """
        import os, time
        with open("lingering.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        for _ in range(120):  # a leftover still ends by itself, in 2 minutes
            time.sleep(1)
    """,
    )
    command = f"{child} & while [ ! -s lingering.pid ]; do sleep 0.01; done; echo started"
    out = call_now(unrestricted(workspace), "bash", command=command)
    assert not out.is_error and "started" in text_of(out), text_of(out)
    assert_gone(int((workspace / "lingering.pid").read_text()), "lingering.py")


# ---------------------------------------------------------------- output budget


def test_long_output_is_truncated_within_the_budget_notice_included(workspace: Path) -> None:
    command = f"{PY} -c \"print('x' * 200000)\""
    out = call_now(unrestricted(workspace, max_bash_output_bytes=1000), "bash", command=command)
    assert text_of(out).endswith("\n[output truncated]"), (
        "truncated output must end with the notice, on a line of its own"
    )
    assert utf8_len(text_of(out)) <= 1000, (
        f"the text is {utf8_len(text_of(out))} bytes: the notice counts against the budget"
    )
    assert text_of(out).startswith("xxxx") and out.details.truncated


def test_output_that_exactly_fills_the_budget_is_not_truncated(workspace: Path) -> None:
    command = f"{PY} -c \"print('x' * 999)\""  # 1000 bytes with the newline
    out = call_now(unrestricted(workspace, max_bash_output_bytes=1000), "bash", command=command)
    assert text_of(out) == "x" * 999 + "\n" and not out.details.truncated, (
        "output of exactly max_bash_output_bytes fits: keep it whole, without the notice"
    )


# 999 x's and a newline: the output alone fills the budget of 1000 exactly, and only the
# status ('exit 3') makes the text too long.
@pytest.mark.parametrize("printed", [200000, 999], ids=["long-output", "output-fills-budget"])
def test_a_failed_command_keeps_its_status_and_the_notice_within_the_budget(
    workspace: Path, printed: int
) -> None:
    command = f"{PY} -c \"print('x' * {printed})\"; exit 3"
    out = call_now(unrestricted(workspace, max_bash_output_bytes=1000), "bash", command=command)
    assert out.is_error and "exit 3" in text_of(out), text_of(out)
    assert utf8_len(text_of(out)) <= 1000 and text_of(out).endswith("[output truncated]"), (
        "the status line of a failed command counts against the budget too: reserve its bytes "
        "(render(reserve=...)) before cutting, so that the notice still ends the text"
    )
    assert out.details.truncated, (
        f"{printed + 1} bytes of output and the status 'exit 3' did not fit a budget of 1000 "
        "and the text was cut, but details say truncated=False: report whether the text "
        "finally returned was cut (status included), not only whether the output alone "
        "overflowed the budget"
    )


def test_stdout_and_stderr_share_one_budget(workspace: Path) -> None:
    command = "printf 'o%.0s' {1..600}; printf 'e%.0s' {1..600} >&2"  # 1200 bytes in all
    out = call_now(
        create_coding_tools(workspace, max_bash_output_bytes=1000), "bash", command=command
    )
    assert not out.is_error, text_of(out)
    assert utf8_len(text_of(out)) <= 1000 and text_of(out).endswith("\n[output truncated]"), (
        f"600 bytes on stdout and 600 on stderr do not fit a budget of 1000, got "
        f"{utf8_len(text_of(out))} bytes ending {text_of(out)[-30:]!r}: feed both pipes into "
        "one OutputBudget, so the truncated text ends with the notice on a line of its own"
    )
    assert out.details.truncated


def test_a_budget_smaller_than_the_notice_still_holds(workspace: Path) -> None:
    command = f"{PY} -c \"print('x' * 5000)\""
    out = call_now(unrestricted(workspace, max_bash_output_bytes=10), "bash", command=command)
    assert out.details.truncated and utf8_len(text_of(out)) <= 10, (
        "with a budget smaller than the notice, cut the notice itself to the budget"
    )


def test_output_that_is_not_utf8_still_fits_the_budget(workspace: Path) -> None:
    # 100 bytes that are not UTF-8: each is shown as U+FFFD, 3 bytes of text, so the text
    # would be 300 bytes although only 100 bytes came.
    command = "printf '\\xff%.0s' {1..100}"
    out = call_now(
        create_coding_tools(workspace, max_bash_output_bytes=100), "bash", command=command
    )
    assert out.details.exit_code == 0, text_of(out)
    assert utf8_len(text_of(out)) <= 100, (
        f"100 bytes that are not UTF-8 gave a text of {utf8_len(text_of(out))} UTF-8 bytes for "
        "a budget of 100: each invalid byte is shown as U+FFFD (3 bytes), so compare the "
        "budget with the UTF-8 length of the decoded text, not with the raw bytes"
    )
    assert text_of(out).startswith("\ufffd"), (
        f"output that is not UTF-8 is decoded with errors='replace' (U+FFFD for each bad "
        f"byte), never dropped: got {text_of(out)!r}"
    )
    assert out.details.truncated and text_of(out).endswith("\n[output truncated]"), (
        "the decoded text did not fit the budget and was cut: say so (the notice, and "
        f"truncated=True); got {text_of(out)!r}, truncated={out.details.truncated}"
    )


# OutputBudget.render's corner cases: the chunks added (as pipe reads bring them), the
# budget's limit, render's reserve, what it must return, and the rule.
_NOTICE_ALONE = len("[output truncated]") + 1  # what the status leaves: the notice, one byte
RENDER_CASES = {
    "a-character-split-between-reads": (
        [b"caf\xc3", b"\xa9 \xe2\x82", b"\xac\n"],
        (1000, 0),
        ("café €\n", False),
        "a pipe read may end inside a UTF-8 character, and the next one brings the rest: keep "
        "bytes as they come and decode once, in render (decoding each chunk alone turns one "
        "character into two U+FFFD)",
    ),
    "a-notice-with-no-room-for-output": (
        [b"x" * 200],
        (100, 100 - _NOTICE_ALONE),
        ("[output truncated]", True),
        "when the status leaves no room for any output, the text is the notice alone: never "
        "an empty line before it (no separator when nothing is kept)",
    ),
}


@pytest.mark.parametrize("case", list(RENDER_CASES))
def test_render_in_a_corner(case: str) -> None:
    chunks, (limit, reserve), expected, rule = RENDER_CASES[case]
    budget = OutputBudget(limit)
    for chunk in chunks:
        budget.add(chunk)
    got = budget.render(reserve=reserve)
    assert got == expected, f"{rule}. Got: {got!r}"


def test_the_budget_holds_at_most_limit_bytes_and_loses_none_of_them() -> None:
    budget = OutputBudget(1000)
    budget.add(b"x" * 999)
    budget.add(b"y")  # exactly the last byte of room
    assert budget.render() == ("x" * 999 + "y", False), (
        "1000 bytes fit a budget of 1000: keep every one of them, and do not report truncation"
    )
    lines = OutputBudget(99)
    lines.add(b"line\n" * 100)
    text, truncated = lines.render()
    assert truncated and utf8_len(text) <= 99 and text.startswith("line\nline\n"), text
    assert text.endswith("\n[output truncated]") and "\n\n" not in text, (
        f"the notice stands on a line of its own, with no empty line before it: {text!r}"
    )
    tracemalloc.start()
    try:
        flood = OutputBudget(1000)
        chunk = b"z" * 65536
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(128):  # 8 MiB
            flood.add(chunk)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 256 * 1024, (
        f"the budget grew by {kept} bytes while 8 MiB went through a 1000-byte budget: keep at "
        "most limit bytes and drop the rest as it arrives (a command may print gigabytes)"
    )
    text, truncated = flood.render()
    assert truncated and utf8_len(text) <= 1000


@pytest.mark.parametrize("budget", [999, 1000])  # one of the two cuts lands inside an 'é'
def test_truncation_counts_utf8_bytes_and_never_splits_a_character(
    workspace: Path, budget: int
) -> None:
    command = f"{PY} -c \"print('é' * 100000)\""
    out = call_now(unrestricted(workspace, max_bash_output_bytes=budget), "bash", command=command)
    assert utf8_len(text_of(out)) <= budget, "the budget is in UTF-8 bytes ('é' is 2)"
    assert "\ufffd" not in text_of(out), "cut at a character boundary, not inside 'é'"
    assert text_of(out).endswith("[output truncated]")
    assert text_of(out).startswith("éé") and utf8_len(text_of(out)) >= budget - 25, (
        "truncation must keep as much output as fits in the budget"
    )


def test_both_pipes_are_drained_after_the_budget_is_spent(workspace: Path) -> None:
    # 8 MiB a pipe, far more than any pipe holds (64 KiB, 1 MiB when enlarged): a tool that
    # stops reading once the budget is spent deadlocks the child.
    command = script(
        workspace,
        "flood.py",
        """
        import sys
        for _ in range(512):
            sys.stdout.write("o" * 16384)
            sys.stderr.write("e" * 16384)
        sys.stdout.flush()
        sys.stderr.flush()
    """,
    )
    out = call_now(
        unrestricted(workspace, max_bash_output_bytes=2000, bash_timeout_ms=10000),
        "bash",
        command=command,
    )
    assert not out.details.timed_out, (
        "the command timed out: keep reading both pipes to the end, even past the budget"
    )
    assert out.details.exit_code == 0 and out.details.truncated
    assert utf8_len(text_of(out)) <= 2000


def test_output_still_in_the_pipes_when_the_shell_exits_is_read(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When the shell exits, up to a pipe's worth of its output can still be in the pipe,
    # unread. asyncio reads a pipe here 1 KiB per turn of the event loop (as slowly as a
    # busy loop would): whatever the tool does after the exit, it must read both pipes to
    # their end (a short drain) before it closes them.
    monkeypatch.setattr("asyncio.unix_events._UnixReadPipeTransport.max_size", 1024)
    size = 2 << 20
    command = f"head -c {size} /dev/zero | tr '\\0' a; exit 0"
    out = call_now(
        unrestricted(workspace, max_bash_output_bytes=4 << 20, bash_timeout_ms=20000),
        "bash",
        command=command,
    )
    shown = text_of(out)
    assert out.details.exit_code == 0 and len(shown) == size and set(shown) == {"a"}, (
        f"the command wrote {size} bytes and exited; the result holds {len(shown)} "
        f"(truncated={out.details.truncated}): output still in the pipes when the shell "
        "exited was lost. After the exit, keep reading both pipes until they reach their end "
        "(a short drain, about 2 s, for a process that holds them open) and only then close "
        "the transport"
    )


# A command whose SIGTERM handler prints its last words on both pipes and exits.
LAST_WORDS = """
    import os, signal, sys, time
    def last_words(signum, frame):
        sys.stdout.write("stdout: cleaned up\\n")
        sys.stderr.write("stderr: cleaned up\\n")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    signal.signal(signal.SIGTERM, last_words)
    with open("handler.ready", "w") as f:
        f.write("ready\\n")
    time.sleep(120)  # a leftover still ends by itself
"""

READ_DELAY_SECONDS = 0.3


def read_each_pipe_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make asyncio read a pipe only READ_DELAY_SECONDS after it becomes readable (as a
    busy event loop might): output written as the group ends is still in the pipes when
    the group is gone."""
    transport = asyncio.unix_events._UnixReadPipeTransport  # type: ignore[attr-defined]
    read_now = transport._read_ready

    def read_later(self: Any) -> None:
        self._loop._remove_reader(self._fileno)
        self._loop.call_later(READ_DELAY_SECONDS, read_then_listen, self)

    def read_then_listen(self: Any) -> None:
        if self._closing:
            return  # closed meanwhile: what was still in the pipe is lost
        read_now(self)
        if not self._closing and not self._paused:
            self._loop._add_reader(self._fileno, self._read_ready)

    monkeypatch.setattr(transport, "_read_ready", read_later)


def test_what_the_group_prints_as_a_timeout_ends_it_is_read(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_each_pipe_late(monkeypatch)
    command = script(workspace, "last_words.py", LAST_WORDS)
    out = call_until_ready(workspace, command, "handler.ready", 1000)
    assert out.details.timed_out, text_of(out)
    shown = text_of(out)
    assert "timed out" in shown and not re.search(r"\bexit 0\b", shown), (
        "the timeout ended the command first (its SIGTERM handler then exited 0): the text "
        f"says it timed out, never how the shell exited after it. Got: {shown!r}"
    )
    assert "stdout: cleaned up" in shown and "stderr: cleaned up" in shown, (
        "the command's SIGTERM handler printed its last words on both pipes as the timeout "
        "ended it, and the result lost them: after a timeout's or an abort's kill too, "
        "read both pipes to their end (the same short drain, about 2 s, as after an exit) "
        f"before closing them. Got: {shown!r}"
    )


def test_a_command_that_never_stops_printing_still_ends_at_its_timeout(
    workspace: Path,
) -> None:
    command = script(
        workspace,
        "endless.py",
        """
        import os, sys, time
        with open("endless.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        end = time.monotonic() + 120  # a leftover still ends by itself
        while time.monotonic() < end:
            # 64 KiB on each pipe every 10 ms: past any pipe buffer and budget within the
            # first second, without keeping two cores busy for the whole timeout.
            sys.stdout.write("o" * 65536)
            sys.stderr.write("e" * 65536)
            time.sleep(0.01)
    """,
    )
    out = call_until_ready(workspace, command, "endless.pid", 2000, max_bash_output_bytes=2000)
    assert out.is_error and out.details.timed_out and out.details.truncated, (
        "output that never ends must not keep the call alive: the timeout still ends it, "
        "and the result is truncated"
    )
    assert utf8_len(text_of(out)) <= 2000
    assert_gone(int((workspace / "endless.pid").read_text()), "endless.py")


@pytest.mark.parametrize(
    ("command", "budget"),
    [("sleep 30", 40), ("true", 10), ("exit 3", 5)],
    ids=["timeout", "silent-success", "silent-failure"],
)
def test_the_status_text_counts_against_the_budget_too(
    workspace: Path, command: str, budget: int
) -> None:
    tools = create_coding_tools(workspace, max_bash_output_bytes=budget, bash_timeout_ms=1000)
    out = call_now(tools, "bash", command=command)
    assert out.details.timed_out == (command == "sleep 30"), text_of(out)
    assert utf8_len(text_of(out)) <= budget, (
        f"{utf8_len(text_of(out))} bytes for a budget of {budget}: the whole text, status "
        "included (e.g. '(no output, exit 0)'), must fit in max_bash_output_bytes; cut the "
        f"status itself to fit. Got {text_of(out)!r}"
    )


@pytest.mark.parametrize(
    "command",
    ["echo a\0b", "echo \ud800", "echo \udcff"],
    ids=["NUL", "lone-surrogate", "surrogate-of-a-raw-byte"],
)
def test_a_command_bash_cannot_receive_is_an_error_result(workspace: Path, command: str) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert out.is_error and out.details.exit_code is None, (
        "a NUL character or a lone surrogate cannot be passed to a program: return an error "
        "result (a tool never raises), and do not run anything"
    )


# ---------------------------------------------------------------- guardrail


@pytest.mark.parametrize(
    "command",
    [
        "touch ran.txt; cat /etc/hostname",
        "touch ran.txt && ls ~/",
        "touch ran.txt; cat ../outside/secret.txt",
        "touch ran.txt 2>/dev/null",
        "touch ran.txt;(cat /etc/passwd)",
        "touch ran.txt;(/bin/true)",
        "touch ran.txt;/bin/true",
        "touch ran.txt;case x in x)/bin/true;;esac",
        "/bin/touch ran.txt",
        "touch ran.txt&&/bin/cat ran.txt",
        "touch ran.txt|/bin/cat",
        "touch ran.txt&/bin/true",
        "touch ran.txt;cat</etc/hostname",
        "touch ran.txt;cat $(echo)/etc/hostname",
        "touch ran.txt\tcat\t/etc/hostname",
        "touch ran.txt\ncat /etc/hostname",
        "touch ran.txt\n/bin/true",
        "touch ran.txt; cat {workspace}/notes.txt",
    ],
)
def test_the_guardrail_refuses_paths_outside_and_never_runs_them(
    workspace: Path, command: str
) -> None:
    (workspace / "notes.txt").write_text("inside\n")
    command = command.format(workspace=workspace)
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert out.is_error and "guardrail" in text_of(out), (
        f"workspace mode must refuse {command!r} with an error that mentions the guardrail: "
        "it refuses every word that starts with /, ~/ or ../, wherever it leads (an absolute "
        "path into the workspace too): it looks at words, never at where they lead"
    )
    assert not (workspace / "ran.txt").exists(), "a refused command must not run at all"


@pytest.mark.parametrize(
    "command",
    [
        "echo a/b > ok.txt",
        "mkdir -p d && echo x > d/ok.txt && cp d/ok.txt ok.txt",
        "echo http://example.org > ok.txt",
        "echo x>ok.txt",
        "echo x > ..notes && cp ..notes ok.txt",
        "echo x > ~notes && cp ~notes ok.txt",
        "mkdir d && echo x > d/../ok.txt",
    ],
)
def test_the_guardrail_allows_relative_paths(workspace: Path, command: str) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert not out.is_error, f"{command!r} names no path outside the workspace: {text_of(out)}"
    assert (workspace / "ok.txt").exists()


def test_the_guardrail_refuses_first_also_when_the_call_is_already_aborted(
    workspace: Path,
) -> None:
    controller = AbortController()
    controller.abort("user pressed stop")
    command = "touch ran.txt; cat /etc/hostname"
    out = run(
        call(create_coding_tools(workspace), "bash", {"command": command}, signal=controller.signal)
    )
    assert out.is_error and "guardrail" in text_of(out), (
        "refuse guardrail violations first, before you look at the abort signal: the model "
        "learns why the command may never run, which an 'aborted' would hide. Got: "
        f"{text_of(out)!r}"
    )
    assert not (workspace / "ran.txt").exists(), "a refused command must not run at all"


def test_unrestricted_mode_has_no_guardrail(workspace: Path) -> None:
    out = call_now(unrestricted(workspace), "bash", command="cat /dev/null; echo ran")
    assert not out.is_error and "ran" in text_of(out)


# ---------------------------------------------------------------- beyond the chapter


@pytest.mark.challenge
def test_a_spawn_failure_is_an_error_result(tmp_path: Path) -> None:
    gone = tmp_path / "deleted-workspace"
    gone.mkdir()
    registry = create_coding_tools(gone)
    gone.rmdir()
    out = call_now(registry, "bash", command="echo hi")
    assert out.is_error, "a command that cannot start (missing cwd) is an error result"


@pytest.mark.challenge
def test_an_environment_too_big_to_pass_on_is_an_error_result(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One variable larger than Linux passes in one string (128 KiB) and than macOS passes in
    # all (1 MiB): bash inherits it, so the exec itself fails with E2BIG. PATH holds bash's
    # folder only: a folder before it that the user may not enter would fail first (EACCES).
    bash = shutil.which("bash")
    assert bash is not None, "these tests need bash"
    monkeypatch.setenv("PATH", os.path.dirname(bash))
    monkeypatch.setenv("PICOURSE_HUGE_VARIABLE", "x" * 1_500_000)
    out = call_now(create_coding_tools(workspace), "bash", command="touch ran.txt")
    assert out.is_error and "Argument list too long" in text_of(out), (
        "when the system refuses to start bash because the environment is too big, return an "
        "error result that gives the system's reason ('Argument list too long'); got: "
        f"{text_of(out)[:200]!r}"
    )
    assert out.details.exit_code is None and not (workspace / "ran.txt").exists()


@pytest.mark.challenge
def test_a_command_too_long_for_the_system_suggests_a_script_file(workspace: Path) -> None:
    command = "echo " + "x" * 200_000
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert out.is_error and "file" in text_of(out), (
        "a command longer than the system passes to a program (128 KiB on Linux) is an error "
        f"result that suggests writing the script to a file; got: {text_of(out)[:200]!r}"
    )


@pytest.mark.challenge
def test_flooding_both_pipes_far_past_the_buffer_never_deadlocks(workspace: Path) -> None:
    command = script(
        workspace,
        "deluge.py",
        """
        import sys
        block = "z" * 65536
        for _ in range(320):  # 20 MiB on each pipe
            sys.stdout.write(block)
            sys.stderr.write(block)
    """,
    )
    out = call_now(unrestricted(workspace, bash_timeout_ms=50000), "bash", command=command)
    assert out.details.exit_code == 0 and not out.details.timed_out and out.details.truncated


@pytest.mark.challenge
@pytest.mark.watches_the_event_loop  # the abort must land before the 1 ms timer fires
def test_timeout_and_abort_together_give_one_result(workspace: Path) -> None:
    command = script(workspace, "both.py", FAMILY)

    async def scenario() -> ToolOutput:
        controller = AbortController()
        task = asyncio.create_task(
            call(
                unrestricted(workspace, bash_timeout_ms=1),
                "bash",
                {"command": command},
                signal=controller.signal,
            )
        )
        await asyncio.sleep(0)
        controller.abort()
        return await task

    out = run(scenario())
    assert out.is_error
    assert out.details.timed_out != out.details.aborted, (
        "exactly one ending may be reported: timed_out or aborted, not both"
    )


# A child that leaves the tool's session and process group, reports its pid, and lives on.
ESCAPEE = """
    import os, time
    if os.fork() == 0:
        os.setsid()  # a new session: no longer in the tool's process group
        with open("escapee.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        for _ in range(120):  # a leftover still ends by itself, in 2 minutes
            time.sleep(1)
    while not os.path.exists("escapee.pid"):
        time.sleep(0.01)
"""


@pytest.mark.challenge
def test_a_descendant_that_escaped_with_setsid_is_cleaned_up(workspace: Path) -> None:
    command = script(workspace, "escapee.py", ESCAPEE)
    out = call_now(unrestricted(workspace), "bash", command=command)
    assert not out.is_error, text_of(out)
    assert_gone(int((workspace / "escapee.pid").read_text()), "escapee.py")


# ---------------------------------------------------------------- how each ending reads


@pytest.fixture
def without_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as on a machine without cgroup v2 delegation (macOS, most containers and CI
    runners): the given CommandScope, if the tool uses it, falls back to the process group,
    the subreaper and its marker. A tool that does not use it is not affected."""
    monkeypatch.setattr("picourse.coding_tools.command_scope._new_cgroup", lambda marker: None)


def kill_and_reap(pid_file: Path) -> None:
    """SIGKILL the process whose pid the file holds (if it is still there) and wait for it."""
    if not pid_file.exists():
        return
    try:
        process = psutil.Process(int(pid_file.read_text()))
        process.kill()
        process.wait(timeout=5)
    except (psutil.Error, ValueError):
        pass


# A background process that leaves the pipes (its output goes to /dev/null), so that their
# end says nothing about it, and that holds 256 MiB of touched memory: after SIGKILL the
# kernel needs some milliseconds to free it, while the process still exists (not yet a
# zombie). Only a tool that waits for its kill never returns before it is gone.
BALLAST = """
    import os, time
    ballast = bytearray(256 * 1024 * 1024)  # zero-filled: every page touched
    with open("ballast.pid", "w") as f:
        f.write(f"{os.getpid()}\\n")
    for _ in range(120):  # a leftover still ends by itself, in 2 minutes
        time.sleep(1)
"""


@pytest.mark.parametrize("cgroups", ["as-available", "none"])
def test_the_kill_is_waited_for_before_the_call_returns(
    workspace: Path, request: pytest.FixtureRequest, cgroups: str
) -> None:
    if cgroups == "none":
        request.getfixturevalue("without_cgroups")
    child = script(workspace, "ballast.py", BALLAST)
    # The shell ends (exit 0) only once the test has taken hold of the background process.
    command = f"{child} >/dev/null 2>&1 & while [ ! -e seen ]; do sleep 0.01; done; echo started"

    async def scenario() -> tuple[ToolOutput, bool]:
        task = asyncio.create_task(call(unrestricted(workspace), "bash", {"command": command}))
        process = psutil.Process(int(await wait_for_file(workspace / "ballast.pid", task)))
        (workspace / "seen").write_text("seen\n")
        out = await task
        # At once: nothing may finish the kill for the tool. By pid and start time (psutil
        # remembers it), as a dying process no longer shows its command line.
        with contextlib.suppress(psutil.NoSuchProcess):
            return out, process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        return out, False

    try:
        out, running = run(scenario())
    finally:
        kill_and_reap(workspace / "ballast.pid")
    assert not out.is_error and "started" in text_of(out), text_of(out)
    assert not running, (
        "a background process of the command still existed when the call returned (it had "
        "left the pipes, so their end did not wait for it): SIGKILL what is left and wait "
        "until it is gone before returning; never leave the kill to a background thread or "
        "task (the given CommandScope.sweep waits, in a worker thread: await it)"
    )


@pytest.mark.parametrize(
    "command",
    ["cat /etc/hostname", "echo a\0b", "echo \ud800", "true"],
    ids=["guardrail", "NUL", "lone-surrogate", "missing-workspace"],
)
def test_a_refused_command_reports_not_started_in_its_details(
    workspace: Path, command: str
) -> None:
    # "missing-workspace": bash cannot start in a folder that does not exist.
    cwd = workspace / "gone" if command == "true" else workspace
    out = call_now(create_coding_tools(cwd), "bash", command=command)
    assert out.is_error, text_of(out)
    assert out.details == BashDetails(command, None, False, False, False), (
        f"a command that never ran was reported as {out.details}: it did not exit, time out, "
        "get aborted or print anything, so exit_code is None and timed_out, aborted and "
        "truncated are all False"
    )


@pytest.mark.parametrize(
    ("command", "problem"),
    [("echo a\0b", "nul"), ("echo \ud800", "surrogate"), ("echo \udcff", "surrogate")],
    ids=["NUL", "lone-surrogate", "surrogate-of-a-raw-byte"],
)
def test_a_command_bash_cannot_receive_spawns_nothing_and_says_why(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, command: str, problem: str
) -> None:
    spawned = refuse_to_spawn(monkeypatch)
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert not spawned, (
        f"the call tried to start a process ({spawned[0]}) for a command no program can "
        "receive: check for a NUL character and a lone surrogate before spawning anything"
    )
    assert out.is_error and problem in text_of(out).lower(), (
        f"the error must name the problem ({problem!r}) so that the model can fix the "
        f"command; got {text_of(out)!r}"
    )


def test_an_abort_before_start_says_the_run_was_aborted(workspace: Path) -> None:
    controller = AbortController()
    controller.abort()
    out = run(
        call(create_coding_tools(workspace), "bash", {"command": "true"}, signal=controller.signal)
    )
    assert out.is_error and "abort" in text_of(out).lower(), (
        f"an already-aborted call must say that the run was aborted; got {text_of(out)!r}"
    )


def test_a_silent_success_is_a_short_status_and_not_truncated(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="true")
    assert not out.is_error and "exit 0" in text_of(out), (
        f"a command that prints nothing gives a short status such as '(no output, exit 0)', "
        f"got {text_of(out)!r}"
    )
    assert out.details == BashDetails("true", 0, False, False, False), (
        f"nothing was printed, so nothing was truncated: {out.details}"
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("exit 3", "exit 3"),
        ("echo partial; exit 3", "exit 3"),
        ("kill -KILL $$", "signal 9"),
        ("exit 137", "exit 137"),
        ("sh -c 'kill -KILL $$'; exit $?", "exit 137"),
    ],
    ids=["silent-failure", "failure-with-output", "killed", "high-exit", "child-killed"],
)
def test_the_text_tells_how_the_command_ended(workspace: Path, command: str, expected: str) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert out.is_error and expected in text_of(out), (
        f"the model sees only the text: it must say how {command!r} ended ({expected!r}), "
        f"with or without output; got {text_of(out)!r}"
    )
    if expected.startswith("exit"):
        code = int(expected.split()[1])
        assert "signal" not in text_of(out) and out.details.exit_code == code, (
            f"{command!r} made the shell exit with status {code}: an exit status, however "
            "high, is an exit (only a negative returncode means the shell was killed by a "
            f"signal). Got: {text_of(out)!r}, exit_code={out.details.exit_code}"
        )
    if command.startswith("echo"):
        assert "partial" in text_of(out), "the output before the failure must be kept"


def names_the_timeout(text: str, milliseconds: int) -> bool:
    """Whether ``text`` names a timeout of ``milliseconds`` as 1.5s, 1.5 s, 1500 ms or 1500ms."""
    seconds = f"{milliseconds / 1000:g}"
    spellings = (f"{seconds}s", f"{seconds} s", f"{milliseconds} ms", f"{milliseconds}ms")
    return any(spelling in text for spelling in spellings)


def test_the_text_tells_a_timeout_and_its_length(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace, bash_timeout_ms=1500), "bash", command="sleep 30")
    assert out.details.timed_out, text_of(out)
    assert "timed out" in text_of(out) and names_the_timeout(text_of(out), 1500), (
        f"the text must say that the command timed out, and after how long: {text_of(out)!r}"
    )


def test_the_timeout_named_is_the_one_configured_not_the_time_it_took(workspace: Path) -> None:
    # The shell ignores SIGTERM (and so does its child): the call lasts the timeout and the
    # grace, and still names the timeout it was given.
    tools = create_coding_tools(workspace, bash_timeout_ms=500)
    out = call_now(tools, "bash", command="trap '' TERM; sleep 30")
    assert out.details.timed_out, text_of(out)
    assert names_the_timeout(text_of(out), 500), (
        "the text names the timeout's length as configured (bash_timeout_ms=500: 0.5s), "
        f"never the time the call took with its grace: {text_of(out)!r}"
    )


def test_output_of_only_whitespace_is_output(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="printf ' \\n'")
    assert not out.is_error and text_of(out) == " \n", (
        "a successful command's text is its output alone, also when that is only a space "
        f"and a newline: only no output at all gives the status. Got: {text_of(out)!r}"
    )


def test_the_text_tells_an_abort(workspace: Path) -> None:
    out, _ = abort_when_ready(workspace, "echo $$ > family.pid; sleep 30")
    assert out.details.aborted and "abort" in text_of(out).lower(), (
        f"the text must say that the command was aborted: {text_of(out)!r}"
    )


def test_render_stays_within_limit_minus_reserve() -> None:
    budget = OutputBudget(30)
    budget.add(b"x")
    text, truncated = budget.render(reserve=30)
    assert text == "" and truncated, (
        f"render(reserve=30) of a 30-byte budget has no room left, got {(text, truncated)!r}: "
        "the text, notice included, stays within limit - reserve bytes, and output that is "
        "not shown counts as truncated"
    )
    text, truncated = budget.render(reserve=29)
    assert text == "x" and not truncated, "one byte of room holds the one byte of output"


def test_blank_lines_of_the_output_are_kept_before_the_notice() -> None:
    budget = OutputBudget(100)
    budget.add(b"x" + b"\n" * 200)
    text, truncated = budget.render()
    assert (
        truncated and text.startswith("x" + "\n" * 80) and text.endswith("\n[output truncated]")
    ), (
        "the output's own blank lines are output: keep every one that fits (80 of them fit "
        "here, after the 'x'); only never add an empty line of your own before the notice. "
        f"Got {text!r}"
    )
    assert utf8_len(text) <= 100, f"the text must stay within the budget of 100: {text!r}"


@pytest.mark.parametrize("output", [b"x" * 200, b"abcdefg\n" * 50], ids=["one-line", "lines"])
def test_truncation_keeps_every_byte_that_fits(output: bytes) -> None:
    budget = OutputBudget(100)
    budget.add(output)
    text, truncated = budget.render()
    assert truncated and text == output[:81].decode() + "\n[output truncated]", (
        f"a budget of 100 holds 81 bytes of output, the newline and the 18-byte notice; got "
        f"{utf8_len(text)} bytes: {text!r}. Keep as much output as fits, also when the cut "
        "falls inside a line: unlike read, bash does not cut back to the last whole line"
    )


def test_output_past_a_budget_filled_exactly_is_truncated(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first read brings exactly max_bash_output_bytes; only then does more output come.
    add = OutputBudget.add

    def add_and_tell(self: OutputBudget, data: bytes) -> None:
        add(self, data)
        (workspace / "read.txt").write_text("read\n")

    monkeypatch.setattr(OutputBudget, "add", add_and_tell)
    command = script(
        workspace,
        "exact_then_more.py",
        """
        import os, sys, time
        sys.stdout.buffer.write(b"x" * 1000)
        sys.stdout.flush()
        end = time.monotonic() + 5  # a tool that adds later still gets the rest
        while not os.path.exists("read.txt") and time.monotonic() < end:
            time.sleep(0.01)
        sys.stdout.buffer.write(b"y" * 5000)
        sys.stdout.flush()
    """,
    )
    out = call_now(unrestricted(workspace, max_bash_output_bytes=1000), "bash", command=command)
    assert out.details.exit_code == 0, text_of(out)
    assert out.details.truncated and text_of(out).endswith("\n[output truncated]"), (
        "1000 bytes filled the budget exactly, then 5000 more came: the result is truncated and "
        "ends with the notice. Every byte still goes through the budget (add), which notes "
        f"that it did not fit; got {utf8_len(text_of(out))} bytes, truncated="
        f"{out.details.truncated}"
    )


def test_a_background_process_without_the_environment_dies_with_the_group(
    workspace: Path, without_cgroups: None
) -> None:
    child = script(
        workspace,
        "bare.py",
        """
        import os, time
        with open("bare.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        for _ in range(120):  # a leftover still ends by itself, in 2 minutes
            time.sleep(1)
    """,
    )
    command = f"env -i {child} & while [ ! -s bare.pid ]; do sleep 0.01; done; echo started"
    try:
        out = call_now(unrestricted(workspace), "bash", command=command)
        assert not out.is_error and "started" in text_of(out), text_of(out)
        assert_gone(int((workspace / "bare.pid").read_text()), "bare.py")
    finally:
        kill_and_reap(workspace / "bare.pid")


@pytest.mark.challenge
def test_a_setsid_escapee_is_cleaned_up_without_cgroups(
    workspace: Path, without_cgroups: None
) -> None:
    command = script(workspace, "escapee_nocg.py", ESCAPEE)
    try:
        out = call_now(unrestricted(workspace), "bash", command=command)
        assert not out.is_error, text_of(out)
        assert_gone(int((workspace / "escapee.pid").read_text()), "escapee_nocg.py")
    finally:
        kill_and_reap(workspace / "escapee.pid")


@pytest.mark.challenge
def test_an_escapee_holding_the_pipes_does_not_keep_the_call_alive(
    workspace: Path, without_cgroups: None
) -> None:
    # The holder leaves the session and drops the environment: no sweep finds it without a
    # cgroup. It keeps stdout and stderr open and prints nothing more.
    holder = script(
        workspace,
        "holder.py",
        """
        import os, time
        os.setsid()
        with open("holder.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        for _ in range(120):  # a leftover still ends by itself, in 2 minutes
            time.sleep(1)
    """,
    )
    command = (
        f"env -i {holder} & while [ ! -s holder.pid ]; do sleep 0.01; done; "
        "printf 'x%.0s' {1..5000}"
    )
    released = []

    def release() -> None:  # a safety net: only if the call still hangs after 10 s
        released.append(True)
        kill_and_reap(workspace / "holder.pid")

    watchdog = threading.Timer(10, release)
    watchdog.start()
    try:
        out = call_now(unrestricted(workspace, max_bash_output_bytes=1000), "bash", command=command)
    finally:
        watchdog.cancel()
        watchdog.join()
        kill_and_reap(workspace / "holder.pid")
    assert not released, (
        "the call did not return while an escaped process held its pipes open: after the "
        "shell exits and the group is ended, stop reading after a short drain (about 2 s)"
    )
    assert out.details.exit_code == 0 and out.details.truncated, text_of(out)


@pytest.mark.challenge
def test_the_longest_command_linux_passes_still_runs(workspace: Path) -> None:
    prefix = "echo ran #"
    command = prefix + "x" * (131071 - len(prefix))  # 131071 bytes: with its NUL, 128 KiB
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert not out.is_error and "ran" in text_of(out), (
        "a command of 131071 bytes fits in one argument (Linux allows 131072 with the NUL): "
        f"refuse only longer ones; got {text_of(out)[:200]!r}"
    )


@pytest.mark.challenge
@pytest.mark.parametrize(
    ("size", "filler"),
    [(131072, "x"), (200_000, "x"), (131072, "é")],
    ids=["131072", "200000", "131072-in-two-byte-characters"],
)
def test_a_command_too_long_for_the_system_says_how_to_run_a_script(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: int, filler: str
) -> None:
    prefix = "touch ran.txt #"
    # The size is in bytes: 65,529 two-byte characters after the prefix make 131,073.
    command = prefix + filler * -(-(size - len(prefix)) // len(filler.encode()))
    assert utf8_len(command) >= size
    spawned = refuse_to_spawn(monkeypatch)
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert out.is_error and "bash script.sh" in text_of(out), (
        f"a command of {size} bytes is too long for the system (128 KiB, 131072 bytes, or "
        "more): refuse it before spawning, with the advice to write it to a file and run "
        f"'bash script.sh'; got {text_of(out)[:300]!r}"
    )
    assert not spawned and not (workspace / "ran.txt").exists(), (
        f"a command of {utf8_len(command)} bytes ({len(command)} characters) was started "
        f"({spawned}): measure its UTF-8 bytes and refuse it before spawning anything"
    )


@pytest.mark.challenge
def test_a_missing_workspace_error_names_the_directory(tmp_path: Path) -> None:
    gone = tmp_path / "deleted-workspace"
    gone.mkdir()
    registry = create_coding_tools(gone)
    gone.rmdir()
    out = call_now(registry, "bash", command="echo hi")
    assert out.is_error and str(gone) in text_of(out), (
        f"a command that cannot start because the workspace is gone must say which directory "
        f"is missing; got {text_of(out)[:300]!r}"
    )
