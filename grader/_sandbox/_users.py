"""Which unprivileged user a job runs as (when the grader is root), and what it can reach.

A uid is one job's alone while the job runs: it is claimed with a lock that lives as long
as the grader holding it (two graders on one machine never share a uid; a crashed grader's
uids become free), it is handed out only when it names no user and runs no process, and it
is retired for good when one of its job's processes survives the sweep. Each claimed uid
also gets a pids cgroup where the machine offers a writable one, so the process limit holds
whatever the job's processes do.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, NamedTuple

import psutil

from grader._sandbox._sweep import end_cgroup, end_uid

# A range no distribution or systemd hands out (its docs list 1879048192-2147483647 as
# unused: below it are container ranges, above it tools that read uids as signed).
FIRST_UID = 1_900_000_000
UID_RANGE = 100_000
# Root's own place for locks: /run/lock on Linux, /var/run on macOS.
LOCK_DIR = next(p for p in (Path("/run/lock"), Path("/var/run")) if p.is_dir()) / "grader-uids"
V1_PIDS = Path("/sys/fs/cgroup/pids")
V2_ROOT = Path("/sys/fs/cgroup")


class JobUser(NamedTuple):
    uid: int
    gid: int
    cgroup: Path | None  # a pids cgroup the job's first process joins, or None


class UserPool:
    """One unprivileged uid per parallel job when the grader runs as root, else nothing
    (a normal user's jobs get a user namespace each from bubblewrap)."""

    def __init__(self, size: int, processes: int = 128) -> None:
        self._root = os.geteuid() == 0
        self._processes = processes
        self._size = max(1, size)
        self._free: queue.SimpleQueue[JobUser | None] = queue.SimpleQueue()
        self._locks: dict[int, IO[bytes]] = {}
        self._mutex = threading.Lock()
        self._next = FIRST_UID
        for _ in range(self._size):
            self._free.put(self._claim() if self._root else None)

    @contextlib.contextmanager
    def user(self) -> Iterator[JobUser | None]:
        taken = self._free.get()
        try:
            yield taken
        finally:
            self._free.put(self._reset(taken))

    def __enter__(self) -> UserPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Free every uid this pool holds; its jobs must have ended."""
        while not self._free.empty():
            taken = self._free.get()
            if taken is not None:
                cleared = end_uid(taken.uid)
                if taken.cgroup is not None:
                    cleared = end_cgroup(taken.cgroup) and cleared
                if cleared:  # else the lock stays held: that uid is out of use for good
                    self._release(taken.uid)

    def _reset(self, user: JobUser | None) -> JobUser | None:
        """End whatever the job left behind; a uid with a survivor is never reused."""
        if user is None:
            return None
        clean = end_uid(user.uid)
        if user.cgroup is not None:
            clean = end_cgroup(user.cgroup) and clean
        if clean:
            return user._replace(cgroup=_pids_cgroup(user.uid, self._processes))
        return self._claim()  # the old lock stays held: that uid is out of use for good

    def _claim(self) -> JobUser:
        LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        if LOCK_DIR.stat().st_uid != 0 or LOCK_DIR.stat().st_mode & 0o077:
            raise PermissionError(f"{LOCK_DIR} must be root's and private (mode 0700)")
        with self._mutex:
            while self._next < FIRST_UID + UID_RANGE:
                uid, self._next = self._next, self._next + 1
                lock = open(LOCK_DIR / str(uid), "ab")  # noqa: SIM115 - held until released
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    lock.close()  # another grader's job runs as this uid
                    continue
                if not _taken(uid):
                    self._locks[uid] = lock
                    return JobUser(uid, uid, _pids_cgroup(uid, self._processes))
                lock.close()
        raise RuntimeError(
            f"no free uid left in {FIRST_UID}-{FIRST_UID + UID_RANGE - 1}: end the processes "
            "left running as these uids (ps -eo uid,pid,args) and grade again"
        )

    def _release(self, uid: int) -> None:
        with self._mutex:
            lock = self._locks.pop(uid, None)
        if lock is not None:
            lock.close()


def _taken(uid: int) -> bool:
    """A uid someone has, or that still runs a process: never ours to use (or to end)."""
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    return any(uid in (p.info["uids"] or ()) for p in psutil.process_iter(["uids"]))


def _pids_cgroup(uid: int, processes: int) -> Path | None:
    """A fresh pids cgroup for ``uid`` limited to ``processes``, where one is writable."""
    root = _pids_root()
    if root is None:
        return None
    group = root / f"grader-{uid}"
    try:
        if group.exists():
            end_cgroup(group)
        group.mkdir(exist_ok=True)
        (group / "pids.max").write_text(str(processes))
    except OSError:
        return None  # the per-uid process limit still holds
    return group


def _pids_root() -> Path | None:
    """cgroup v1's pids hierarchy, or a v2 root that hands the pids controller down."""
    if (V1_PIDS / "cgroup.procs").exists():
        return V1_PIDS
    try:
        if "pids" in (V2_ROOT / "cgroup.subtree_control").read_text().split():
            return V2_ROOT
    except OSError:
        pass
    return None


def describe(user: JobUser | None) -> str:
    """How a sandboxed job's processes are kept apart from every other job's."""
    if user is None:
        return "a user namespace of its own"
    cgroup = " and a pids cgroup" if user.cgroup is not None else ""
    return f"uid {user.uid} of its own{cgroup}"


def interpreter_paths() -> list[Path]:
    """What a job sees of this interpreter: its prefixes (a virtual environment's too)."""
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


def give_to(directory: Path, user: JobUser) -> None:
    for root, dirs, files in os.walk(directory):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), user.uid, user.gid)
    os.chown(directory, user.uid, user.gid)
