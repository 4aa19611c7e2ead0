"""Lab 8.3 — write replaces a whole file atomically, one mutation per file at a time."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lab_helpers import (
    call,
    call_now,
    fifo_target,
    raise_task_failures,
    run,
    snapshot,
    text_of,
)
from picourse.coding_tools import (
    DEFAULT_MUTATION_QUEUE,
    MutationQueue,
    WriteDetails,
    create_coding_tools,
)
from queue_probe import QueueProbe, hold_lane

pytestmark = pytest.mark.lab8_3


def only_expected_files(directory: Path, expected: set[str]) -> None:
    present = {p.name for p in directory.iterdir()}
    leftovers = present - expected
    assert not leftovers, f"no temp file may be left behind, found {sorted(leftovers)}"


# ---------------------------------------------------------------- the write tool


def test_write_creates_parents_and_reports_utf8_bytes(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "write", path="a/b/c.txt", content="héllo\n")
    target = workspace / "a" / "b" / "c.txt"
    assert not out.is_error, f"writing a new file must succeed, got: {text_of(out)}"
    assert target.read_text() == "héllo\n", "write must create missing parent directories"
    assert out.details == WriteDetails(str(target), 7), (
        "details.bytes counts UTF-8 bytes ('é' is 2), details.path is the joined path"
    )
    only_expected_files(target.parent, {"c.txt"})


def test_write_replaces_the_whole_file(workspace: Path) -> None:
    target = workspace / "f.txt"
    target.write_text("a much longer old content\n" * 10)
    call_now(create_coding_tools(workspace), "write", path="f.txt", content="short\n")
    assert target.read_text() == "short\n", "no byte of the old content may remain"
    only_expected_files(workspace, {"f.txt"})


def test_write_goes_through_a_temp_file_and_a_rename(workspace: Path) -> None:
    # A hard link is a second name for the same inode. Writing in place changes what both
    # names show; a temp file renamed over the target leaves the witness with the old bytes.
    target = workspace / "f.txt"
    target.write_text("old\n")
    os.link(target, workspace / "witness.txt")
    call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    assert target.read_text() == "new\n"
    assert (workspace / "witness.txt").read_text() == "old\n", (
        "the file was written in place: write a temp file in the same directory and rename it"
    )
    only_expected_files(workspace, {"f.txt", "witness.txt"})


def test_a_directory_target_fails_cleanly(workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "d" / "keep.txt").write_text("keep\n")
    before = snapshot(workspace)
    out = call_now(create_coding_tools(workspace), "write", path="d", content="x")
    assert out.is_error and "directory" in text_of(out), (
        "writing to a directory must be an error result that says so"
    )
    assert snapshot(workspace) == before, "a failed write must change nothing, temp files included"


def test_a_parent_that_is_a_file_fails_cleanly(workspace: Path) -> None:
    (workspace / "plain").write_text("x\n")
    before = snapshot(workspace)
    out = call_now(create_coding_tools(workspace), "write", path="plain/child.txt", content="x")
    assert out.is_error, "a path below a regular file cannot be written: error result"
    assert snapshot(workspace) == before


def test_a_failing_rename_leaves_the_old_file_and_no_temp(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workspace / "f.txt"
    target.write_text("old\n")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    monkeypatch.setattr(os, "rename", broken)
    out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    assert out.is_error, "an OSError while writing must become an error result"
    assert target.read_text() == "old\n", "a failed write must leave the old content"
    only_expected_files(workspace, {"f.txt"})


def test_write_refuses_to_leave_the_workspace_and_creates_nothing_outside(
    workspace: Path, outside: Path
) -> None:
    os.symlink(outside, workspace / "docs")
    before = snapshot(outside)
    registry = create_coding_tools(workspace)
    for path in (
        "../outside/secret.txt",
        "docs/secret.txt",
        "docs/new/created.txt",
        str(outside / "x.txt"),
    ):
        out = call_now(registry, "write", path=path, content="pwned\n")
        assert out.is_error and "escapes the workspace" in text_of(out), (
            f"write must use the workspace resolver and refuse {path!r}"
        )
    assert snapshot(outside) == before, "nothing outside the workspace may be changed or created"


# ---------------------------------------------------------------- durable and faithful


@dataclass
class RenameSpy:
    """Records what is fsynced and renamed, to prove the order of a durable replace."""

    synced: set[int] = field(default_factory=set)  # inodes fsynced so far
    renames: list[tuple[str, str, bool]] = field(default_factory=list)  # src, dst, synced?

    def install(self, monkeypatch: pytest.MonkeyPatch) -> RenameSpy:
        for name in ("fsync", "fdatasync"):
            if hasattr(os, name):
                monkeypatch.setattr(os, name, self._sync(getattr(os, name)))
        for name in ("replace", "rename"):
            monkeypatch.setattr(os, name, self._rename(getattr(os, name)))
        return self

    def _sync(self, real: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            self.synced.add(os.fstat(fd).st_ino)
            real(fd)

        return sync

    def _rename(self, real: Callable[..., None]) -> Callable[..., None]:
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            inode = os.stat(src, follow_symlinks=False).st_ino
            self.renames.append((os.fspath(src), os.fspath(dst), inode in self.synced))
            real(src, dst, *args, **kwargs)

        return rename


def test_the_temp_file_is_fsynced_then_renamed_in_the_same_directory(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The system temp directory is often another filesystem (a tmpfs), where a rename to
    # the workspace fails with EXDEV; point it somewhere else to make the mistake visible.
    elsewhere = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else tmp_path / "elsewhere"
    elsewhere = Path(tempfile.mkdtemp(dir=elsewhere if elsewhere.is_dir() else tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    spy = RenameSpy().install(monkeypatch)
    try:
        out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    assert not out.is_error, text_of(out)
    assert (workspace / "f.txt").read_text() == "new\n"
    assert spy.renames, "write must rename a temp file over the target (os.replace)"
    src, dst, synced = spy.renames[-1]
    assert os.path.dirname(src) == os.path.dirname(dst), (
        "invariant: the temp file lies in the target's own directory (a rename is atomic "
        f"only within one filesystem); it was {src}"
    )
    assert synced, (
        "invariant: the temp file's data reaches the disk before the rename: flush, then "
        "os.fsync the temp file, then os.replace; otherwise a crash can leave an empty file"
    )
    only_expected_files(workspace, {"f.txt"})


def test_every_write_uses_a_fresh_temp_name(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = RenameSpy().install(monkeypatch)
    registry = create_coding_tools(workspace)
    for content in ("one\n", "two\n", "three\n"):
        call_now(registry, "write", path="f.txt", content=content)
    names = [os.path.basename(src) for src, _, _ in spy.renames]
    assert len(names) == 3 and len(set(names)) == 3, (
        "invariant: two writers (threads or processes) never share a temp file: give each "
        f"temp file a new random name and create it with O_EXCL; got {names}"
    )


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_a_new_file_gets_the_usual_mode(workspace: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        call_now(create_coding_tools(workspace), "write", path="new.txt", content="x\n")
    finally:
        os.umask(previous)
    mode = stat.S_IMODE((workspace / "new.txt").stat().st_mode)
    assert mode == 0o666 & ~umask, (
        f"invariant: a new file gets 0o666 & ~umask, as the shell's > gives it; with umask "
        f"{umask:03o} expected {0o666 & ~umask:o}, got {mode:o}. Create the temp file with "
        "os.open(temp, O_WRONLY | O_CREAT | O_EXCL, 0o666), not tempfile.mkstemp (0o600)"
    )


def test_overwriting_keeps_the_permission_bits(workspace: Path) -> None:
    target = workspace / "script.sh"
    target.write_text("echo old\n")
    target.chmod(0o751)
    call_now(create_coding_tools(workspace), "write", path="script.sh", content="echo new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o751, (
        "invariant: replacing a file keeps its permission bits (an executable must stay "
        "executable): give the temp file the old file's mode before the rename"
    )


@pytest.mark.parametrize("link", [None, "link"], ids=["fifo", "symlink-to-fifo"])
def test_only_a_regular_file_is_replaced(workspace: Path, link: str | None) -> None:
    fifo, name = fifo_target(workspace, link)
    out = call_now(create_coding_tools(workspace), "write", path=name, content="x\n")
    assert out.is_error and "regular file" in text_of(out), (
        "invariant: write replaces only a regular file; a FIFO (or a device, a socket) is an "
        "error result that says 'regular file'. os.stat the target before writing"
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO must still be there, unchanged"
    only_expected_files(workspace, {"pipe", name})


# ---------------------------------------------------------------- the queue itself


async def gated(
    log: list[str], name: str, gate: asyncio.Event, started: asyncio.Event | None = None
) -> str:
    log.append(f"{name} start")
    if started is not None:
        started.set()
    await gate.wait()
    log.append(f"{name} end")
    return name


async def settle() -> None:
    """Let every task that is ready run (no threads involved): a few loop iterations."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_the_same_key_runs_strictly_in_order() -> None:
    async def scenario() -> list[str]:
        queue = MutationQueue()
        log: list[str] = []
        gates = [asyncio.Event() for _ in range(3)]
        started = asyncio.Event()
        tasks = [
            asyncio.create_task(
                queue.run("k", functools.partial(gated, log, f"op{i}", gates[i], started))
            )
            for i in range(3)
        ]
        await wait_or_fail(started, tasks, "MutationQueue.run never started op0 on a free key")
        await settle()
        raise_task_failures(*tasks)
        assert log == ["op0 start"], (
            "while op0 runs, later operations on the same key must wait, got " + repr(log)
        )
        gates[2].set()  # opening a later gate first must not let op2 overtake
        gates[1].set()
        await settle()
        assert log == ["op0 start"], "op1 and op2 must wait for op0 even when their gates are open"
        gates[0].set()
        assert await asyncio.gather(*tasks) == ["op0", "op1", "op2"], "run returns the result"
        return log

    assert run(scenario()) == [
        "op0 start",
        "op0 end",
        "op1 start",
        "op1 end",
        "op2 start",
        "op2 end",
    ], "operations on one key must run one after another, in the order they were queued"


