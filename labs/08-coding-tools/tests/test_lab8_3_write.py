"""Lab 8.3 — write replaces a whole file atomically, one mutation per file at a time."""

from __future__ import annotations

import asyncio
import functools
import os
import stat
from pathlib import Path

import pytest

from lab_helpers import call, call_now, raise_task_failures, run, snapshot, text_of
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


# ---------------------------------------------------------------- the queue itself


async def gated(log: list[str], name: str, gate: asyncio.Event) -> str:
    log.append(f"{name} start")
    await gate.wait()
    log.append(f"{name} end")
    return name


def test_the_same_key_runs_strictly_in_order() -> None:
    async def scenario() -> list[str]:
        queue = MutationQueue()
        log: list[str] = []
        gates = [asyncio.Event() for _ in range(3)]
        tasks = [
            asyncio.create_task(queue.run("k", functools.partial(gated, log, f"op{i}", gates[i])))
            for i in range(3)
        ]
        await asyncio.sleep(0)  # every task has reached the queue
        raise_task_failures(*tasks)
        assert log == ["op0 start"], (
            "while op0 runs, later operations on the same key must wait, got " + repr(log)
        )
        gates[2].set()  # opening a later gate first must not let op2 overtake
        gates[1].set()
        await asyncio.sleep(0)
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
def test_overwriting_keeps_the_permission_bits(workspace: Path) -> None:
    target = workspace / "script.sh"
    target.write_text("echo old\n")
    target.chmod(0o751)
    call_now(create_coding_tools(workspace), "write", path="script.sh", content="echo new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o751, (
        "replacing a file must keep its permission bits (an executable must stay executable)"
    )


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
