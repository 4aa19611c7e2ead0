"""Find submissions, unpack archives safely, and take only the student's lab modules."""

from __future__ import annotations

import hashlib
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from coursekit.lab import Lab

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")
MAX_FILES = 5000
MAX_TOTAL_BYTES = 100 << 20
MAX_MODULE_BYTES = 1 << 20
PACKAGE = PurePosixPath("src/picourse/coding_tools")


class InvalidSubmission(Exception):
    """The submission cannot be graded; the message says why."""


@dataclass(frozen=True)
class Submission:
    student: str
    source: Path

    @property
    def is_archive(self) -> bool:
        return self.source.is_file()

    def digest(self) -> str:
        """What identifies this input: a rerun skips a submission whose digest is unchanged."""
        hasher = hashlib.sha256()
        if self.is_archive:
            hasher.update(self.source.read_bytes())
            return hasher.hexdigest()
        for path in sorted(self.source.rglob("*")):
            if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
                hasher.update(str(path.relative_to(self.source)).encode() + b"\0")
                hasher.update(path.read_bytes()[:MAX_MODULE_BYTES] + b"\0")
        return hasher.hexdigest()


def discover(root: Path) -> list[Submission]:
    if not root.is_dir():
        raise InvalidSubmission(f"{root} is not a directory of submissions")
    found = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            found.append(Submission(entry.name, entry))
        elif entry.name.endswith(ARCHIVE_SUFFIXES):
            name = entry.name
            for suffix in ARCHIVE_SUFFIXES:
                name = name.removesuffix(suffix)
            found.append(Submission(name, entry))
    return found


def lab_modules(submission: Submission, lab: Lab, scratch: Path) -> dict[str, bytes]:
    """The student's version of each lab module it has (the rest stays a stub)."""
    root = submission.source.resolve()
    if submission.is_archive:
        root = scratch / "unpacked"
        root.mkdir()
        _unpack(submission.source, root)
    practice = _practice_root(root)
    modules = {}
    for module in lab.lab_modules:
        path = practice / module
        if path.is_symlink():
            raise InvalidSubmission(f"{module} is a symbolic link; submit the file itself")
        if path.is_file():
            if path.stat().st_size > MAX_MODULE_BYTES:
                raise InvalidSubmission(f"{module} is larger than {MAX_MODULE_BYTES} bytes")
            modules[module] = path.read_bytes()
    return modules


def _practice_root(root: Path) -> Path:
    """The folder holding src/picourse/coding_tools, at the top or a few levels down."""
    candidates = [
        root,
        *[p for p in root.glob("*") if p.is_dir()],
        *[p for p in root.glob("*/*") if p.is_dir()],
    ]
    for candidate in candidates:
        if (candidate / PACKAGE).is_dir() and not (candidate / PACKAGE).is_symlink():
            return candidate
    raise InvalidSubmission(f"no {PACKAGE}/ found: submit the practice directory")


def _unpack(archive: Path, target: Path) -> None:
    try:
        if archive.name.endswith(".zip"):
            _unpack_zip(archive, target)
        else:
            _unpack_tar(archive, target)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as error:
        raise InvalidSubmission(f"cannot unpack {archive.name}: {error}") from None


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise InvalidSubmission(f"archive entry {name!r} points outside the submission")
    return path


def _unpack_zip(archive: Path, target: Path) -> None:
    total = 0
    with zipfile.ZipFile(archive) as bundle:
        members = bundle.infolist()
        if len(members) > MAX_FILES:
            raise InvalidSubmission(f"archive holds more than {MAX_FILES} entries")
        for member in members:
            path = _safe_member(member.filename)
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise InvalidSubmission(f"archive entry {member.filename!r} is a link")
            if member.is_dir():
                (target / path).mkdir(parents=True, exist_ok=True)
                continue
            total += member.file_size
            if total > MAX_TOTAL_BYTES:
                raise InvalidSubmission(f"archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            with bundle.open(member) as source, open(target / path, "wb") as sink:
                copied = 0
                while chunk := source.read(1 << 16):
                    copied += len(chunk)
                    if copied > member.file_size or copied > MAX_TOTAL_BYTES:
                        raise InvalidSubmission("archive entry larger than it claims")
                    sink.write(chunk)


def _unpack_tar(archive: Path, target: Path) -> None:
    total = 0
    with tarfile.open(archive, "r:*") as bundle:
        for count, member in enumerate(bundle, start=1):
            if count > MAX_FILES:
                raise InvalidSubmission(f"archive holds more than {MAX_FILES} entries")
            path = _safe_member(member.name)
            if member.isdir():
                (target / path).mkdir(parents=True, exist_ok=True)
                continue
            if not member.isfile():
                raise InvalidSubmission(f"archive entry {member.name!r} is a link or device")
            total += member.size
            if total > MAX_TOTAL_BYTES:
                raise InvalidSubmission(f"archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
            source = bundle.extractfile(member)
            if source is None:
                continue
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            with source, open(target / path, "wb") as sink:
                sink.write(source.read(member.size))
