"""Unpack a submitted archive within bounds: every byte, name, member and header it reads is
counted and capped, so a small archive can never cost the grader much memory, disk or time."""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import stat
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")
MAX_FILES = 5000
MAX_TOTAL_BYTES = 100 << 20
MAX_HEADER_BYTES = 64 << 10  # one long-name or pax header; real ones are a few hundred bytes
# What a tar stream of MAX_FILES members and MAX_TOTAL_BYTES of content can take in all.
MAX_STREAM_BYTES = MAX_TOTAL_BYTES + (MAX_FILES + 4) * 2 * tarfile.BLOCKSIZE + MAX_HEADER_BYTES
PACKAGE = PurePosixPath("src/picourse/coding_tools")
# Errors of this machine, not of the archive: the grader's own failure, never the student's.
_HOST_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.ENOMEM}


class InvalidSubmission(Exception):
    """The submission cannot be graded; the message says why."""


def archive_stem(name: str) -> str | None:
    """The student's name for an archive's file name, or None when it is no archive."""
    lowered = name.lower()
    for suffix in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True):
        if lowered.endswith(suffix):
            return name[: -len(suffix)]
    return None


def unpack(archive: Path, target: Path, shown: str = "") -> None:
    """Unpack the entries under a ``src/picourse/coding_tools`` folder (the rest is never
    graded), after checking every entry of the archive. ``shown``: the archive's name in
    reasons (the submitted name of a copy)."""
    shown = shown or archive.name
    try:
        if archive.stat().st_size > MAX_STREAM_BYTES:
            raise InvalidSubmission(f"the archive is larger than {MAX_STREAM_BYTES >> 20} MiB")
        if shown.lower().endswith(".zip"):
            _unpack_zip(archive, target, shown)
        else:
            _unpack_tar(archive, target)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        tarfile.TarError,
        EOFError,
        RuntimeError,  # an encrypted zip entry
        NotImplementedError,  # an unknown zip compression method
        ValueError,
        zlib.error,
        lzma.LZMAError,
    ) as error:
        raise InvalidSubmission(f"cannot unpack {shown}: {error}") from None
    except OSError as error:
        if error.errno in _HOST_ERRNOS:
            raise
        raise InvalidSubmission(f"cannot unpack {shown}: {error}") from None


def _entry_path(name: str) -> PurePosixPath | None:
    """The entry's path inside the submission; None for the archive's own root (``./``)."""
    if len(name) > 1024:
        raise InvalidSubmission(f"archive entry name longer than 1024 characters: {name[:80]!r}…")
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise InvalidSubmission(f"archive entry {name!r} points outside the submission")
    return path if path.parts else None


def _wanted(path: PurePosixPath) -> bool:
    """Inside (or on the way to) a lab package at most two folders down."""
    parts, package = path.parts, PACKAGE.parts
    return any(
        parts[i : i + len(package)] == package[: len(parts) - i] for i in range(min(3, len(parts)))
    )


def _zip_entry_count(archive: Path, shown: str) -> int:
    """The count the end-of-central-directory record declares, read before zipfile loads the
    whole central directory into memory."""
    with open(archive, "rb") as handle:
        handle.seek(0, io.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - (22 + 0xFFFF)))
        tail = handle.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise InvalidSubmission(f"cannot unpack {shown}: no end-of-archive record")
    _, _, _, _, entries, directory_size, _, _ = struct.unpack("<4s4H2LH", tail[at : at + 22])
    if entries == 0xFFFF or directory_size == 0xFFFFFFFF:  # a zip64 archive: far too big here
        raise InvalidSubmission(f"archive holds more than {MAX_FILES} entries")
    return int(entries)


def _unpack_zip(archive: Path, target: Path, shown: str) -> None:
    if _zip_entry_count(archive, shown) > MAX_FILES:
        raise InvalidSubmission(f"archive holds more than {MAX_FILES} entries")
    total = 0
    with zipfile.ZipFile(archive) as bundle:
        members = bundle.infolist()
        if len(members) > MAX_FILES:
            raise InvalidSubmission(f"archive holds more than {MAX_FILES} entries")
        for member in members:
            path = _entry_path(member.filename)
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise InvalidSubmission(f"archive entry {member.filename!r} is a link")
            if path is None or member.is_dir():
                continue
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                raise InvalidSubmission(f"archive entry {member.filename!r} is not a file")
            total += member.file_size
            if total > MAX_TOTAL_BYTES:
                raise InvalidSubmission(f"archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
            if _wanted(path):
                with bundle.open(member) as source:
                    _copy(source, target / path, member.file_size)


class _BoundedTarInfo(tarfile.TarInfo):
    """Refuses an oversized long-name or pax header before tarfile reads it into memory."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise InvalidSubmission(f"archive entry {self.name!r} is a sparse file")
        headers = (
            tarfile.GNUTYPE_LONGNAME,
            tarfile.GNUTYPE_LONGLINK,
            tarfile.XHDTYPE,
            tarfile.XGLTYPE,
            tarfile.SOLARIS_XHDTYPE,
        )
        if self.type in headers and self.size > MAX_HEADER_BYTES:
            raise InvalidSubmission(
                f"archive has a {self.size}-byte name header (at most {MAX_HEADER_BYTES})"
            )
        member: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        return member


class _CappedReader(io.RawIOBase):
    """A decompressed stream that stops at ``MAX_STREAM_BYTES`` however it is read."""

    def __init__(self, stream: io.BufferedIOBase) -> None:
        self._stream = stream
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        room = MAX_STREAM_BYTES - self._read
        view = memoryview(buffer)[: room + 1]
        count = self._stream.readinto(view)
        self._read += count
        if self._read > MAX_STREAM_BYTES:
            raise InvalidSubmission(f"archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
        return count


def _decompressed(raw: io.BufferedReader) -> io.BufferedIOBase:
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw)
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


def _unpack_tar(archive: Path, target: Path) -> None:
    total = 0
    with open(archive, "rb") as raw, _decompressed(raw) as plain:
        stream = io.BufferedReader(_CappedReader(plain), 1 << 16)
        # Stream mode reads the archive once, front to back, through the cap.
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_BoundedTarInfo) as bundle:
            for count, member in enumerate(bundle, start=1):
                if count > MAX_FILES:
                    raise InvalidSubmission(f"archive holds more than {MAX_FILES} entries")
                path = _entry_path(member.name)
                if path is None or member.isdir():
                    continue
                if not member.isfile():
                    raise InvalidSubmission(f"archive entry {member.name!r} is a link or device")
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise InvalidSubmission(f"archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
                source = bundle.extractfile(member) if _wanted(path) else None
                if source is not None:
                    with source:
                        _copy(source, target / path, member.size)


def _copy(source: IO[bytes], destination: Path, declared: int) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    with open(destination, "wb") as sink:
        copied = 0
        while chunk := source.read(1 << 16):
            copied += len(chunk)
            if copied > declared:
                raise InvalidSubmission(f"archive entry {destination.name!r} larger than it claims")
            sink.write(chunk)
