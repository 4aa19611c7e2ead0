"""Read a submission by descriptors, in one pass, never through a student's link.

A submission may sit in a folder its student can still change while the grader reads it.
A path that is checked and then opened by name can be swapped in between for a link to what
the student cannot read (``renameat2`` exchanges two names in one step), and the grader is
often root. So every folder and file here is opened once, relative to its parent's
descriptor and with ``O_NOFOLLOW``; the type that counts is the one of the opened
descriptor; and the digest and the graded bytes come from that same read.

Links are followed only on the way to the entry, and only links the grader, root or the
owner of the submissions folder made (the instructor's arrangement); a link a student made
is never followed there, and a link anywhere inside a submission refuses it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NoReturn

from grader._unpack import MAX_FILES, PACKAGE, InvalidSubmission

MAX_MODULE_BYTES = 1 << 20
MAX_DEPTH = 100  # folders below the submission: far past any project, far below any limit
# Files, folders and special files together: what the walk may list (MAX_FILES holds files).
MAX_ENTRIES = 20_000
# How deep a practice directory is looked for (its package another three levels down).
PRACTICE_DEPTH = 2
# The bytes kept of candidate lab modules while walking (a copy of the package or two is a
# few hundred KiB); past it, the submission holds many copies and is refused.
MAX_KEPT_BYTES = 64 << 20
_MAX_LINKS = 40  # followed on the way to one entry, as the kernel allows
_SKIPPED_DIRS = {"__pycache__", "venv", "node_modules"}  # and every hidden folder
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
# What open(O_NOFOLLOW) says of a link: ELOOP on Linux and macOS, EMLINK on FreeBSD.
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK}


def _skipped_dir(name: str) -> bool:
    """A hidden or tool folder: never searched for the practice directory, never digested.
    One rule for both, or a rerun could skip a changed submission that lives in one."""
    return name in _SKIPPED_DIRS or name.startswith(".")


@dataclass
class Tree:
    """What one pass over a directory submission read."""

    digest: str
    folders: set[str] = field(default_factory=set)  # relative, "" the top; where a package can be
    kept: dict[str, bytes] = field(default_factory=dict)  # at most MAX_MODULE_BYTES + 1 each
    special: set[str] = field(default_factory=set)  # a FIFO or socket where ``keep`` says


def read_tree(source: Path, keep: Callable[[str], bool]) -> Tree:
    """Walk the directory submission ``source``: the digest covers every file's name and
    size and the content of the lab package's files; ``keep`` chooses (by relative name)
    the files whose bytes are returned. Raises InvalidSubmission with the reason."""
    walk = _Walk(hashlib.sha256(), keep)
    with _opened_entry(source, directory=True) as top:
        walk.folder(top, "", 0)
    return Tree(walk.hasher.hexdigest(), walk.folders, walk.kept, walk.special)


def entry_mode(source: Path) -> int:
    """The type and mode of an entry of the submissions folder, reached as ``read_tree``
    reaches it. Raises InvalidSubmission with the reason (a broken or a student's link)."""
    with _opened_entry(source, directory=None) as fd:
        return os.fstat(fd).st_mode


@contextmanager
def open_archive(source: Path) -> Iterator[BinaryIO]:
    """The archive entry, opened as ``read_tree`` opens a submission."""
    with _opened_entry(source, directory=False) as fd:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidSubmission(f"{source.name} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            yield handle


@dataclass
class _Walk:
    hasher: hashlib._Hash
    keep: Callable[[str], bool]
    folders: set[str] = field(default_factory=set)
    kept: dict[str, bytes] = field(default_factory=dict)
    special: set[str] = field(default_factory=set)
    files: int = 0
    entries: int = 0
    kept_bytes: int = 0

    def folder(self, fd: int, relative: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InvalidSubmission(
                f"folders are nested more than {MAX_DEPTH} deep; submit the practice directory "
                "without them"
            )
        # Every folder is in the digest (an empty one can decide which copy is graded); only
        # those where a practice directory's package can be are kept.
        self.hasher.update(f"{relative}/\0".encode("utf-8", "surrogateescape"))
        if depth <= PRACTICE_DEPTH + len(PACKAGE.parts):
            self.folders.add(relative)
        names = []
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    self.entries += 1
                    if self.entries > MAX_ENTRIES:
                        raise InvalidSubmission(
                            f"the submission holds more than {MAX_ENTRIES} files and folders; "
                            "submit the practice directory without the rest"
                        )
                    names.append(entry.name)
        except OSError as error:
            _refuse(relative, error)
        names.sort()
        subfolders = []
        for name in names:
            path = f"{relative}/{name}" if relative else name
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # gone since it was listed: as if it never was
            except OSError as error:
                _refuse(path, error)
            if stat.S_ISLNK(info.st_mode):
                _refuse_link(path)
            elif stat.S_ISDIR(info.st_mode):
                if not _skipped_dir(name):
                    subfolders.append((name, path))
            elif stat.S_ISREG(info.st_mode):
                self.file(fd, name, path)
            else:  # never opened; a module that is one is refused by name
                self.hasher.update(f"{path}\0special\0".encode("utf-8", "surrogateescape"))
                if self.keep(path):
                    self.special.add(path)
        for name, path in subfolders:
            child = _open(fd, name, path, os.O_DIRECTORY)
            try:
                self.folder(child, path, depth + 1)
            finally:
                os.close(child)

    def file(self, parent: int, name: str, path: str) -> None:
        self.files += 1
        if self.files > MAX_FILES:
            raise InvalidSubmission(f"the submission holds more than {MAX_FILES} files")
        fd = _open(parent, name, path, 0)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # swapped since it was looked at
                raise InvalidSubmission(f"{path} changed while it was read; grade again")
            self.hasher.update(f"{path}\0{info.st_size}\0".encode("utf-8", "surrogateescape"))
            if PACKAGE.as_posix() not in path:
                return
            # A longer module is hashed by its start and its size; grading refuses it.
            content = handle.read(MAX_MODULE_BYTES + 1)
            self.hasher.update(content[:MAX_MODULE_BYTES])
            if self.keep(path):
                self.kept_bytes += len(content)
                if self.kept_bytes > MAX_KEPT_BYTES:
                    raise InvalidSubmission(
                        f"more than {MAX_KEPT_BYTES >> 20} MiB of lab modules in copies of "
                        f"{PACKAGE}/: submit one practice directory"
                    )
                self.kept[path] = content


def _open(parent: int, name: str, path: str, flags: int) -> int:
    try:
        return os.open(name, _OPEN_FLAGS | flags, dir_fd=parent)
    except OSError as error:
        # A link since it was looked at: ELOOP, or ENOTDIR when a folder was expected.
        if error.errno in _LINK_ERRNOS or _is_link(parent, name):
            _refuse_link(path)
        if error.errno == errno.ENOTDIR:
            raise InvalidSubmission(f"{path} changed while it was read; grade again") from None
        _refuse(path, error)


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextmanager
def _opened_entry(source: Path, directory: bool | None) -> Iterator[int]:
    """A descriptor of ``source`` (a folder, a file, or either when ``directory`` is None),
    reached from ``/`` one name at a time. A link on the way is followed only when a trusted
    user owns it."""
    trusted = _trusted_owners(source)
    pending = list(Path(os.path.abspath(source)).parts[1:])
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    links = 0
    try:
        while pending:
            name = pending.pop(0)
            last = not pending
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if links:
                    raise InvalidSubmission("a broken symbolic link") from None
                raise InvalidSubmission(f"{source.name} does not exist") from None
            except OSError as error:
                raise InvalidSubmission(f"cannot read {source.name}: {error.strerror}") from None
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if info.st_uid not in trusted or links > _MAX_LINKS:
                    raise InvalidSubmission(
                        f"{source.name} is reached through a symbolic link its student could "
                        f"change ({name}); copy the submission into the submissions folder"
                    )
                target = Path(os.readlink(name, dir_fd=fd))
                if target.is_absolute():
                    os.close(fd)
                    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
                pending[:0] = [part for part in target.parts if part != "/"]
                continue
            flags = os.O_DIRECTORY if directory or not last else 0
            if last and directory is None and stat.S_ISSOCK(info.st_mode):
                raise InvalidSubmission("neither a folder nor a regular file")
            try:
                child = os.open(name, _OPEN_FLAGS | flags, dir_fd=fd)
            except OSError as error:
                raise InvalidSubmission(
                    f"cannot read {source.name}: {error.strerror} (it changed while it was "
                    "read?); grade again"
                ) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _trusted_owners(source: Path) -> set[int]:
    """Whose links lead to a submission: root's, the grader's and those of the owner of the
    submissions folder (the instructor's arrangement); never a student's."""
    owners = {0, os.geteuid()}
    with suppress(OSError):
        owners.add(source.parent.stat().st_uid)
    return owners


def _refuse_link(path: str) -> NoReturn:
    raise InvalidSubmission(
        f"{path} is a symbolic link; replace it with the file itself and submit again"
    )


def _refuse(path: str, error: OSError) -> NoReturn:
    raise InvalidSubmission(
        f"cannot read {path or '.'}: {error.strerror}; make it readable or leave it out, then "
        "grade again"
    )
