"""Lab 8.3 (reference): replace a whole file atomically and durably.

The new content goes to a temp file in the target's directory (a rename is atomic only
within one filesystem), is flushed and fsynced, takes the old file's permission bits
(and, as root, its owner, group and extended attributes), and is renamed over the
target; then the directory is fsynced so the rename survives a crash. Readers see the
old file or the new one, never half of it.

- Only a regular file is replaced (after following symlinks): a FIFO, a device or a
  socket is refused, and so is a file without any write permission bit, as the shell's
  ``>`` refuses it for a normal user.
- The temp name is ``.pi-<pid>-<random>.tmp``: short, so it fits beside any legal
  name, and created with ``O_EXCL``, so two writers never share one.
- Every replace holds ``files.directory_lock`` of the directory, so writers in other
  event loops or processes wait; while holding it, temp files of writers that are dead
  (their pid is in the name) are removed: a live writer would be holding the lock.
- A failed write removes its temp file and the directories it created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat

from picourse.coding_tools.confirm import ask_before_change
from picourse.coding_tools.details import WriteDetails
from picourse.coding_tools.errors import (
    ChangeRefused,
    PathError,
    describe_os_error,
    path_in_flux,
)
from picourse.coding_tools.files import directory_lock, not_a_regular_file, open_existing
from picourse.coding_tools.mutation_queue import DEFAULT_MUTATION_QUEUE, canonical_key
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.threads import in_thread
from picourse.tool import ToolOutput

_TEMP_NAME = re.compile(r"\.pi-(\d+)-[0-9a-f]{12}\.tmp")
_PATH_MAX = 4096  # Linux; macOS allows 1024, and its own error is as clear


async def write_file(options: CodingToolOptions, path: str, content: str) -> ToolOutput:
    if path.endswith(("/", os.sep)):  # normpath would drop it and write a file of that name
        return ToolOutput.error(
            f"{path} ends with '/', so it names a directory, not a file; give the path of the "
            "file to write (write creates the directories above it)."
        )
    try:
        absolute = resolve_path(options, path)
        key = canonical_key(absolute)
    except PathError as error:
        return ToolOutput.error(str(error))
    except OSError as error:  # canonical_key's realpath, as another program swaps a link
        return ToolOutput.error(path_in_flux(path, error))
    except (ValueError, RecursionError):
        return ToolOutput.error(f"Cannot write {path!r}: the path cannot be used as a file name.")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as error:
        return ToolOutput.error(
            f"content is not valid Unicode text ({error.reason} at character {error.start}); "
            f"send the file's text as UTF-8. {path} is unchanged."
        )

    async def replace() -> bool:
        """Write inside the lane; False when nothing needed writing."""
        # Only the extensions need the old content; the plain write does not read it.
        if options.ledger is not None or options.confirm is not None:
            old = await in_thread(_current, key, path)
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
            await in_thread(_write_if_unchanged, key, path, old, data)
        else:
            await in_thread(write_atomic, key, data)
        if options.ledger is not None:
            options.ledger.record(key, data)
        return True

    try:
        written = await DEFAULT_MUTATION_QUEUE.run(key, replace)
    except ChangeRefused as refusal:
        # write_atomic knows only the real path; the result names the file as given.
        return ToolOutput.error(str(refusal).replace(key, path))
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


def _current(key: str, display: str) -> bytes | None:
    """The file's bytes, or None when there is no file yet; never blocks on a FIFO."""
    try:
        fd = open_existing(key, display)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as file:
        return file.read()


def _write_if_unchanged(key: str, display: str, old: bytes | None, data: bytes) -> None:
    """Replace the file only if it still holds ``old``: the user (8.8) or the ledger
    (8.9) approved a change of exactly that content."""
    directory = os.path.dirname(key)
    with contextlib.ExitStack() as stack:
        if os.path.isdir(directory):
            stack.enter_context(directory_lock(directory))
        if _current(key, display) != old:
            raise ChangeRefused(
                f"{display} changed on disk while this write waited; nothing was written. "
                "Read it again, then redo the write."
            )
        write_atomic(key, data)


