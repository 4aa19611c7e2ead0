"""Find submissions and take only the student's lab modules, reading within bounds.

Every entry of the submissions folder is accounted for: a submission, or a skipped entry with
the reason. Directory submissions are read without following links; archives are unpacked by
:mod:`grader._unpack`.
"""

from __future__ import annotations

import hashlib
import os
import stat
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from coursekit.lab import Lab
from grader._unpack import (
    ARCHIVE_SUFFIXES,
    MAX_FILES,
    MAX_STREAM_BYTES,
    PACKAGE,
    InvalidSubmission,
    archive_stem,
    unpack,
)
from grader.model import Skipped

MAX_MODULE_BYTES = 1 << 20
_SKIPPED_DIRS = {"__pycache__", "venv", "node_modules"}  # and every hidden folder


def _skipped_dir(name: str) -> bool:
    """A hidden or tool folder: never searched for the practice directory, never digested.
    One rule for both, or a rerun could skip a changed submission that lives in one."""
    return name in _SKIPPED_DIRS or name.startswith(".")


__all__ = [
    "InvalidSubmission",
    "Submission",
    "discover",
    "lab_modules",
    "survey",
]


@dataclass(frozen=True)
class Submission:
    student: str
    source: Path
    refused: str = ""  # set when the entry can be named but never graded (a duplicate name)

    @property
    def is_archive(self) -> bool:
        return self.source.is_file()

    def digest(self) -> str:
        """What identifies this input: a rerun skips a submission whose digest is unchanged.
        Streams and bounds what it reads; raises InvalidSubmission for what cannot be read."""
        if self.refused:
            raise InvalidSubmission(self.refused)
        hasher = hashlib.sha256()
        if self.is_archive:
            _hash_file(hasher, self.source, MAX_STREAM_BYTES, "the archive")
            return hasher.hexdigest()
        for relative, path, size in _walk(self.source):
            hasher.update(f"{relative}\0{size}\0".encode("utf-8", "surrogateescape"))
            if PACKAGE.as_posix() in relative:
                _hash_file(hasher, path, MAX_MODULE_BYTES, relative)
        return hasher.hexdigest()


def discover(root: Path) -> list[Submission]:
    """The submissions in ``root`` (see :func:`survey` for the entries it skips)."""
    return survey(root)[0]


MAX_NAME_BYTES = 200


def survey(root: Path) -> tuple[list[Submission], list[Skipped]]:
    """One submission per student and a reason for every other entry of ``root``."""
    if not root.is_dir():
        raise InvalidSubmission(f"{root} is not a directory of submissions")
    try:
        entries = sorted(root.iterdir())
    except OSError as error:
        raise InvalidSubmission(f"cannot list {root}: {error.strerror}") from None
    skipped: list[Skipped] = []
    by_student: defaultdict[str, list[tuple[str, Path]]] = defaultdict(list)
    for entry in entries:
        named = _student_name(entry)
        if isinstance(named, Skipped):
            skipped.append(named)
        else:
            by_student[unicodedata.normalize("NFC", named).casefold()].append((named, entry))
    found = []
    for claims in by_student.values():
        student, source = claims[0]
        refused = ""
        if len(claims) > 1:
            names = ", ".join(_shown(path) for _, path in claims)
            refused = (
                f"{len(claims)} submissions for one student ({names}); keep one of them in the "
                "submissions folder and grade again"
            )
        found.append(Submission(student, source, refused))
    return sorted(found, key=lambda s: s.student), skipped


def _student_name(entry: Path) -> str | Skipped:
    shown = _shown(entry)
    name = entry.name
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return Skipped(shown, "the name is not valid UTF-8: rename it")
    if name.startswith("."):
        return Skipped(shown, "a hidden entry (its name starts with '.')")
    if any(unicodedata.category(c).startswith("C") for c in name):
        return Skipped(shown, "the name holds control characters: rename it")
    # The instructor's own links (to a folder or an archive) are followed; links inside a
    # submission never are.
    try:
        mode = entry.stat().st_mode
    except FileNotFoundError:
        return Skipped(shown, "a broken symbolic link")
    except OSError as error:
        return Skipped(shown, f"cannot be read: {error.strerror}")
    if stat.S_ISDIR(mode):
        return _not_too_long(name, shown)
    if not stat.S_ISREG(mode):
        return Skipped(shown, "neither a folder nor a regular file")
    stem = archive_stem(name)
    if stem is None:
        kinds = ", ".join(ARCHIVE_SUFFIXES)
        return Skipped(shown, f"not a folder or a supported archive ({kinds})")
    if not stem or stem.startswith("."):
        return Skipped(shown, "an archive without a student name before its suffix")
    return _not_too_long(stem, shown)


def _not_too_long(student: str, shown: str) -> str | Skipped:
    # The student's name names files of the output (with a suffix) and of the grader's
    # records: it must leave room below the usual 255-byte limit of a file name.
    if len(student.encode("utf-8")) > MAX_NAME_BYTES:
        return Skipped(shown, f"the name is longer than {MAX_NAME_BYTES} bytes: shorten it")
    return student


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control and format characters (an escape
    sequence that moves the cursor or writes the clipboard) and undecodable bytes shown as
    escapes."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(
        c.encode("unicode_escape").decode("ascii") if unicodedata.category(c)[0] == "C" else c
        for c in text
    )


