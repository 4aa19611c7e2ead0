"""Given: the operating-system pieces that write and edit share.

- ``directory_lock(directory)``: an exclusive advisory lock (``flock``) on a directory,
  held around read-check-rename. The mutation queue orders operations inside one event
  loop; this lock also orders them across event loops, threads and processes, so an edit
  never reads a file that another writer is about to replace. It is re-entrant per thread
  (edit holds it and then calls ``write_atomic``, which takes it again), it is released
  by the kernel when its holder dies, and waiting for it gives up after
  ``LOCK_TIMEOUT_SECONDS`` instead of hanging behind a stopped process.
- ``open_regular_file(path)``: open a file for reading without ever blocking (a FIFO
  with no writer, a device) and accept only a regular file, as a binary file object; for
  read, glob and careful edits. ``open_existing(path, display)`` does the same as a raw
  descriptor and says no the way write and edit do (``ChangeRefused``).
- ``file_stamp(status)``: which file a status describes and its last change, equal for two
  looks only when nothing wrote it or replaced it in between (any write changes ctime).

``open()`` of a FIFO waits for a writer that may never come, and a device can stream for
ever. The tools read in worker threads, which nobody can cancel: one such ``open()`` keeps
the tool call, the agent loop around it and the process from ever ending. So open with
``O_NONBLOCK`` (a FIFO then opens at once), ask ``fstat`` what the path really is, and
refuse everything but a regular file before reading a byte.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterator
from typing import BinaryIO

from picourse.coding_tools.errors import ChangeRefused

LOCK_TIMEOUT_SECONDS = 30.0
FileStamp = tuple[int, int, int, int, int]  # (device, inode, size, mtime_ns, ctime_ns)
_held = threading.local()  # (st_dev, st_ino) of the directories this thread has locked


@contextlib.contextmanager
def directory_lock(directory: str) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (it must exist) for the ``with`` body."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        identity = (info.st_dev, info.st_ino)
        held: set[tuple[int, int]] = _held.__dict__.setdefault("directories", set())
        if identity in held:
            yield  # this thread holds it already (flock would wait for itself)
            return
        _acquire(fd, directory)
        held.add(identity)
        try:
            yield
        finally:
            held.discard(identity)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _acquire(fd: int, directory: str) -> None:
    deadline = time.monotonic() + LOCK_TIMEOUT_SECONDS
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ChangeRefused(
                    f"Another process has been changing files in {directory} for "
                    f"{LOCK_TIMEOUT_SECONDS:g}s; nothing was written. Try again later."
                ) from None
            time.sleep(pause)  # polling, not a blocking flock: the wait stays bounded
            pause = min(pause * 2, 0.05)


class NotARegularFileError(OSError):
    """The path is a FIFO, socket or device: the tools only read and change regular files."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(errno.EINVAL, f"it is {_kind(mode)}, not a regular file", path)
        self.mode = mode


def open_regular_file(path: str) -> BinaryIO:
    """Open ``path`` for reading in binary mode; raise ``IsADirectoryError`` for a folder
    and ``NotARegularFileError`` for anything else that is not a regular file."""
    return os.fdopen(_open_regular(path), "rb")


def open_existing(path: str, display: str) -> int:
    """A descriptor of the regular file ``path``, opened read-only without blocking.

    Raises ``FileNotFoundError`` (and other ``OSError``) as ``os.open`` does, and
    ``ChangeRefused`` for anything but a regular file, named as ``display``.
    """
    try:
        return _open_regular(path)
    except NotARegularFileError as error:
        raise ChangeRefused(not_a_regular_file(display, error.mode)) from None


def _open_regular(path: str) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        # A socket cannot even be opened (ENXIO on Linux, EOPNOTSUPP on macOS).
        if error.errno in (errno.ENXIO, errno.EOPNOTSUPP):
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise NotARegularFileError(path, mode) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(path, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def not_a_regular_file(display: str, mode: int) -> str:
    return (
        f"{display} is {_kind(mode)}, not a regular file; write and edit change only regular "
        "files. Use bash if you really mean to send data to it."
    )


def _kind(mode: int) -> str:
    return {
        stat.S_IFIFO: "a FIFO (named pipe)",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFSOCK: "a socket",
    }.get(stat.S_IFMT(mode), "a special file")


def file_stamp(status: os.stat_result) -> FileStamp:
    """Which file ``status`` describes and its last change (see the module's docstring)."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
