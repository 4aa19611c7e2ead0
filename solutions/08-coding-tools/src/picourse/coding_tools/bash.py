"""Lab 8.5 (reference): run a command to exactly one bounded end.

bash runs in a new session, so it has no controlling terminal and leads its own process
group; stdin is /dev/null. The call ends in one of: success, non-zero exit, timeout,
abort, or not started at all. On timeout and abort the group gets SIGTERM, a short grace,
then SIGKILL; on every ending, whatever is left of the command (the group, and anything
that escaped it: see ``command_scope``) is killed before the call returns. That sweep
runs in a thread, off the event loop. Timer and abort listener are removed on every path.
Every input gives a result, never an exception; the whole text, status included, fits
in the output budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import re
import select
import subprocess
import threading
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from picourse.abort import AbortSignal
from picourse.coding_tools.command_scope import CommandScope
from picourse.coding_tools.confirm import ask_before_command
from picourse.coding_tools.details import BashDetails
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.output_budget import OutputBudget
from picourse.coding_tools.threads import in_thread
from picourse.messages import text
from picourse.tool import ToolOutput

KILL_GRACE_SECONDS = 1.0
# After the group is killed, an escaped process that hid from the sweep could still hold
# a pipe open; stop reading after this long instead of waiting forever.
DRAIN_AFTER_KILL_SECONDS = 2.0
# Linux passes at most 32 pages (131072 bytes, its NUL included) in one argument.
MAX_COMMAND_BYTES = 131071
_PIPE_BYTES = 1 << 20
_PROCESS_LIMIT = (
    "This user's process limit (ulimit -u, which counts threads) is reached: end some "
    "processes and try again."
)
T = TypeVar("T")

# A word that starts with /, ~/ or ../ at the start or after whitespace or ;&|<>().
_OUTSIDE_WORD = re.compile(r"(?:^|[\s;&|<>()])((?:/|~/|\.\./)\S*)")


def find_guardrail_violation(command: str) -> str | None:
    """The first word that names a path outside the workspace, if any."""
    match = _OUTSIDE_WORD.search(command)
    return match.group(1) if match else None


def _unrunnable(command: str) -> str | None:
    """Why bash could never receive this command, as advice; None when it can."""
    if "\0" in command:
        return (
            "Command refused: it contains a NUL character (\\0), which no program can receive "
            "in its arguments. Remove it; to produce one, use printf '\\0'."
        )
    try:
        size = len(command.encode("utf-8"))
    except UnicodeEncodeError as error:
        return (
            f"Command refused: it is not valid text (a lone surrogate at index {error.start}). "
            "Send the command as plain UTF-8 text."
        )
    if size > MAX_COMMAND_BYTES:
        return _too_long(size)
    return None


def _too_long(size: int) -> str:
    return (
        f"Command refused: it is {size} bytes, more than the system passes to a program "
        f"({MAX_COMMAND_BYTES} bytes in one argument). Write the script to a file in the "
        "workspace (with the write tool) and run it: bash script.sh"
    )


async def run_bash(
    options: CodingToolOptions, command: str, *, signal: AbortSignal | None = None
) -> ToolOutput:
    def details(
        exit_code: int | None = None,
        timed_out: bool = False,
        aborted: bool = False,
        truncated: bool = False,
    ) -> BashDetails:
        return BashDetails(command, exit_code, timed_out, aborted, truncated)

    def refused(message: str, **ending: bool) -> ToolOutput:
        return ToolOutput.error(message, details(**ending))

    problem = _unrunnable(command)
    if problem is not None:
        return refused(problem)
    if options.containment == "workspace":
        word = find_guardrail_violation(command)
        if word is not None:
            return refused(
                f"Command refused by the workspace guardrail: {word!r} names a path outside "
                "the workspace (absolute, ~/ or ../). Use paths relative to the workspace. "
                "The command was not run."
            )
    if signal is not None and signal.aborted:
        return refused("Command not started: the run was aborted.", aborted=True)
    if options.confirm is not None:
        if not await ask_before_command(options.confirm, command):
            return refused("The user declined to run this command; it was not run.")
        if signal is not None and signal.aborted:  # while the user decided
            return refused("Command not started: the run was aborted.", aborted=True)

    loop = asyncio.get_running_loop()
    budget = OutputBudget(options.max_bash_output_bytes)
    scope = CommandScope()
    try:
        start = loop.subprocess_exec(
            lambda: _BashProtocol(budget, loop),
            *scope.argv(command),
            cwd=options.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=scope.env(),
        )
        transport, protocol = await _despite_cancellation(start)
    except (OSError, ValueError) as error:
        await in_thread(scope.sweep)  # releases the cgroup
        if getattr(error, "errno", None) == errno.E2BIG:  # the command itself was checked
            return refused(
                "Could not start bash: the command and the environment together are more than "
                f"the system passes to a program ({os.strerror(errno.E2BIG)}). Unset large "
                "environment variables, or write the script to a file in the workspace and "
                "run it: bash script.sh"
            )
        if getattr(error, "errno", None) == errno.EAGAIN:  # fork refused: no process to be had
            return refused(f"Could not start bash: {os.strerror(errno.EAGAIN)}. {_PROCESS_LIMIT}")
        return refused(
            f"Could not start bash in {options.cwd}: {getattr(error, 'strerror', None) or error}. "
            "Check that the workspace directory exists and bash is installed."
        )
    except RuntimeError as error:
        # Python 3.11's asyncio (and macOS's) watches each child from a thread of its own;
        # when none can be started, bash may already run, unwatched, its pid unknown.
        await in_thread(scope.sweep_unattached)
        return refused(f"Could not start bash: {error} to watch it. {_PROCESS_LIMIT}")
    scope.attach(transport.get_pid())
    ending: asyncio.Future[str] = loop.create_future()

    def end_with(reason: str) -> None:
        if not ending.done():
            ending.set_result(reason)

    timer = loop.call_later(options.bash_timeout_ms / 1000, end_with, "timeout")
    # The abort may come from another thread; hop onto the loop before touching the future.
    remove_listener = (
        signal.add_listener(lambda: loop.call_soon_threadsafe(end_with, "abort"))
        if signal is not None
        else _nothing
    )
    swept = False
    try:
        first: set[asyncio.Future[Any]] = {protocol.exited, ending}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        # Exactly one ending: if the shell exited first, a late timer or abort is moot.
        reason = "exit" if protocol.exited.done() else ending.result()
        timer.cancel()
        remove_listener()
        if reason != "exit":
            await in_thread(scope.terminate)
            await in_thread(scope.wait_until_gone, KILL_GRACE_SECONDS)
        await in_thread(scope.sweep)
        swept = True
        await protocol.exited
        await asyncio.wait({protocol.pipes_closed}, timeout=DRAIN_AFTER_KILL_SECONDS)
    finally:
        timer.cancel()
        remove_listener()
        if not swept:  # cancelled from outside: no grace, and finish even if cancelled again
            await _despite_cancellation(in_thread(scope.sweep))
        protocol.stop_discarding()
        transport.close()

    code = transport.get_returncode()
    exit_code = code if code is not None and code >= 0 else None
    timed_out, aborted = reason == "timeout", reason == "abort"
    outcome = _outcome(exit_code, code, timed_out, aborted, options.bash_timeout_ms)
    succeeded = exit_code == 0 and not timed_out and not aborted
    prefix = "" if succeeded else f"[{outcome}]\n"
    if protocol.received:
        output, truncated = budget.render(reserve=len(prefix.encode()))
        body = _fit(prefix + output, options.max_bash_output_bytes)
        truncated = truncated or not body.endswith(output)
    else:
        body, truncated = _fit(f"(no output, {outcome})", options.max_bash_output_bytes), False
    return ToolOutput(
        [text(body)], details(exit_code, timed_out, aborted, truncated), is_error=not succeeded
    )


async def _despite_cancellation(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even if the call is cancelled meanwhile; the cancellation
    is then passed on at the caller's next await (or goes on from its ``finally``).

    The start: asyncio connects a new process's pipes over a few turns of the event loop
    after the fork. Cancelled there, it kills the shell alone and then waits for every pipe
    to close: a background child of the command, already running, holds them, so the call
    hangs, and the child is never swept (the shell's pid never reached us). The sweep of a
    cancelled call: cancelled again (asyncio.run's teardown cancels every task it finds),
    a shielded sweep would go on unawaited and the pipes would never be let go."""
    working = asyncio.ensure_future(work)
    task = asyncio.current_task()
    cancelled: asyncio.CancelledError | None = None
    while not working.done():
        try:
            await asyncio.wait({working})
        except asyncio.CancelledError as error:
            cancelled = error
            if task is not None:
                task.uncancel()  # taken back here, requested again below
    if cancelled is not None and task is not None:
        task.cancel(*cancelled.args)
    return working.result()


