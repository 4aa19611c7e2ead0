"""Helpers the Lab 8 tests share. Keep this file as it is: grading uses its own copy."""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from picourse.abort import AbortSignal
from picourse.tool import ToolContext, ToolOutput, ToolRegistry

T = TypeVar("T")


# Well below pytest-timeout (60 s, in pyproject.toml): a hang fails with a message that
# names its likely cause, and the run goes on with the next test.
DEADLINE_SECONDS = 15.0
# Begins every failure that a bound on wall-clock time decided. A machine too busy to run
# the test can cause one: the grader grades a run again alone when one came while the CPUs
# were contended.
OVER_TIME_LIMIT = "Over a time limit (run it again if the machine was busy): "
_CANCEL_GRACE_SECONDS = 2.0
LIKELY_HANG = {
    "bash": (
        "bash: the call waits for the pipes to close, and a background child of the command "
        "holds them open (asyncio's Process.wait() and communicate() wait for the pipes too). "
        "Wait for the shell's own exit (SubprocessProtocol.process_exited), then end the "
        "process group and stop reading after a short drain."
    ),
}
_GENERIC_HANG = (
    "something waits forever: a lock, queue lane or future that is never released or "
    "resolved, or a blocking call on the event loop"
)
# A call that blocks the event loop itself (open() of a FIFO or a read on the loop's thread)
# stops every deadline that the loop would run: a signal interrupts it this long after the
# loop's own deadline and clean-up have had their time.
_BLOCKED_LOOP_MARGIN_SECONDS = 3 * _CANCEL_GRACE_SECONDS + 1
_BLOCKED_LOOP = OVER_TIME_LIMIT + (
    "the call blocked the event loop itself for {:g} s, so no deadline could run: a "
    "blocking call (open, read, write, wait) made directly in async code instead of in a "
    "worker thread, such as opening a FIFO without O_NONBLOCK"
)
_tools_called: list[str] = []


class EventLoopBlocked(BaseException):
    """Raised into the event loop's thread by the watchdog. Not an Exception: a tool's own
    ``except Exception`` must not turn it into a result that passes."""


@contextlib.contextmanager
def _watchdog(seconds: float) -> Iterator[None]:
    """After ``seconds``, interrupt the main thread wherever it blocks (SIGUSR1 makes a
    blocking system call return, and the handler raises EventLoopBlocked there)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread
        return
    armed = True
    firing = threading.Lock()

    def interrupt(signum: int, frame: object) -> None:
        if armed:
            raise EventLoopBlocked(_BLOCKED_LOOP.format(seconds))

    done = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def watch() -> None:
        if not done.wait(seconds):
            with firing:
                if armed:
                    signal.pthread_kill(main, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        # Not threading.Thread: its start() waits for the new thread to say it runs, forever
        # when that thread fails first. Code under test that left the address space nearly
        # full (a MemoryError whose frames are still alive) made every later test wait there
        # until pytest-timeout.
        _thread.start_new_thread(watch, ())
    except (RuntimeError, MemoryError):  # no thread: the loop's own deadline still holds
        signal.signal(signal.SIGUSR1, previous)
        yield
        return
    try:
        yield
    finally:
        armed = False
        with firing:  # a signal already on its way has arrived and finds the watch disarmed
            done.set()
        signal.signal(signal.SIGUSR1, previous)


def run(coroutine: Coroutine[Any, Any, T], timeout: float = DEADLINE_SECONDS) -> T:
    """Run a coroutine with a deadline, so a hang fails with an explanation instead of
    freezing the suite. Code that ignores cancellation is abandoned, not waited for."""
    _tools_called.clear()
    with _watchdog(timeout + _BLOCKED_LOOP_MARGIN_SECONDS):
        return _run_with_deadline(coroutine, timeout)


def _run_with_deadline(coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_report_in_one_line)
    task = loop.create_task(coroutine)
    try:
        loop.run_until_complete(asyncio.wait({task}, timeout=timeout))
        if task.done():
            try:
                return task.result()
            finally:
                # A failed call's traceback holds this frame: without the task in it, no
                # cycle keeps the call's frames (and all they allocated) alive past the test.
                del task
        where = waiting_at(task)
        task.cancel()
        loop.run_until_complete(asyncio.wait({task}, timeout=_CANCEL_GRACE_SECONDS))
        causes = [LIKELY_HANG[name] for name in dict.fromkeys(_tools_called) if name in LIKELY_HANG]
        raise AssertionError(
            f"{OVER_TIME_LIMIT}the call did not finish within {timeout:g} s. Likely cause: "
            + (" ".join(causes) or _GENERIC_HANG)
            + f" It was waiting at {where}."
        )
    finally:
        _close(loop)


def _report_in_one_line(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Report an error nobody awaited (a task a failed test left behind) in one line. The
    default handler formats a traceback when the garbage collector frees the task, which
    can be in the middle of pytest's own ast.parse; before Python 3.11.8 that nested parse
    ends the whole session with "SystemError: AST constructor recursion depth mismatch"
    (CPython gh-106905)."""
    with contextlib.suppress(Exception):  # an error here would be formatted the same way
        print(f"asyncio: {context.get('message')}: {context.get('exception')!r}", file=sys.stderr)


