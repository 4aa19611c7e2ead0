"""Fault scenarios of the reference read and of path resolution.

``test_read_faults.py`` copies this file into a solved practice directory and runs it
there, so ``picourse`` below is the reference solution and the lab tests' fixtures and
helpers are at hand. Each scenario ends in one clear result within its bound; a call
that would hang is released (a FIFO writer appears) so that no thread stays stuck.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# The lab tests' helpers, beside this file once it is copied into a practice directory.
from lab_helpers import (  # type: ignore[import-not-found]
    call,
    end_or_release,
    play_fifo_writer,
    run,
    text_of,
)
from picourse.abort import AbortController
from picourse.coding_tools import CodingToolOptions, PathError, create_coding_tools
from picourse.coding_tools.paths import resolve_path
from picourse.tool import ToolOutput, ToolRegistry

MiB = 1 << 20


def tools(workspace: Path, containment: str = "unrestricted") -> ToolRegistry:
    return create_coding_tools(workspace, containment)  # type: ignore[arg-type]


async def read_within(
    registry: ToolRegistry, arguments: dict[str, Any], seconds: float, release: Any = None
) -> ToolOutput:
    task = asyncio.ensure_future(call(registry, "read", arguments))
    out: ToolOutput = await end_or_release(
        task,
        release or (lambda: None),
        within=seconds,
        failure=f"read {arguments!r} did not end within {seconds}s",
    )
    return out


def refused_as_special(out: ToolOutput) -> None:
    assert out.is_error and "not a regular file" in text_of(out), text_of(out)


# --- FIFOs and devices: one clear error within a second ------------------------------


def test_a_fifo_without_a_writer_is_refused_within_a_second(workspace: Path) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    release = lambda: play_fifo_writer(fifo)  # noqa: E731
    out = run(read_within(tools(workspace), {"path": "pipe"}, 1.0, release))
    refused_as_special(out)


@pytest.fixture
def fed_fifo(workspace: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A FIFO that `yes` is writing into (proven: its data is readable)."""
    fifo = workspace / "fed"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    feeder = subprocess.Popen(["sh", "-c", 'exec yes > "$0"', str(fifo)])
    try:
        readable, _, _ = select.select([reader], [], [], 10)
        assert readable, "yes never started writing into the FIFO"
        yield fifo, feeder
    finally:
        feeder.kill()
        feeder.wait()
        os.close(reader)