def _fit(status: str, limit: int) -> str:
    """The status text counts against the budget too: cut it at a character boundary."""
    return status.encode("utf-8")[: max(limit, 0)].decode("utf-8", errors="ignore")


def _outcome(
    exit_code: int | None, code: int | None, timed_out: bool, aborted: bool, timeout_ms: int
) -> str:
    if timed_out:
        return (
            f"timed out after {timeout_ms / 1000:g}s; the process group was terminated. "
            "Make the command finish sooner or run less at once"
        )
    if aborted:
        return "aborted; the process group was terminated"
    if exit_code is None:
        return f"killed by signal {-(code or 0)}"
    return f"exit {exit_code}"


class _BashProtocol(asyncio.SubprocessProtocol):
    """Feeds both pipes into the budget as data arrives (so neither pipe can fill up and
    block the child) and tells apart the shell's exit from the pipes' end: a background
    process may hold the pipes open long after the shell is gone."""

    def __init__(self, budget: OutputBudget, loop: asyncio.AbstractEventLoop) -> None:
        self.budget = budget
        self.exited: asyncio.Future[None] = loop.create_future()
        self.pipes_closed: asyncio.Future[None] = loop.create_future()
        self.received = 0  # bytes, kept or not
        self._open_pipes = {1, 2}
        self._loop = loop
        self._pipes: dict[int, asyncio.ReadTransport] = {}
        self._discards: dict[int, _Discard] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.SubprocessTransport):
            return
        for fd in (1, 2):
            pipe = transport.get_pipe_transport(fd)
            # A fast command may have closed a pipe before this runs: leave that one be.
            if isinstance(pipe, asyncio.ReadTransport) and not pipe.is_closing():
                self._pipes[fd] = pipe
                # Bigger pipes (Linux): fewer, larger reads per wake-up for chatty commands.
                if hasattr(fcntl, "F_SETPIPE_SZ"):
                    with contextlib.suppress(OSError, ValueError):
                        fcntl.fcntl(_fileno(pipe), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.received += len(data)
        self.budget.add(data)
        if self.received > self.budget.limit and fd not in self._discards and fd in self._pipes:
            # Nothing more will be kept: stop copying the rest into Python objects.
            self._discards[fd] = _Discard.start(self._loop, self._pipes[fd])

    def stop_discarding(self) -> None:
        """Hand every pipe back to its transport (before the transport is closed)."""
        for discard in self._discards.values():
            discard.stop()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


class _Discard:
    """Throw away the rest of a pipe once the output budget is spent, inside the kernel:
    splice(2) moves the pipe's pages to /dev/null without copying them into this process.

    A thread does it, pausing briefly whenever the pipe runs empty so that each wake-up
    moves a pipe-full rather than one small write: an event-loop reader woke up for every
    write of the command and cost more than the command itself. The pipe's transport is
    paused meanwhile and resumed at end of file, so it still sees the end and reports the
    pipe closed. Where splice is missing (macOS), or no thread can be started, there is no
    thread: the transport keeps reading and the budget keeps dropping what it gets."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: asyncio.ReadTransport) -> None:
        self._loop = loop
        self._pipe = pipe
        self._fd = _fileno(pipe)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="bash-discard", daemon=True)

    @classmethod
    def start(cls, loop: asyncio.AbstractEventLoop, pipe: asyncio.ReadTransport) -> _Discard:
        discard = cls(loop, pipe)
        if hasattr(os, "splice"):
            pipe.pause_reading()
            try:
                discard._thread.start()
            except RuntimeError:  # no thread to be had (the process limit)
                pipe.resume_reading()
        return discard

    def _drain(self) -> None:
        try:
            sink = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:  # no descriptor to be had: the transport reads (and drops) the rest
            self._hand_back_from_thread()
            return
        readable = select.poll()
        readable.register(self._fd, select.POLLIN)
        try:
            while not self._stopping.is_set():
                if not readable.poll(_POLL_MS):
                    continue
                try:
                    while not self._stopping.is_set():
                        if os.splice(self._fd, sink, _PIPE_BYTES, flags=_SPLICE_NONBLOCK) == 0:
                            return  # end of file
                except BlockingIOError:
                    time.sleep(_LET_PIPE_FILL_SECONDS)
        except OSError:
            return  # unexpected: let the transport read (and report) the rest
        finally:
            os.close(sink)
            self._hand_back_from_thread()

    def _hand_back_from_thread(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self._loop.call_soon_threadsafe(self._hand_back)

    def _hand_back(self) -> None:
        if not self._pipe.is_closing():
            self._pipe.resume_reading()

    def stop(self) -> None:
        """Stop the thread (within one poll interval) and give the pipe back."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()
        self._hand_back()


_SPLICE_NONBLOCK = getattr(os, "SPLICE_F_NONBLOCK", 0)
_POLL_MS = 20
# Well under the time a fast writer needs to fill a 1 MiB pipe, so it never waits for us.
_LET_PIPE_FILL_SECONDS = 0.0001


def _fileno(pipe: asyncio.BaseTransport) -> int:
    return int(pipe.get_extra_info("pipe").fileno())


def _nothing() -> None:
    return None