def waiting_at(task: asyncio.Task[Any]) -> str:
    """Where an unfinished task waits: its chain of awaits, outermost first
    (``test_x.py:40 in scenario -> bash.py:180 in run_bash -> tasks.py:418 in wait``)."""
    places = []
    awaited: Any = task.get_coro()
    while getattr(awaited, "cr_frame", None) is not None:
        frame, code = awaited.cr_frame, awaited.cr_code
        places.append(f"{Path(code.co_filename).name}:{frame.f_lineno} in {code.co_name}")
        awaited = awaited.cr_await
    return " -> ".join(places) or "an unknown place"


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left and close the loop, giving each step a bounded time: unlike
    asyncio.run, never wait forever for a task or a worker thread that does not stop."""
    try:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=_CANCEL_GRACE_SECONDS))
        loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), _CANCEL_GRACE_SECONDS))
    except (Exception, asyncio.CancelledError):  # noqa: BLE001 - the test's own outcome matters
        pass
    finally:
        loop.close()


async def call(
    tools: ToolRegistry, name: str, arguments: dict[str, Any], *, signal: AbortSignal | None = None
) -> ToolOutput:
    """Validate the arguments and call the tool's execute directly, so that a
    NotImplementedError from an unfinished stage shows as itself."""
    tool = tools.get(name)
    assert tool is not None, f"create_coding_tools must register a tool named {name!r}"
    _tools_called.append(name)
    params = tool.schema.validate(arguments)
    output = await tool.execute(params, ToolContext(f"call-{name}", signal, None))
    assert isinstance(output, ToolOutput), f"the {name} tool must return a ToolOutput"
    return output


_opens: list[tuple[str, int]] | None = None  # what watch_opens records, while it does
_audit_hook_added = False


def _record_open(event: str, args: tuple[Any, ...]) -> None:
    opens = _opens
    if event == "open" and opens is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        opens.append((os.fsdecode(args[0]), threading.get_ident()))


def watch_opens(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every file this process opens by name until the test ends, with the ident of the
    thread that opened it (``open()``, ``os.open`` and ``Path.open`` all raise the audit
    event ``open``). ``monkeypatch`` ends the watch with the test, and the grader runs a
    test that patches where the tools run."""
    global _audit_hook_added
    opens: list[tuple[str, int]] = []
    monkeypatch.setattr(sys.modules[__name__], "_opens", opens)
    if not _audit_hook_added:
        sys.addaudithook(_record_open)  # for good: it records nothing once the watch ends
        _audit_hook_added = True
    return opens