async def wait_or_fail(event: asyncio.Event, tasks: list[asyncio.Task[Any]], message: str) -> None:
    waiting = asyncio.create_task(event.wait())
    await asyncio.wait({waiting, *tasks}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    raise_task_failures(*tasks)
    assert event.is_set(), message


def test_an_operation_queued_later_waits_for_the_one_running_now() -> None:
    async def scenario() -> list[str]:
        queue = MutationQueue()
        log: list[str] = []
        gates = [asyncio.Event() for _ in range(3)]
        started = [asyncio.Event() for _ in range(3)]
        first = asyncio.create_task(queue.run("k", lambda: gated(log, "op0", gates[0], started[0])))
        second = asyncio.create_task(
            queue.run("k", lambda: gated(log, "op1", gates[1], started[1]))
        )
        await wait_or_fail(started[0], [first, second], "op0 never started on a free key")
        gates[0].set()  # op0 ends and hands over to op1
        await wait_or_fail(started[1], [first, second], "op1 never started after op0 ended")
        third = asyncio.create_task(queue.run("k", lambda: gated(log, "op2", gates[2], started[2])))
        gates[2].set()
        await settle()
        raise_task_failures(first, second, third)
        assert "op2 start" not in log, (
            "invariant: an operation queued while another runs waits for it, also after "
            "earlier ones finished. When an operation ends, forget the key's tail only if it "
            f"is still this operation's own (a later one may have replaced it). Got {log!r}"
        )
        gates[1].set()
        await asyncio.gather(first, second, third)
        return log

    assert run(scenario()) == [
        "op0 start",
        "op0 end",
        "op1 start",
        "op1 end",
        "op2 start",
        "op2 end",
    ]


def test_a_caller_cancelled_in_the_queue_does_not_let_the_next_one_overtake() -> None:
    async def scenario() -> list[str]:
        queue = MutationQueue()
        log: list[str] = []
        gate, started, never = asyncio.Event(), asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(queue.run("k", lambda: gated(log, "op0", gate, started)))
        await wait_or_fail(started, [first], "MutationQueue.run never started op0 on a free key")
        waiting = asyncio.create_task(queue.run("k", lambda: gated(log, "op1", never)))
        last = asyncio.create_task(queue.run("k", lambda: gated(log, "op2", gate)))
        await settle()
        waiting.cancel()  # op1 gives up while op0 still runs
        await settle()
        raise_task_failures(first, last)
        assert log == ["op0 start"], (
            "invariant: a caller cancelled while it waits must not open the lane for the "
            "next one while the operation ahead still runs; hand over only when that one "
            f"is done. Got {log!r}"
        )
        gate.set()
        await asyncio.gather(first, last)
        assert waiting.cancelled(), "the cancelled caller must see CancelledError"
        return log

    assert run(scenario()) == ["op0 start", "op0 end", "op2 start", "op2 end"], (
        "the cancelled operation must never run; the others run in order"
    )


def test_a_cancelled_caller_keeps_the_lane_until_its_thread_ends() -> None:
    entered, release = threading.Event(), threading.Event()
    log: list[str] = []

    def slow_write() -> None:
        entered.set()
        release.wait(10)
        log.append("op0 thread end")

    async def next_operation() -> None:
        log.append("op1 start")

    async def scenario() -> None:
        queue = MutationQueue()
        first = asyncio.create_task(queue.run("k", lambda: asyncio.to_thread(slow_write)))
        try:
            thread_started = asyncio.create_task(asyncio.to_thread(entered.wait, 5))
            await asyncio.wait({first, thread_started}, return_when=asyncio.FIRST_COMPLETED)
            raise_task_failures(first)
            assert await thread_started, "op0's thread never started"
            second = asyncio.create_task(queue.run("k", next_operation))
            await settle()
            first.cancel()  # the caller gives up while the worker thread still writes
            with contextlib.suppress(asyncio.CancelledError):
                await first
            await settle()
            assert log == [], (
                "invariant: the lane belongs to an operation until it really ends. A worker "
                "thread cannot be cancelled: when the caller is cancelled, keep the operation "
                "running (asyncio.shield) and hand over only once it is done. Got "
                f"{log!r} while op0's thread was still running"
            )
        finally:
            entered.set()  # also ends the waiting thread when op0 never started
            release.set()
        await second
        assert log == ["op0 thread end", "op1 start"]

    run(scenario())


def test_different_keys_run_concurrently() -> None:
    async def scenario() -> None:
        queue = MutationQueue()
        log: list[str] = []
        held = asyncio.Event()  # never opened until b is done
        a = asyncio.create_task(queue.run("a", lambda: gated(log, "a", held)))
        await asyncio.sleep(0)
        raise_task_failures(a)
        try:
            assert await asyncio.wait_for(queue.run("b", lambda: _done(log)), timeout=5) == "b"
        except TimeoutError:
            raise AssertionError("an operation on key 'b' must not wait for key 'a'") from None
        assert log == ["a start", "b ran"], "b must run while a is still running"
        held.set()
        await a

    run(scenario())


async def _done(log: list[str]) -> str:
    log.append("b ran")
    return "b"


def test_a_failed_operation_releases_the_next_one() -> None:
    async def scenario() -> None:
        queue = MutationQueue()
        gate = asyncio.Event()

        async def failing() -> None:
            await gate.wait()
            raise OSError("disk full")

        first = asyncio.create_task(queue.run("k", failing))
        second = asyncio.create_task(queue.run("k", lambda: _done([])))
        await asyncio.sleep(0)
        raise_task_failures(first, second)
        gate.set()
        with pytest.raises(OSError, match="disk full"):
            await first  # the failure reaches the caller of run
        try:
            assert await asyncio.wait_for(second, timeout=5) == "b"
        except TimeoutError:
            raise AssertionError("a failed operation must still release the next one") from None

    run(scenario())


# ---------------------------------------------------------------- tools and the one queue


def test_write_uses_the_default_queue_keyed_by_the_canonical_path(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    (workspace / "real").mkdir()
    os.symlink(workspace / "real", workspace / "alias")
    call_now(create_coding_tools(workspace), "write", path="alias/f.txt", content="x")
    call_now(create_coding_tools(workspace), "write", path="real/f.txt", content="y")
    assert len(probe.calls) == 2, "every write must run inside MutationQueue.run"
    queues = {id(queue) for queue, _ in probe.calls}
    assert queues == {id(DEFAULT_MUTATION_QUEUE)}, (
        "all registries must share DEFAULT_MUTATION_QUEUE, not a queue per call or per registry"
    )
    keys = {key for _, key in probe.calls}
    assert keys == {os.path.realpath(workspace / "real" / "f.txt")}, (
        "the key must be the canonical path (symlinks resolved): two names, one lane"
    )


def test_a_failing_write_still_runs_inside_the_queue(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    (workspace / "d").mkdir()
    out = call_now(create_coding_tools(workspace), "write", path="d", content="x")
    assert out.is_error
    assert probe.started, "a write that passed path resolution must run inside the queue"


def test_write_waits_for_an_operation_holding_its_lane(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    target = workspace / "f.txt"
    target.write_text("old\n")

    async def scenario() -> None:
        gate = asyncio.Event()
        seen_by_holder: list[str] = []

        async def holder() -> None:
            await gate.wait()
            seen_by_holder.append(target.read_text())

        key = os.path.realpath(target)
        holding = await hold_lane(DEFAULT_MUTATION_QUEUE, key, holder)
        entered = probe.arm()
        writing = asyncio.create_task(
            call(create_coding_tools(workspace), "write", {"path": "f.txt", "content": "new\n"})
        )
        await asyncio.wait_for(entered.wait(), timeout=5)
        assert key not in probe.started, (
            "the write started while another operation held its file's lane"
        )
        gate.set()
        await holding
        await writing
        assert seen_by_holder == ["old\n"], "the write must not land before the lane is free"
        assert target.read_text() == "new\n"

    run(scenario())


@pytest.mark.challenge
def test_two_names_of_one_file_share_one_lane(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    target = workspace / "f.txt"
    target.write_text("old\n")
    os.symlink(target, workspace / "link.txt")

    async def scenario() -> None:
        gate = asyncio.Event()
        key = os.path.realpath(target)
        holding = await hold_lane(DEFAULT_MUTATION_QUEUE, key, gate.wait)
        entered = probe.arm()
        through_link = asyncio.create_task(
            call(
                create_coding_tools(workspace), "write", {"path": "link.txt", "content": "second\n"}
            )
        )
        await asyncio.wait_for(entered.wait(), timeout=5)
        assert not probe.started, "a write through a symlink must wait in its target's lane"
        gate.set()
        await holding
        await through_link
        assert target.read_text() == "second\n", "writing through a symlink changes its target"
        assert os.path.islink(workspace / "link.txt"), "the symlink itself must stay a symlink"

    run(scenario())


@pytest.mark.challenge
def test_a_name_of_255_bytes_can_be_written(workspace: Path) -> None:
    name = "é" * 125 + ".txt"  # 254 bytes, near the usual NAME_MAX of 255
    assert len(name.encode()) <= 255
    out = call_now(create_coding_tools(workspace), "write", path=name, content="x\n")
    assert not out.is_error, (
        f"a legal file name must be writable; keep the temp name short: {text_of(out)}"
    )
    only_expected_files(workspace, {name})


@pytest.mark.challenge
def test_a_failed_write_removes_the_directories_it_created(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "kept").mkdir()

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    monkeypatch.setattr(os, "rename", broken)
    out = call_now(
        create_coding_tools(workspace), "write", path="kept/new/deeper/f.txt", content="x"
    )
    assert out.is_error
    assert snapshot(workspace) == {"kept": "<dir>"}, (
        "a failed write leaves no trace: remove the directories it created (and only those)"
    )


@pytest.mark.challenge
def test_a_read_only_file_is_refused(workspace: Path) -> None:
    target = workspace / "locked.txt"
    target.write_text("keep\n")
    target.chmod(0o444)
    out = call_now(create_coding_tools(workspace), "write", path="locked.txt", content="x\n")
    assert out.is_error and "read-only" in text_of(out), (
        "a file without write permission is refused with 'read-only', as the shell's > "
        "refuses it (a rename would replace it silently)"
    )
    assert target.read_text() == "keep\n"
    only_expected_files(workspace, {"locked.txt"})