def _shown(entry: Path) -> str:
    name = printable(entry.name)
    return name + "/" if entry.is_dir() else name


def lab_modules(submission: Submission, lab: Lab, scratch: Path) -> dict[str, bytes]:
    """The student's version of each lab module it has (the rest stays a stub)."""
    if submission.refused:
        raise InvalidSubmission(submission.refused)
    root = submission.source
    if submission.is_archive:
        root = scratch / "unpacked"
        root.mkdir()
        unpack(submission.source, root)
    practice = _practice_root(root)
    modules = {}
    for module in lab.lab_modules:
        content = _read_module(practice, module)
        if content is not None:
            modules[module] = content
    return modules


def _practice_root(root: Path) -> Path:
    """The folder holding src/picourse/coding_tools, at the top or a few levels down, reached
    without following a link."""
    level = [root]
    for _ in range(3):
        for candidate in level:
            if _real_dir(candidate / PACKAGE, within=candidate):
                return candidate
        level = [child for parent in level for child in _real_dirs(parent)][:MAX_FILES]
    raise InvalidSubmission(
        f"no {PACKAGE}/ found (hidden and tool folders such as .git/ or venv/ are not "
        "searched): submit the practice directory"
    )


def _real_dirs(parent: Path) -> list[Path]:
    try:
        with os.scandir(parent) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if e.is_dir(follow_symlinks=False) and not _skipped_dir(e.name)
            )[:MAX_FILES]
    except OSError as error:
        raise InvalidSubmission(f"cannot read {parent.name}/: {error.strerror}") from None


def _real_dir(path: Path, within: Path) -> bool:
    """A directory, and no link on the way to it from ``within``."""
    current = within
    for part in path.relative_to(within).parts:
        current = current / part
        try:
            if not stat.S_ISDIR(current.lstat().st_mode):
                return False
        except FileNotFoundError:
            return False
        except OSError as error:
            raise InvalidSubmission(f"cannot read {part}: {error.strerror}") from None
    return True


def _read_module(practice: Path, module: str) -> bytes | None:
    path = practice / module
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        if path.is_symlink():
            raise InvalidSubmission(f"{module} is a symbolic link; submit the file") from None
        raise InvalidSubmission(f"cannot read {module}: {error.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InvalidSubmission(f"{module} is not a regular file")
        if info.st_size > MAX_MODULE_BYTES:
            raise InvalidSubmission(f"{module} is larger than {MAX_MODULE_BYTES} bytes")
        content = handle.read(MAX_MODULE_BYTES + 1)
    if len(content) > MAX_MODULE_BYTES:
        raise InvalidSubmission(f"{module} is larger than {MAX_MODULE_BYTES} bytes")
    return content


MAX_DEPTH = 100  # folders below the submission: far past any project, far below recursion limits


def check_depth(root: Path | str, folder: str) -> None:
    """Refuse a folder nested deeper than MAX_DEPTH below ``root`` (os.walk recurses: a
    deep enough tree would end in RecursionError instead of a reason)."""
    depth = len(Path(folder).relative_to(root).parts)
    if depth > MAX_DEPTH:
        raise InvalidSubmission(
            f"folders are nested more than {MAX_DEPTH} deep; submit the practice directory "
            "without them"
        )


def _walk(root: Path) -> list[tuple[str, Path, int]]:
    """Every file of a directory submission (relative name, path, size), links not followed,
    hidden and tool folders (.git, .venv, __pycache__) left out; refuses what cannot be read."""

    def refuse(error: OSError) -> NoReturn:
        raise InvalidSubmission(
            f"cannot read {_relative(root, error.filename)}: {error.strerror}; make it readable "
            "or leave it out, then grade again"
        )

    found = []
    for folder, dirs, files in os.walk(root, onerror=refuse):
        check_depth(root, folder)
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(d))
        for name in sorted(files):
            path = Path(folder, name)
            try:
                info = path.lstat()
            except OSError as error:
                refuse(error)
            if not stat.S_ISREG(info.st_mode):
                continue  # links and special files are never read; lab_modules refuses them
            if not os.access(path, os.R_OK):
                raise InvalidSubmission(
                    f"cannot read {_relative(root, path)}: permission denied; make it readable "
                    "or leave it out, then grade again"
                )
            found.append((path.relative_to(root).as_posix(), path, info.st_size))
            if len(found) > MAX_FILES:
                raise InvalidSubmission(f"the submission holds more than {MAX_FILES} files")
    return found


def _relative(root: Path, path: str | os.PathLike[str] | None) -> str:
    try:
        return Path(path or root).relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)


def _hash_file(hasher: hashlib._Hash, path: Path, limit: int, shown: str) -> None:
    """Hash at most ``limit`` bytes of ``path``, in chunks; a longer file is hashed by its
    start and its size (it is refused when graded)."""
    try:
        with open(path, "rb") as handle:
            left = limit
            while left > 0 and (chunk := handle.read(min(1 << 16, left))):
                hasher.update(chunk)
                left -= len(chunk)
    except OSError as error:
        raise InvalidSubmission(f"cannot read {shown}: {error.strerror}") from None