def opened_on_this_thread(opens: list[tuple[str, int]], folder: Path) -> list[str]:
    """The names in or below ``folder`` (itself included) that ``watch_opens`` saw opened
    on the calling thread, the event loop's in a test that ran the tool with ``run``."""
    root = os.path.realpath(folder)
    here = threading.get_ident()
    return [
        os.path.relpath(name, root)
        for name, thread in opens
        if thread == here and os.path.commonpath([os.path.realpath(name), root]) == root
    ]


_census_of: tuple[int, int] | None = None  # the file descriptors_on counts for, while it does


def descriptors_on(monkeypatch: pytest.MonkeyPatch, target: str | os.PathLike[str]) -> set[int]:
    """This process's descriptors that are open on ``target``'s file, matched by device and
    inode (so also one opened by another name or through a link). It looks inside the
    process the tools run in: taking ``monkeypatch`` is what makes the grader run such a
    test there."""
    want = os.stat(target)
    monkeypatch.setattr(sys.modules[__name__], "_census_of", (want.st_dev, want.st_ino))
    listing = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"  # macOS: /dev/fd
    found = set()
    for name in os.listdir(listing):
        with contextlib.suppress(OSError):  # the listing's own descriptor is closed by now
            status = os.fstat(int(name))
            if (status.st_dev, status.st_ino) == _census_of:
                found.add(int(name))
    return found


class AbortsOnceLookedAt(AbortSignal):
    """A signal that fires right after its first look (or its ``looks``-th): the person
    presses stop just after the tool has checked it once (before reading), while it reads
    or applies its batch. A look is reading ``aborted``, calling ``raise_if_aborted`` or
    adding a listener (which then hears the abort at once): a tool may watch the signal
    either way. The grader runs a test with a signal of its own where the tools run."""

    def __init__(self, looks: int = 1) -> None:
        super().__init__()
        self._looks_left = looks

    def _look(self) -> None:
        self._looks_left -= 1
        if self._looks_left == 0:
            self._abort("user pressed stop")

    @property
    def aborted(self) -> bool:
        was = super().aborted
        self._look()
        return was

    def raise_if_aborted(self) -> None:
        was = super().aborted
        self._look()
        if was:
            super().raise_if_aborted()

    def add_listener(self, callback: Callable[[], object]) -> Callable[[], None]:
        remove = super().add_listener(callback)
        self._look()
        return remove


