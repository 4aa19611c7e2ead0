"""Opening a file the tools may look into: a regular file, opened without waiting.

Given. ``open()`` of a FIFO waits for a writer that may never come, and a device can
stream forever. The tools read in worker threads, which nobody can cancel: one such
``open()`` keeps the tool call, the agent loop around it and the process from ever
ending. So open with ``O_NONBLOCK`` (a FIFO then opens at once), ask ``fstat`` what the
path really is, and refuse everything but a regular file before reading a byte.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO


class NotARegularFileError(OSError):
    """The path is a FIFO, socket or device: the tools only read and change regular files."""


def open_regular_file(path: str) -> BinaryIO:
    """Open ``path`` for reading in binary mode; raise ``IsADirectoryError`` for a folder and
    ``NotARegularFileError`` for anything else that is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(
                errno.EINVAL,
                f"it is {_kind(mode)}, not a regular file; the tools only work on regular files",
                path,
            )
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"
