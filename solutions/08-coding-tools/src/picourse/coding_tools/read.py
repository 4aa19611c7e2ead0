"""Lab 8.1 (reference): read a bounded window of numbered lines, streaming.

The file is scanned once in fixed-size chunks: lines before the window are only counted,
lines of the window are kept (never more than ``max_read_bytes`` of them, even when a
single line is huge), and lines after it are only counted. Memory is bounded by the
window, not by the file.

Only regular files are read. The file is opened with ``O_NONBLOCK``, so opening a FIFO
never waits for a writer, and ``fstat`` on the open descriptor decides: a FIFO, a device
or a socket is refused before a byte is read (``/dev/zero`` would never end). On a regular
file ``O_NONBLOCK`` changes nothing; a kernel file that only looks regular (``/proc/kmsg``)
fails with "would wait" instead of blocking.

The scan runs in a worker thread and checks a stop flag between chunks. The abort signal
and the cancellation of the awaiting task both set it, so no thread keeps scanning after
the call has ended and the process can exit.

The contract's notice names the total number of lines, which takes one full scan. That
scan also records where each chunk starts and on which line, keyed by the file's identity
(device, inode, size, mtime, ctime); the next read of the unchanged file seeks to the
nearest checkpoint and stops after its window. Identity alone proves nothing: an inode
number is reused, and a change within one timestamp tick keeps size and times. So the
index follows git's racy-timestamp rule: it is kept only when the file was last changed at
least one timestamp granularity before the scan started; a later change then must show in
mtime or ctime. A file changed more recently is scanned afresh until it settles.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from picourse.abort import AbortSignal
from picourse.coding_tools.details import ReadDetails
from picourse.coding_tools.errors import PathError, describe_os_error
from picourse.coding_tools.files import file_stamp
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.threads import in_thread
from picourse.tool import ToolOutput

_CHUNK_BYTES = 1 << 20
_BINARY_SNIFF_BYTES = 8192
# Timestamp granularity for the racy rule: whole-second stamps mean a coarse filesystem
# (FAT keeps 2 s); otherwise the kernel's coarse clock ticks in milliseconds.
_COARSE_GRANULARITY_NS = 2_000_000_000
_FINE_GRANULARITY_NS = 100_000_000


async def read_file(
    options: CodingToolOptions,
    path: str,
    *,
    offset: int = 1,
    limit: int | None = None,
    signal: AbortSignal | None = None,
) -> ToolOutput:
    if signal is not None and signal.aborted:
        return ToolOutput.error(_aborted(path))
    try:
        absolute = resolve_path(options, path)
    except PathError as error:
        return ToolOutput.error(str(error))
    max_lines = min(limit, options.max_read_lines) if limit else options.max_read_lines
    stop = threading.Event()
    remove = signal.add_listener(stop.set) if signal is not None else None
    try:
        # Blocking file I/O runs in a worker thread so the event loop stays responsive.
        scan = await in_thread(_scan, absolute, offset, max_lines, options.max_read_bytes, stop)
    except BlockingIOError:
        return ToolOutput.error(
            f"Cannot read {path}: reading it would wait for data, so it is not an ordinary "
            "file. Inspect it with bash, for example `ls -l <path>`."
        )
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="read"))
    except _ReadRefused as refusal:
        return ToolOutput.error(f"Cannot read {path}: {refusal}")
    except _Stopped:
        return ToolOutput.error(_aborted(path))
    finally:
        stop.set()  # a cancelled await leaves the thread running: this ends its scan
        if remove is not None:
            remove()
    return _render(path, absolute, offset, scan, options.max_read_bytes)


def _aborted(path: str) -> str:
    return f"Read of {path} aborted; nothing was read. Read it again if you still need it."


@dataclass
class _Scan:
    size: int
    total: int
    window: list[bytes]  # candidate lines (without '\n'), before the notice is accounted for


class _ReadRefused(Exception):
    pass


class _Stopped(Exception):
    """The call was aborted or cancelled while its scan ran."""


def _prefix(number: int) -> str:
    return f"{number:>4}│ "


def _cost(number: int, line: bytes | bytearray, first: bool) -> int:
    """UTF-8 bytes a line adds to the body, counting the '\\n' that joins it to the previous."""
    return len(_prefix(number).encode()) + len(line) + (0 if first else 1)


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """Open without waiting (a FIFO's open blocks until a writer comes) and accept only a
    regular file, judged on the open descriptor so nothing can be swapped in between."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        # A socket cannot even be opened (ENXIO on Linux, EOPNOTSUPP on macOS): refuse it
        # like any other file that is not regular, not as an OS error.
        if error.errno in (errno.ENXIO, errno.EOPNOTSUPP):
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise _ReadRefused(_not_regular(mode)) from None
        raise
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(status.st_mode):
            raise _ReadRefused(_not_regular(status.st_mode))
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def _not_regular(mode: int) -> str:
    return (
        f"it is not a regular file (it is {_kind(mode)}); read only reads "
        "regular files. Inspect it with bash, for example `ls -l <path>`."
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _scan(path: str, offset: int, max_lines: int, max_bytes: int, stop: threading.Event) -> _Scan:
    started_ns = time.time_ns()
    fd, status = _open_regular(path)
    try:
        return _scan_open(fd, status, started_ns, offset, max_lines, max_bytes, stop)
    finally:
        os.close(fd)


def _read_chunk(fd: int, size: int, stop: threading.Event) -> bytes:
    if stop.is_set():
        raise _Stopped
    return os.read(fd, size)


def _scan_open(
    fd: int,
    status: os.stat_result,
    started_ns: int,
    offset: int,
    max_lines: int,
    max_bytes: int,
    stop: threading.Event,
) -> _Scan:
    identity = file_stamp(status)  # any write changes ctime: the index is then dropped
    chunk = _read_chunk(fd, _BINARY_SNIFF_BYTES, stop)
    if b"\0" in chunk:
        raise _ReadRefused(
            "it looks like a binary file (it contains NUL bytes). Inspect it with bash, "
            "for example `file <path>` or `xxd <path> | head`."
        )
    index = _LINE_INDEX.get(identity)
    position, line = 0, 1  # `line` is the number of the line that holds byte `position`
    if index is not None:
        position, line = index.checkpoint_before(offset)
        if position:
            os.lseek(fd, position, os.SEEK_SET)
            chunk = _read_chunk(fd, _CHUNK_BYTES, stop)
    checkpoints: list[tuple[int, int]] = []
    window: list[bytes] = []
    used = 0
    pending = bytearray()  # the window line being assembled, capped at max_bytes + 1
    collecting = offset == line and position == 0
    counting_only = False
    last = b""
    while chunk:
        checkpoints.append((position, line))
        last = chunk[-1:]
        pos, end = 0, len(chunk)
        while pos < end:
            if counting_only:
                line += chunk.count(b"\n", pos)
                break
            if not collecting:
                need = offset - line
                newlines = chunk.count(b"\n", pos)
                if newlines < need:
                    line += newlines
                    break
                for _ in range(need):
                    pos = chunk.index(b"\n", pos) + 1
                line += need
                collecting = True
                continue
            newline = chunk.find(b"\n", pos)
            stop_at = end if newline < 0 else newline
            room = max_bytes + 1 - len(pending)
            if room > 0:
                pending += chunk[pos : min(stop_at, pos + room)]
            if newline < 0:
                break
            # Line `line` is complete: it joins the window if it fits, else the window ends.
            cost = _cost(line, pending, not window)
            if used + cost > max_bytes:
                counting_only = True
            else:
                window.append(bytes(pending))
                used += cost
                counting_only = len(window) >= max_lines
            pending.clear()
            line += 1
            pos = newline + 1
        if counting_only and index is not None:
            return _Scan(identity[2], index.total, window)  # the rest is known
        position += len(chunk)
        chunk = _read_chunk(fd, _CHUNK_BYTES, stop)
    unterminated = last not in (b"", b"\n")
    if unterminated and collecting and not counting_only:
        cost = _cost(line, pending, not window)
        if len(window) < max_lines and used + cost <= max_bytes:
            window.append(bytes(pending))
    total = line if unterminated else line - 1
    if index is None and _settled(status, started_ns) and file_stamp(os.fstat(fd)) == identity:
        _LINE_INDEX.put(identity, _LineIndex(total, tuple(checkpoints)))
    return _Scan(identity[2], total, window)


def _settled(status: os.stat_result, started_ns: int) -> bool:
    """git's racy-timestamp rule: an index is only as good as the timestamps that guard
    it. A change later than ``started_ns`` gets a stamp at least ``started_ns`` minus one
    granularity, so it differs from the recorded one only if that one is older still."""
    stamps = (status.st_mtime_ns, status.st_ctime_ns)
    coarse = any(stamp % 1_000_000_000 == 0 for stamp in stamps)
    granularity = _COARSE_GRANULARITY_NS if coarse else _FINE_GRANULARITY_NS
    return max(stamps) + granularity < started_ns


@dataclass(frozen=True)
class _LineIndex:
    """Where each chunk of a fully scanned file starts, and on which line."""

    total: int
    checkpoints: tuple[tuple[int, int], ...]  # (byte position, number of the line holding it)

    def checkpoint_before(self, offset: int) -> tuple[int, int]:
        """The last checkpoint inside a line before ``offset``: scanning on from there
        passes ``offset - line`` newlines to reach the start of line ``offset``."""
        positions = [line for _, line in self.checkpoints]
        at = bisect.bisect_left(positions, offset) - 1
        return self.checkpoints[at] if at >= 0 else (0, 1)


class _LineIndexCache:
    """A few recently scanned files, so paging through a large file costs a window per
    page instead of a full scan. Reads run in worker threads, hence the lock."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[int, ...], _LineIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, identity: tuple[int, ...]) -> _LineIndex | None:
        with self._lock:
            index = self._entries.get(identity)
            if index is not None:
                self._entries.move_to_end(identity)
            return index

    def put(self, identity: tuple[int, ...], index: _LineIndex) -> None:
        if len(index.checkpoints) < 2:
            return  # a file of one chunk is cheaper to rescan than to remember
        with self._lock:
            self._entries[identity] = index
            self._entries.move_to_end(identity)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)


_LINE_INDEX = _LineIndexCache(capacity=32)


def _render(path: str, absolute: str, offset: int, scan: _Scan, max_bytes: int) -> ToolOutput:
    total = scan.total
    if offset > max(total, 1):
        return ToolOutput.error(
            f"offset={offset} is beyond the end of the file ({total} lines). "
            f"Use an offset between 1 and {max(total, 1)}."
        )
    # Drop lines from the end until body and notice fit together: a shorter window can
    # only make the notice shorter, so this settles on the longest complete window. The
    # window is measured in bytes and decoded only once it fits: a line that fits only
    # without the notice is never shown, so it is never decoded either.
    lines = list(scan.window)
    while True:
        end_line = offset + len(lines) - 1
        body = b"\n".join(_prefix(offset + i).encode() + line for i, line in enumerate(lines))
        truncated = end_line < total
        if truncated:
            notice = (
                f"[Showing lines {offset}-{end_line} of {total}; "
                f"continue with offset={end_line + 1}]"
            ).encode()
            body = body + b"\n\n" + notice if lines else notice
        if len(body) <= max_bytes and (lines or total == 0):
            break
        if not lines:
            return ToolOutput.error(
                f"max_read_bytes={max_bytes} is too small to return a complete line starting "
                f"at line {offset}. Read that line with bash instead, for example "
                f"`sed -n '{offset}p' <path> | cut -c1-2000`."
            )
        lines.pop()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        return ToolOutput.error(
            f"Cannot read {path}: it is not valid UTF-8 text ({error.reason} near line "
            f"{offset + _bad_line(lines)}). It may be binary or in another encoding; "
            "inspect it with bash, for example `file <path>`."
        )
    details = ReadDetails(absolute, scan.size, total, offset, end_line, truncated)
    return ToolOutput.of_text(text, details)


def _bad_line(window: list[bytes]) -> int:
    for index, raw in enumerate(window):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return index
    return 0