def call_without_threads(
    monkeypatch: pytest.MonkeyPatch, tools: ToolRegistry, name: str, **arguments: Any
) -> ToolOutput:
    """Call a tool while no thread can be started, as at the user's process limit (``ulimit
    -u`` counts threads): ``threading`` raises ``RuntimeError: can't start new thread``.
    ``threads.in_thread`` then runs the blocking call right there; ``asyncio.to_thread``
    raises, after it has queued the call to run later."""

    def refuse(thread: threading.Thread, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")

    async def without_threads() -> ToolOutput:
        with monkeypatch.context() as patch:  # during the call only: the loop's own close
            patch.setattr(threading.Thread, "start", refuse)
            return await call(tools, name, arguments)

    try:
        return run(without_threads())
    except NotImplementedError:
        raise  # an unfinished stage shows as itself
    except RuntimeError as error:
        raise AssertionError(
            f"invariant: no exception escapes a tool. With no thread to be had (the user's "
            f"process limit counts threads), {name} raised {error!r}: run blocking work "
            "through threads.in_thread, which then runs it right there; asyncio.to_thread "
            "raises, and has already queued the call to run later, behind the tool's back"
        ) from None


def call_now(tools: ToolRegistry, name: str, **arguments: Any) -> ToolOutput:
    return run(call(tools, name, arguments))


def text_of(output: ToolOutput) -> str:
    return "".join(part.text for part in output.content)


def utf8_len(value: str) -> int:
    return len(value.encode("utf-8"))


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every entry below a directory with its content (or link target): proof of no change."""
    entries: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        key = str(path.relative_to(directory))
        if path.is_symlink():
            entries[key] = "-> " + os.readlink(path)
        elif path.is_file():
            entries[key] = path.read_bytes()
        else:
            entries[key] = "<dir>"
    return entries


async def wait_for_file(path: Path, call: asyncio.Task[Any], timeout: float = 10) -> str:
    """Synchronise with a child process: it writes this file when it reaches a known point.
    If the tool call ends first, its exception (or its early result) is the failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text().strip()
        if call.done():
            raise_task_failures(call)
            raise AssertionError(
                f"the call returned before its command wrote {path.name}: {call.result()!r}"
            )
        await asyncio.sleep(0.01)
    raise AssertionError(
        f"{OVER_TIME_LIMIT}the child process never wrote {path.name} within {timeout:g} s: "
        "the command did not start as expected. It writes that file in its working "
        "directory, which must be the workspace (cwd), and it runs under bash"
    )


def raise_task_failures(*tasks: asyncio.Task[Any]) -> None:
    """Surface an exception from a finished task (an unfinished stage's NotImplementedError)
    instead of letting a later assertion hide it."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def finished_within(awaitable: Awaitable[T], seconds: float, failure: str) -> T:
    """Await something that must end in time; if it does not, fail over a time limit with
    ``failure`` (what should have ended, and why it must)."""
    try:
        return await asyncio.wait_for(awaitable, timeout=seconds)
    except TimeoutError:
        raise AssertionError(OVER_TIME_LIMIT + failure) from None


# How end_or_release releases a call: this many times, this many seconds apart, at most.
_RELEASES, _RELEASE_PAUSE_SECONDS = 1000, 0.01


async def end_or_release(
    task: asyncio.Future[T], release: Callable[[], object], *, within: float, failure: str
) -> T:
    """Wait ``within`` seconds for a call. If it is still running, call ``release`` (which
    unblocks what the call waits on: a FIFO's writer, say) until it ends, then fail with
    ``failure`` (over a time limit): a hang becomes a failure that leaves no thread stuck
    behind. The release comes from a thread of its own: a call that blocks the event loop
    itself (a FIFO opened without O_NONBLOCK in async code) is released after ``within``
    seconds too, instead of waiting for the watchdog."""
    ended, released, stopped = threading.Event(), threading.Event(), threading.Event()

    def release_until_ended() -> None:
        try:
            if ended.wait(within):
                return
            released.set()
            for _ in range(_RELEASES):
                release()
                if ended.wait(_RELEASE_PAUSE_SECONDS):
                    return
        except BaseException:  # noqa: BLE001 - nothing of the helper's may escape its thread
            released.set()
        finally:
            stopped.set()

    try:
        _thread.start_new_thread(release_until_ended, ())  # see _watchdog: no start() wait
    except (RuntimeError, MemoryError):  # no thread: release from the loop, when it runs
        return await _release_from_the_loop(task, release, within, failure)
    try:
        done, _ = await asyncio.wait({task}, timeout=within)
        if done and not released.is_set():
            return task.result()
        await asyncio.wait({task}, timeout=_RELEASES * _RELEASE_PAUSE_SECONDS + 1)
    finally:
        ended.set()
        stopped.wait(5)  # no release after the call has ended: the test's clean-up follows
    raise AssertionError(OVER_TIME_LIMIT + failure)


async def _release_from_the_loop(
    task: asyncio.Future[T], release: Callable[[], object], within: float, failure: str
) -> T:
    done, _ = await asyncio.wait({task}, timeout=within)
    if done:
        return task.result()
    for _ in range(_RELEASES):
        release()
        done, _ = await asyncio.wait({task}, timeout=_RELEASE_PAUSE_SECONDS)
        if done:
            break
    raise AssertionError(OVER_TIME_LIMIT + failure)


def play_fifo_writer(fifo: Path) -> None:
    """Open and close a FIFO's writing end: a reader blocked in open or read returns."""
    with contextlib.suppress(OSError):  # ENXIO until the reader has opened its end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def socket_target(
    workspace: Path, link: str | None, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    """A Unix socket in the workspace (the file stays after the socket is closed), and the
    name to give a tool: the socket's own, or that of a symlink ``link`` to it."""
    monkeypatch.chdir(workspace)  # a relative name: a socket's path has a length limit
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("socket")
    if link is None:
        return workspace / "socket", "socket"
    os.symlink("socket", workspace / link)
    return workspace / "socket", link


def fifo_target(workspace: Path, link: str | None) -> tuple[Path, str]:
    """A FIFO in the workspace, and the name to give a tool: the FIFO's own, or that of a
    symlink ``link`` to it."""
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    if link is None:
        return fifo, "pipe"
    os.symlink("pipe", workspace / link)
    return fifo, link


def spy_on_listeners(signal: AbortSignal) -> Callable[[], int]:
    """Count the signal's listeners that were added and not removed since."""
    active: set[object] = set()
    add = signal.add_listener

    def add_and_track(callback: Callable[[], object]) -> Callable[[], None]:
        token = object()
        active.add(token)
        remove = add(callback)

        def remove_and_track() -> None:
            active.discard(token)
            remove()

        return remove_and_track

    signal.add_listener = add_and_track  # type: ignore[method-assign]
    return lambda: len(active)


def refers_to(fd: int, status: os.stat_result) -> bool:
    """Whether ``fd`` is open on the file or folder that ``status`` describes (a closed
    descriptor refers to nothing)."""
    try:
        info = os.fstat(fd)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == (status.st_dev, status.st_ino)


def track_descriptors(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Callable[[], list[str]]:
    """Watch every descriptor ``os.open`` returns for a name in or below ``folder``; the
    returned function names those still open on the same file. It patches the process the
    tools run in: the grader runs such a test there."""
    root = os.path.realpath(folder)
    opened: list[tuple[int, os.stat_result, str]] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        name = os.path.realpath(os.fsdecode(path))
        if os.path.commonpath([name, root]) == root:
            opened.append((fd, os.fstat(fd), name))
        return fd

    monkeypatch.setattr(os, "open", spy)

    def still_open() -> list[str]:
        return [os.path.relpath(name, root) for fd, status, name in opened if refers_to(fd, status)]

    return still_open


def resolving_fails_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make ``os.path.realpath`` (and so ``Path.resolve``) fail for a path whose last part is
    ``name`` from its second call on, as when another program swaps a symlink in the path
    for a file after the workspace check resolved it: lstat sees a link, readlink finds none
    (EINVAL). It patches the process the tools run in: the grader runs such a test there."""
    real = os.path.realpath
    calls = 0

    def swapped_meanwhile(path: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        if os.path.basename(os.fsdecode(path)) == name:
            calls += 1
            if calls > 1:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", swapped_meanwhile)


def assert_names_the_file_it_could_not_resolve(out: ToolOutput, name: str, workspace: Path) -> None:
    """A call whose path stopped resolving (``resolving_fails_for``) ended in an error
    result that names the file as the model gave it."""
    message = text_of(out)
    assert name in message and str(workspace) not in message, (
        "invariant: an OSError from resolving the path (os.path.realpath fails when another "
        "program swaps a symlink in it meanwhile: here after the workspace check, as "
        "canonical_key resolves it) is an error result like every other, and "
        f"it names the file as the model gave it ({name!r}). Got: {message!r}"
    )


def refuse_to_spawn(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every way of starting a process fail and record the attempt."""
    spawned: list[str] = []

    def refuse(name: str) -> Callable[..., Any]:
        def spawn(*args: Any, **kwargs: Any) -> Any:
            spawned.append(name)
            raise OSError(f"test: {name} called for a command that must not start")

        return spawn

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse("subprocess"))
    monkeypatch.setattr(os, "posix_spawn", refuse("os.posix_spawn"))
    monkeypatch.setattr(os, "fork", refuse("os.fork"))
    return spawned
