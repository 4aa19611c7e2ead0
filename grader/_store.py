"""Which results in OUT the grader trusts, and the credit held back for review.

A result counts (for resuming, for class reports, for release) only when it carries the
grader's seal: an HMAC of its exact bytes with a key kept in OUT/.grader/key (mode 0600, in
a 0700 folder no job can see or write). Whatever a result says about itself is never
trusted: a result.json written or edited by anyone else is simply graded again.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from grader.model import SubmissionResult

PRIVATE = ".grader"


class ResultStore:
    def __init__(self, out: Path) -> None:
        self.out = out
        self._private = out / PRIVATE
        self._private.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self._private, 0o700)
        for folder in ("seals", "held"):
            (self._private / folder).mkdir(mode=0o700, exist_ok=True)
        self._key = _key(self._private / "key")

    def result_path(self, student: str) -> Path:
        return self.out / "submissions" / student / "result.json"

    def seal(self, result: SubmissionResult) -> None:
        """Vouch for ``result``; done before its result.json is written, so that a grader
        stopped in between leaves a result that is simply graded again."""
        _write_private(self._private / "seals" / result.student, self._seal_of(result))

    def load(self, student: str) -> SubmissionResult | None:
        """The result the grader wrote for ``student``, or None (missing, unsealed, edited)."""
        return self._verified(self.result_path(student), self._private / "seals" / student)

    def hold(self, student: str, credited: SubmissionResult) -> None:
        """Keep the credit a flagged run earned, for ``release`` after review."""
        folder = self._private / "held"
        _write_private(folder / f"{student}.json", credited.to_json().encode("utf-8"))
        _write_private(folder / f"{student}.seal", self._seal_of(credited))

    def held(self, student: str) -> SubmissionResult | None:
        folder = self._private / "held"
        return self._verified(folder / f"{student}.json", folder / f"{student}.seal")

    def forget_held(self, student: str) -> None:
        for suffix in (".json", ".seal"):
            with contextlib.suppress(FileNotFoundError):
                (self._private / "held" / f"{student}{suffix}").unlink()

    def students(self) -> list[str]:
        folder = self.out / "submissions"
        if not folder.is_dir():
            return []
        return sorted(e.name for e in folder.iterdir() if e.is_dir() and e.name[0] != ".")

    def _verified(self, path: Path, seal_path: Path) -> SubmissionResult | None:
        try:
            result = _parse(path.read_bytes())
            seal = seal_path.read_bytes()
        except OSError:
            return None
        if result is None or not hmac.compare_digest(seal, self._seal_of(result)):
            return None
        return result

    def _seal_of(self, result: SubmissionResult) -> bytes:
        """Over the result's canonical text, whatever bytes a writer chose for it."""
        data = result.to_json().encode("utf-8", "surrogatepass")
        return hmac.new(self._key, data, hashlib.sha256).hexdigest().encode()


def _key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        if path.is_symlink() or path.stat().st_mode & 0o077:
            raise PermissionError(f"{path} must be a private file (mode 0600)") from None
        return bytes.fromhex(path.read_text().strip())
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "w") as file:
        file.write(key.hex())
    return key


def _write_private(path: Path, data: bytes) -> None:
    # Of a fixed length: the final name may already be near the file system's limit.
    temporary = path.with_name(f".tmp-{secrets.token_hex(8)}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _parse(data: bytes) -> SubmissionResult | None:
    try:
        return SubmissionResult.from_json(data.decode("utf-8"))
    except (ValueError, TypeError, KeyError):
        return None
