"""Find submissions and take only the student's lab modules, reading within bounds.

Every entry of the submissions folder is accounted for: a submission, or a skipped entry with
the reason. Directory submissions are read by descriptors, never through a link
(:mod:`grader._tree`); archives are copied once and unpacked by :mod:`grader._unpack`.
"""

from __future__ import annotations

import hashlib
import stat
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from coursekit.lab import Lab
from grader._tree import (
    MAX_MODULE_BYTES,
    PRACTICE_DEPTH,
    entry_mode,
    open_archive,
    read_tree,
)
from grader._unpack import (
    ARCHIVE_SUFFIXES,
    MAX_FILES,
    MAX_STREAM_BYTES,
    PACKAGE,
    InvalidSubmission,
    archive_stem,
    unpack,
)
from grader.model import Skipped, printable

__all__ = [
    "InvalidSubmission",
    "Submission",
    "Taken",
    "discover",
    "lab_modules",
    "survey",
    "take",
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
        if not self.is_archive:
            return read_tree(self.source, keep=lambda _: False).digest
        hasher = hashlib.sha256()
        with open_archive(self.source) as archive:
            left = MAX_STREAM_BYTES  # a longer archive is refused when graded
            while left > 0 and (chunk := archive.read(min(1 << 16, left))):
                hasher.update(chunk)
                left -= len(chunk)
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
    by_student: defaultdict[str, list[tuple[str, Path, str]]] = defaultdict(list)
    for entry in entries:
        # The instructor's own links (to a folder or an archive) are followed, a student's
        # never (not even to tell what it leads to); links inside a submission never are.
        try:
            mode: int | None = entry_mode(entry)
            unreachable = ""
        except InvalidSubmission as error:
            mode, unreachable = None, str(error)
        shown = printable(entry.name) + ("/" if mode is not None and stat.S_ISDIR(mode) else "")
        named = _student_name(entry.name, shown, mode, unreachable)
        if isinstance(named, Skipped):
            skipped.append(named)
        else:
            key = unicodedata.normalize("NFC", named).casefold()
            by_student[key].append((named, entry, shown))
    found = []
    for claims in by_student.values():
        student, source, _ = claims[0]
        refused = ""
        if len(claims) > 1:
            names = ", ".join(shown for _, _, shown in claims)
            refused = (
                f"{len(claims)} submissions for one student ({names}); keep one of them in the "
                "submissions folder and grade again"
            )
        found.append(Submission(student, source, refused))
    return sorted(found, key=lambda s: s.student), skipped


def _student_name(name: str, shown: str, mode: int | None, unreachable: str) -> str | Skipped:
    """The student's name for an entry of ``mode`` (None: ``unreachable`` says why)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return Skipped(shown, "the name is not valid UTF-8: rename it")
    if name.startswith("."):
        return Skipped(shown, "a hidden entry (its name starts with '.')")
    if any(unicodedata.category(c).startswith("C") for c in name):
        return Skipped(shown, "the name holds control characters: rename it")
    if mode is None:
        return Skipped(shown, unreachable)
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


@dataclass(frozen=True)
class Taken:
    """What grading reads of a submission, in one pass: the digest is of the same bytes as
    the modules."""

    digest: str
    modules: dict[str, bytes]  # the student's version of each lab module it has


def take(submission: Submission, lab: Lab, scratch: Path) -> Taken:
    """Read ``submission`` once (see :mod:`grader._tree`); raises InvalidSubmission."""
    if submission.refused:
        raise InvalidSubmission(submission.refused)
    modules = set(lab.lab_modules)
    if submission.is_archive:
        digest, root = _unpacked(submission, scratch)
    else:
        digest, root = "", submission.source
    tree = read_tree(root, keep=lambda path: _is_candidate(path, modules))
    practice = _practice_root(tree.folders)
    found = {}
    for module in lab.lab_modules:
        path = f"{practice}/{module}" if practice else module
        if path in tree.special:
            raise InvalidSubmission(f"{module} is not a regular file")
        content = tree.kept.get(path)
        if content is None:
            continue
        if len(content) > MAX_MODULE_BYTES:
            raise InvalidSubmission(f"{module} is larger than {MAX_MODULE_BYTES} bytes")
        found[module] = content
    return Taken(digest or tree.digest, found)


def lab_modules(submission: Submission, lab: Lab, scratch: Path) -> dict[str, bytes]:
    """The student's version of each lab module it has (the rest stays a stub)."""
    return take(submission, lab, scratch).modules


def _unpacked(submission: Submission, scratch: Path) -> tuple[str, Path]:
    """The archive's digest and the folder it was unpacked into. It is copied once, and that
    copy is digested and unpacked: the student's file can change meanwhile, the graded
    bytes cannot. The copy's name is neutral (a student's name never reaches a path a job
    sees)."""
    name = submission.source.name
    copy = scratch / ("submitted" + name[len(archive_stem(name) or "") :])
    hasher = hashlib.sha256()
    try:
        with open_archive(submission.source) as source, open(copy, "xb") as sink:
            while chunk := source.read(1 << 16):
                if sink.tell() + len(chunk) > MAX_STREAM_BYTES:
                    raise InvalidSubmission(
                        f"the archive is larger than {MAX_STREAM_BYTES >> 20} MiB"
                    )
                hasher.update(chunk)
                sink.write(chunk)
        root = scratch / "unpacked"
        root.mkdir()
        unpack(copy, root, shown=name)
    finally:
        copy.unlink(missing_ok=True)
    return hasher.hexdigest(), root


def _is_candidate(path: str, modules: set[str]) -> bool:
    """A file that is one of ``modules`` of a practice directory (see _practice_root)."""
    parts = path.split("/")
    return any("/".join(parts[depth:]) in modules for depth in range(PRACTICE_DEPTH + 1))


def _practice_root(folders: set[str]) -> str:
    """The folder holding src/picourse/coding_tools, at the top or up to PRACTICE_DEPTH
    levels down."""
    level = [""]
    for _ in range(PRACTICE_DEPTH + 1):
        for candidate in level:
            if (f"{candidate}/{PACKAGE}" if candidate else str(PACKAGE)) in folders:
                return candidate
        level = sorted(
            folder
            for folder in folders
            if folder and folder.rpartition("/")[0] in level and folder not in level
        )[:MAX_FILES]
    raise InvalidSubmission(
        f"no {PACKAGE}/ found (hidden and tool folders such as .git/ or venv/ are not "
        "searched): submit the practice directory"
    )
