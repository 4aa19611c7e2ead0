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

from picourse.coding_tools.confirm import ask_before_change
from picourse.coding_tools.details import WriteDetails
from picourse.coding_tools.errors import ChangeRefused, PathError, describe_os_error
from picourse.coding_tools.files import open_regular_file
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

    async def replace() -> bool:
        """Write inside the lane; False when nothing needed writing."""
        # Only the extensions need the old content; the plain write does not read it.
        if options.ledger is not None or options.confirm is not None:
            old = await asyncio.to_thread(_current, key)
            if options.ledger is not None and old is not None:  # careful edits (8.9)
                refusal = options.ledger.verify(key, path, old)
                if refusal is not None:
                    raise ChangeRefused(refusal)
            if options.confirm is not None:  # the confirmation gate (8.8)
                decision = await ask_before_change(options.confirm, "write", path, old, data)
                if decision == "unchanged":
                    return False
                if decision == "declined":
                    raise ChangeRefused(f"The user declined the write; {path} is unchanged.")
        await asyncio.to_thread(write_atomic, key, data)
        if options.ledger is not None:
            options.ledger.record(key, data)
        return True

    try:
        written = await DEFAULT_MUTATION_QUEUE.run(key, replace)
    except ChangeRefused as refusal:
        return ToolOutput.error(str(refusal))
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="write"))
    if not written:
        return ToolOutput.of_text(
            f"{path} already holds exactly this content; nothing was written.",
            WriteDetails(absolute, len(data)),
        )
    return ToolOutput.of_text(
        f"Wrote {len(data)} bytes to {path}.", WriteDetails(absolute, len(data))
    )


def _current(key: str) -> bytes | None:
    """The file's bytes, or None when there is no file yet."""
    try:
        with open_regular_file(key) as file:
            return file.read()
    except FileNotFoundError:
        return None


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