def test_a_fifo_fed_by_yes_is_refused_within_a_second(
    fed_fifo: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    fifo, feeder = fed_fifo
    # A read that keeps reading ends when the feeder does.
    out = run(read_within(tools(fifo.parent), {"path": fifo.name}, 1.0, feeder.kill))
    refused_as_special(out)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_refused_within_a_second(workspace: Path, device: str) -> None:
    refused_as_special(run(read_within(tools(workspace), {"path": device}, 1.0)))


# --- A 20 GiB sparse file: abort and cancellation stop the scan ----------------------


@pytest.fixture
def sparse(workspace: Path) -> Path:
    path = workspace / "sparse.log"
    with open(path, "wb") as file:
        file.write(b"line of text\n" * 1000)
        file.truncate(20 << 30)
    return path


@pytest.fixture
def scanning(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once the worker has read a few whole chunks: the scan is under way."""
    started = threading.Event()
    chunks = 0
    real_read = os.read

    def spy(fd: int, size: int) -> bytes:
        nonlocal chunks
        data = real_read(fd, size)
        if size >= MiB:
            chunks += 1
            if chunks >= 3:
                started.set()
        return data

    monkeypatch.setattr(os, "read", spy)
    return started


async def worker_has_stopped() -> None:
    """Joins the worker threads: this only returns once no scan is running any more."""
    await asyncio.wait_for(asyncio.get_running_loop().shutdown_default_executor(), 2)


def test_an_abort_mid_scan_ends_the_read_and_its_worker(
    sparse: Path, scanning: threading.Event
) -> None:
    async def scenario() -> ToolOutput:
        controller = AbortController()
        task = asyncio.ensure_future(
            call(tools(sparse.parent), "read", {"path": sparse.name}, signal=controller.signal)
        )
        assert await asyncio.to_thread(scanning.wait, 10), "the scan never started"
        controller.abort()
        out: ToolOutput = await asyncio.wait_for(task, 1)
        await worker_has_stopped()
        return out

    out = run(scenario())
    assert out.is_error and "aborted" in text_of(out), text_of(out)


def test_a_cancelled_read_stops_its_worker(sparse: Path, scanning: threading.Event) -> None:
    async def scenario() -> None:
        task = asyncio.ensure_future(call(tools(sparse.parent), "read", {"path": sparse.name}))
        assert await asyncio.to_thread(scanning.wait, 10), "the scan never started"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await worker_has_stopped()

    run(scenario())


def test_a_read_aborted_before_it_starts_reads_nothing(
    sparse: Path, scanning: threading.Event
) -> None:
    controller = AbortController()
    controller.abort()
    out = run(call(tools(sparse.parent), "read", {"path": sparse.name}, signal=controller.signal))
    assert out.is_error and "aborted" in text_of(out)
    assert not scanning.is_set()


# --- The line index: trusted only when the file is provably unchanged ----------------


def write_log(path: Path, lines: int = 60_000) -> None:  # ~4 MB: several chunks, so indexed
    path.write_text("".join(f"{n:07d} {'a' * 60}\n" for n in range(lines)))


def rewrite_in_place(path: Path, step: int) -> list[str]:
    """Same size, same inode, other line breaks; returns the new lines."""
    data = bytearray(path.read_bytes())
    for at in range(100, len(data) // 2, step):
        data[at] = ord("\n")
    with open(path, "r+b") as file:
        file.write(data)
    return bytes(data).decode().split("\n")[:-1]


def last_window_is_true(registry: ToolRegistry, lines: list[str]) -> None:
    out = run(call(registry, "read", {"path": "log.txt", "offset": len(lines) - 5}))
    assert not out.is_error, f"a stale line index made the read fail: {text_of(out)}"
    assert out.details.lines == len(lines), "a stale line index gave a wrong total"
    assert text_of(out).split("\n")[0] == f"{len(lines) - 5:>4}│ {lines[-6]}"


@pytest.fixture
def coarse_clock(monkeypatch: pytest.MonkeyPatch) -> int:
    """A filesystem with 1-second timestamps that did not tick between two writes:
    stat and fstat show the same whole-second mtime and ctime, the clock is half a second
    on."""
    stamp = (time.time_ns() // 10**9 + 1) * 10**9
    real_fstat, real_stat = os.fstat, os.stat

    def coarse(status: os.stat_result) -> os.stat_result:
        fields = list(status[:10])
        fields[8] = fields[9] = stamp // 10**9
        extra = {"st_mtime_ns": stamp, "st_ctime_ns": stamp, "st_atime_ns": status.st_atime_ns}
        return os.stat_result(fields, extra)

    monkeypatch.setattr(os, "fstat", lambda fd: coarse(real_fstat(fd)))
    monkeypatch.setattr(os, "stat", lambda *args, **kwargs: coarse(real_stat(*args, **kwargs)))
    monkeypatch.setattr(time, "time_ns", lambda: stamp + 500_000_000)
    return stamp


def test_a_same_size_rewrite_within_one_timestamp_tick_is_seen(
    workspace: Path, coarse_clock: int
) -> None:
    write_log(workspace / "log.txt")
    registry = tools(workspace)
    last_window_is_true(registry, (workspace / "log.txt").read_text().split("\n")[:-1])
    last_window_is_true(registry, rewrite_in_place(workspace / "log.txt", 997))


def test_a_settled_file_is_paged_through_its_index_exactly(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The clock ten seconds on: the file is settled, so its index is kept and used.
    real_time_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + 10 * 10**9)
    lines = [f"{n:06d} " + "b" * (n % 97) for n in range(60_000)]  # ~3.3 MB: 4 chunks
    (workspace / "log.txt").write_text("\n".join(lines) + "\n")
    registry = tools(workspace)
    first = run(call(registry, "read", {"path": "log.txt", "limit": 3}))
    assert first.details.lines == len(lines)
    offsets = [1, 2, 17_000, 18_000, 29_999, 30_000, 45_000, 59_998, 1]
    for offset in offsets:  # from the index now: every window must still be exact
        out = run(call(registry, "read", {"path": "log.txt", "offset": offset, "limit": 3}))
        expected = [f"{n:>4}│ {lines[n - 1]}" for n in range(offset, min(offset + 3, 60_001))]
        assert text_of(out).split("\n\n[")[0] == "\n".join(expected), f"offset={offset}"
        assert (out.details.lines, out.details.bytes) == (len(lines), first.details.bytes)


@pytest.mark.parametrize("clock", ["real", "coarse"])
def test_write_read_edit_edit_never_sees_a_stale_index(
    workspace: Path, request: pytest.FixtureRequest, clock: str
) -> None:
    # Each edit renames a new file over the old one: the freed inode is often reused by
    # the next, with the same size, so identity alone would match a stale index.
    if clock == "coarse":
        request.getfixturevalue("coarse_clock")
    registry = tools(workspace)
    path = workspace / "log.txt"
    for round_ in range(10):
        content = "".join(f"{n:07d} {'a' * 60}\n" for n in range(20_000))  # 1.4 MB, 2 chunks
        assert not run(call(registry, "write", {"path": "log.txt", "content": content})).is_error
        last_window_is_true(registry, path.read_text().split("\n")[:-1])
        for edit in range(2):
            old = f"{(round_ * 7 + edit * 13) % 20_000:07d} aa"
            new = old[:-2] + "\na"
            out = run(call(registry, "edit", {"path": "log.txt", "old_text": old, "new_text": new}))
            assert not out.is_error, text_of(out)
            last_window_is_true(registry, path.read_text().split("\n")[:-1])


# --- No exception escapes: fuzzed arguments --------------------------------------------

ANY_CHARACTER = st.characters(blacklist_categories=())  # lone surrogates included
PATHS = st.one_of(
    st.text(ANY_CHARACTER, max_size=40),
    st.lists(st.sampled_from(["a", "/", ".", "..", "\0", "\udc80", "\ud800", "é", "loop"])).map(
        "".join
    ),
    st.integers(1, 5000).map(lambda n: "a/" * n + "f"),
    st.integers(1, 5000).map(lambda n: "loop/" * n),
    st.integers(1, 70_000).map(lambda n: "x" * n),
    st.sampled_from([".", "..", "/", "//", "~", "../" * 3000, "loop", "pipe", "\0", "\udcff"]),
)
LINES = st.one_of(st.none(), st.integers(1, 2**80))
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(autouse=True)
def remove_deep_trees(workspace: Path) -> Iterator[None]:
    """A fuzzed write may make a folder thousands of levels deep. pytest's own clean-up of
    old temporary folders (a recursive rmtree) fails on it, at the exit of every later
    pytest session of this user, with a RecursionError and exit status 1; rm does not."""
    yield
    subprocess.run(["rm", "-rf", str(workspace)], check=False)


def fuzz_workspace(workspace: Path) -> None:
    if not (workspace / "loop").is_symlink():
        os.symlink("loop", workspace / "loop")
        os.mkfifo(workspace / "pipe")
        (workspace / "a").mkdir()
        (workspace / "f.txt").write_text("one\ntwo\n")


@FUZZ
@given(path=PATHS, offset=LINES, limit=LINES, containment=st.sampled_from(["workspace", "x"]))
def test_read_returns_a_result_for_any_arguments(
    workspace: Path, path: str, offset: int | None, limit: int | None, containment: str
) -> None:
    fuzz_workspace(workspace)
    registry = tools(workspace, "workspace" if containment == "workspace" else "unrestricted")
    arguments: dict[str, Any] = {"path": path}
    arguments.update({k: v for k, v in (("offset", offset), ("limit", limit)) if v})
    release = lambda: play_fifo_writer(workspace / "pipe")  # noqa: E731
    assert isinstance(run(read_within(registry, arguments, 5, release)), ToolOutput)


@FUZZ
@given(path=PATHS)
def test_every_path_resolves_or_is_a_path_error(workspace: Path, path: str) -> None:
    fuzz_workspace(workspace)
    for containment in ("workspace", "unrestricted"):
        options = CodingToolOptions(str(workspace), containment)
        try:
            resolved = resolve_path(options, path)
        except PathError as error:
            assert str(error), "a PathError must say what to do"
        else:
            assert os.path.isabs(resolved)
            resolved.encode("utf-8")  # the results quote it, and count it in UTF-8 bytes


@settings(FUZZ, max_examples=50)
@given(path=PATHS)
def test_write_and_edit_return_a_result_for_any_path(workspace: Path, path: str) -> None:
    fuzz_workspace(workspace)
    registry = tools(workspace, "workspace")  # never write outside the test's directory
    for name, arguments in (
        ("write", {"path": path, "content": "x"}),
        ("edit", {"path": path, "old_text": "one", "new_text": "1"}),
    ):
        out = run(call(registry, name, arguments))
        assert isinstance(out, ToolOutput), f"{name} returned {out!r}"
