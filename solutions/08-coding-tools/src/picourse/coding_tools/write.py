"""Lab 8.3 (reference): replace a whole file atomically and durably.

The new content goes to a temp file in the target's directory (a rename is atomic only
within one filesystem), is flushed and fsynced, takes the old file's permission bits, and
is renamed over the target; then the directory is fsynced so the rename survives a crash.
Readers see the old file or the new one, never half of it. The temp name is created with
O_EXCL, so two processes can never share one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import stat

from picourse.coding_tools.details import WriteDetails
from picourse.coding_tools.errors import PathError, describe_os_error
from picourse.coding_tools.mutation_queue import DEFAULT_MUTATION_QUEUE, canonical_key
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.tool import ToolOutput


async def write_file(options: CodingToolOptions, path: str, content: str) -> ToolOutput:
    try:
        absolute = resolve_path(options, path)
    except PathError as error:
        return ToolOutput.error(str(error))
    data = content.encode("utf-8")
    key = canonical_key(absolute)
    try:
        await DEFAULT_MUTATION_QUEUE.run(key, lambda: asyncio.to_thread(write_atomic, key, data))
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="write"))
    return ToolOutput.of_text(
        f"Wrote {len(data)} bytes to {path}.", WriteDetails(absolute, len(data))
    )


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` (a real path: symlinks already resolved) with ``data``."""
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    try:
        old_mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        old_mode = None
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", path)
    temp = os.path.join(directory, f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    # A new file gets 0o666 minus the umask, as any new file would; an existing one is
    # created private and then given the old file's bits.
    fd = os.open(
        temp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
        0o600 if old_mode is not None else 0o666,
    )
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if old_mode is not None:
                os.fchmod(file.fileno(), old_mode)
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # some platforms cannot open directories; the rename itself is done
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