def write_atomic(path: str, data: bytes | bytearray) -> None:
    """Replace ``path`` (a real path: symlinks already resolved) with ``data``."""
    if len(os.fsencode(path)) >= _PATH_MAX:  # fail before creating thousands of folders
        raise OSError(errno.ENAMETOOLONG, "File name too long", path)
    directory = os.path.dirname(path)
    created = _make_directories(directory)
    try:
        with directory_lock(directory):
            _remove_stale_temps(directory)
            _replace(path, directory, data)
    except BaseException:
        for folder in reversed(created):
            with contextlib.suppress(OSError):  # not empty: someone else uses it now
                os.rmdir(folder)
        raise
    _fsync_directory(directory)


def _make_directories(directory: str) -> list[str]:
    """Create ``directory`` and its missing parents; return those created, outermost first."""
    missing: list[str] = []
    folder = directory
    while not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    created: list[str] = []
    try:
        for folder in reversed(missing):
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not os.path.isdir(folder):
                    _raise_if_a_symlink_loop(folder)
                    raise NotADirectoryError(errno.ENOTDIR, "Not a directory", folder) from None
                continue  # another writer made it meanwhile
            created.append(folder)
    except BaseException:
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise
    return created


def _raise_if_a_symlink_loop(folder: str) -> None:
    """A name that exists but is no folder may be a symlink loop: say so, not "a file"."""
    try:
        os.stat(folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise


def _read_only(path: str, old: os.stat_result) -> str:
    """Why ``path`` cannot be written: its mode, or (chmod would not help) its file system."""
    try:
        mounted_read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        mounted_read_only = False
    if mounted_read_only:
        return (
            f"{path} is on a read-only file system; nothing was written. Write it somewhere "
            "that can change, or ask the user to make it writable."
        )
    return (
        f"{path} is read-only (mode {stat.S_IMODE(old.st_mode):o}); nothing was written. "
        "Make it writable first (chmod u+w) if it should change."
    )


def _replace(path: str, directory: str, data: bytes | bytearray) -> None:
    try:
        old: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        old = None
    if old is not None:
        if stat.S_ISDIR(old.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if not stat.S_ISREG(old.st_mode):
            raise ChangeRefused(not_a_regular_file(path, old.st_mode))
        if not old.st_mode & 0o222 or not os.access(path, os.W_OK):
            raise ChangeRefused(_read_only(path, old))
    temp = os.path.join(directory, f".pi-{os.getpid()}-{secrets.token_hex(6)}.tmp")
    # A new file gets 0o666 minus the umask, as any new file would; an existing one is
    # created private and then given the old file's owner and bits.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temp, flags, 0o600 if old is not None else 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if old is not None:
                _keep_metadata(file.fileno(), path, old)
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _keep_metadata(fd: int, path: str, old: os.stat_result) -> None:
    """Owner and group (where allowed), extended attributes (where supported), mode."""
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):  # only root may give a file away
            os.fchown(fd, old.st_uid, old.st_gid)
    if hasattr(os, "listxattr"):
        with contextlib.suppress(OSError):  # the filesystem has no extended attributes
            for name in os.listxattr(path):
                with contextlib.suppress(OSError):
                    os.setxattr(fd, name, os.getxattr(path, name))
    os.fchmod(fd, stat.S_IMODE(old.st_mode))  # after chown, which clears set-id bits


def _remove_stale_temps(directory: str) -> None:
    """Remove temp files of dead writers (called with the directory lock held)."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            match = _TEMP_NAME.fullmatch(entry.name)
            if match is None or int(match.group(1)) == os.getpid():
                continue
            if not _alive(int(match.group(1))):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or a name we cannot judge: keep it
    return True


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
