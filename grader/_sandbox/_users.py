"""Which unprivileged user a job runs as, and what that user can reach."""

from __future__ import annotations

import contextlib
import os
import queue
import sys
from collections.abc import Iterator
from pathlib import Path


class UserPool:
    """Unprivileged uids for parallel jobs when the grader runs as root, else nothing."""

    FIRST_UID = 61000

    def __init__(self, size: int) -> None:
        self._free: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
        root = os.geteuid() == 0
        for slot in range(max(1, size)):
            self._free.put((self.FIRST_UID + slot, self.FIRST_UID + slot) if root else None)

    @contextlib.contextmanager
    def user(self) -> Iterator[tuple[int, int] | None]:
        taken = self._free.get()
        try:
            yield taken
        finally:
            self._free.put(taken)


def interpreter_paths() -> list[Path]:
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent}
    return sorted(p.resolve() for p in paths)


def closed_ancestors(paths: list[Path]) -> list[Path]:
    """Directories on the way to ``paths`` that others may not traverse."""
    closed = set()
    for path in paths:
        for ancestor in reversed(path.parents):
            if ancestor != Path("/") and not os.stat(ancestor).st_mode & 0o001:
                closed.add(ancestor)
                break
    return sorted(closed)


def give_to(directory: Path, user: tuple[int, int]) -> None:
    for root, dirs, files in os.walk(directory):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), *user)
    os.chown(directory, *user)
