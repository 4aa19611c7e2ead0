"""Lab 8.3 — replace a whole file atomically.

``write_file`` resolves the path, then runs ``write_atomic`` inside the default mutation
queue. ``write_atomic`` creates parent directories, writes a temp file with a fresh name
in the target's directory, fsyncs it, and renames it over the target; no temp file
survives any path. A new file gets the usual ``0o666 & ~umask`` mode; a replaced file
keeps its permission bits. Only a regular file may be replaced: a directory, a FIFO, a
device or a socket is an error and stays as it is. Report ``WriteDetails`` (UTF-8 bytes)
and the text ``Wrote 7 bytes to a/b/c.txt.``; every result names the file as given.
Given helpers in ``files.py`` order writers across processes (``directory_lock``); using
them is optional here.
"""

from __future__ import annotations

from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


async def write_file(options: CodingToolOptions, path: str, content: str) -> ToolOutput:
    # Lab 8.3: resolve, queue under the canonical key, write atomically, report.
    raise NotImplementedError("Lab 8.3 write is not implemented yet")


def write_atomic(path: str, data: bytes | bytearray) -> None:
    # Lab 8.3: temp file in the same directory, then rename over the target. ``path`` is a
    # real path: callers (write, edit) resolve symlinks first (canonical_key).
    raise NotImplementedError("Lab 8.3 write_atomic is not implemented yet")
