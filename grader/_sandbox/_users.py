"""Which unprivileged user a job runs as (when the grader is root), and what it can reach.

A uid is one job's alone while the job runs: it is claimed with a lock that lives as long
as the grader holding it (two graders on one machine never share a uid; a crashed grader's
uids become free), it is handed out only when it names no user and runs no process, and it
is retired for good when one of its job's processes survives the sweep. Each claimed uid
also gets cgroups where the machine offers writable ones: pids, so the process limit holds
whatever the job's processes do; memory, so that all of a job's processes and its
private /tmp (a tmpfs: memory too) together never take the memory a neighbouring job or
the grader needs (the address-space limit holds each process, not their number); and cpu,
so that a job's processes together get one job's share of the cores, however many spin.
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

from grader._sandbox._limits import Limits
from grader._sandbox._sweep import end_cgroup, end_uid

# A range no distribution or systemd hands out (its docs list 1879048192-2147483647 as
# unused: below it are container ranges, above it tools that read uids as signed).
FIRST_UID = 1_900_000_000
UID_RANGE = 100_000
# Root's own place for locks: /run/lock on Linux, /var/run on macOS.
LOCK_DIR = next(p for p in (Path("/run/lock"), Path("/var/run")) if p.is_dir()) / "grader-uids"
# cgroup v1 mounts a hierarchy per controller below it (pids/, memory/); v2 is one tree.
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The file that holds a job to its limit, by controller and cgroup version.
_LIMIT_FILES = {
    "pids": {"v1": "pids.max", "v2": "pids.max"},
    "memory": {"v1": "memory.limit_in_bytes", "v2": "memory.max"},
    "cpu": {"v1": "cpu.shares", "v2": "cpu.weight"},
}
# Every job's CPU share: the default weight, the same for all. What counts is that each job
# is one group: the scheduler shares the cores between groups, not between processes, so a
# job that runs a hundred busy processes gets no more CPU than a neighbour running one.
_CPU_WEIGHT = {"v1": 1024, "v2": 100}


class JobUser(NamedTuple):
    uid: int
    gid: int
    cgroups: tuple[Path, ...] = ()  # cgroups the job's first process joins
    limited: tuple[str, ...] = ()  # the controllers they hold it to: "pids", "memory", "cpu"


class UserPool:
    """One unprivileged uid per parallel job when the grader runs as root, else nothing
    (a normal user's jobs get a user namespace each from bubblewrap)."""

    def __init__(
        self,
        size: int,
        processes: int = Limits.processes,
        memory_bytes: int = Limits.job_memory_bytes,
    ) -> None:
        self._root = os.geteuid() == 0
        self._limits: dict[str, int | None] = {
            "pids": processes,
            "memory": memory_bytes,
            "cpu": None,  # the default weight (_CPU_WEIGHT)
        }
        self._size = max(1, size)
        self._free: queue.SimpleQueue[JobUser | None] = queue.SimpleQueue()
        self._locks: dict[int, IO[bytes]] = {}
        self._mutex = threading.Lock()
        self._next = FIRST_UID
        claimed = [self._claim() if self._root else None for _ in range(self._size)]
        for taken in claimed:
            self._free.put(taken)
        # Whether each job's processes together get one job's share of the cores (a cpu
        # cgroup each: root, where writable); without it, a job that runs many busy
        # processes takes the cores from its neighbours.
        self.isolates_cpu = all(t is not None and "cpu" in t.limited for t in claimed)
        # Whether every job runs as one uid (a normal user's, the grader's own): its jobs
        # share the kernel's per-user counters (see grader/_shared_counters.py).
        self.shares_uid = not self._root

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
                for group in taken.cgroups:
                    cleared = end_cgroup(group) and cleared
                if cleared:  # else the lock stays held: that uid is out of use for good
                    self._release(taken.uid)

    def _reset(self, user: JobUser | None) -> JobUser | None:
        """End whatever the job left behind; a uid with a survivor is never reused."""
        if user is None:
            return None
        clean = end_uid(user.uid)
        for group in user.cgroups:
            clean = end_cgroup(group) and clean
        if clean:
            return JobUser(user.uid, user.gid, *_job_cgroups(user.uid, self._limits))
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
                    return JobUser(uid, uid, *_job_cgroups(uid, self._limits))
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


def _job_cgroups(
    uid: int, limits: dict[str, int | None]
) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """Fresh cgroups for ``uid``, one per controller (cgroup v1) or one for all (v2), each
    limited, where the machine has them writable; a controller it cannot set is left out
    (the per-uid process limit and the per-process address-space limit still hold)."""
    groups: list[Path] = []
    limited: list[str] = []
    for controller, limit in limits.items():
        found = _controller_root(controller)
        if found is None:
            continue
        root, version = found
        group = root / f"grader-{uid}"
        try:
            if group not in groups:
                if group.exists():
                    end_cgroup(group)
                group.mkdir(exist_ok=True)
            value = _CPU_WEIGHT[version] if limit is None else limit
            (group / _LIMIT_FILES[controller][version]).write_text(str(value))
        except OSError:
            if group not in groups:
                with contextlib.suppress(OSError):
                    group.rmdir()
            continue
        if group not in groups:
            groups.append(group)
        limited.append(controller)
    return tuple(groups), tuple(limited)


def _controller_root(controller: str) -> tuple[Path, str] | None:
    """cgroup v1's hierarchy of ``controller``, or a v2 root that hands it down."""
    if (CGROUP_ROOT / controller / "cgroup.procs").exists():
        return CGROUP_ROOT / controller, "v1"
    try:
        if controller in (CGROUP_ROOT / "cgroup.subtree_control").read_text().split():
            return CGROUP_ROOT, "v2"
    except OSError:
        pass
    return None


def describe(user: JobUser | None) -> str:
    """How a sandboxed job's processes are kept apart from every other job's."""
    if user is None:
        return "a user namespace of its own"
    cgroups = f" and {' and '.join(user.limited)} cgroups" if user.limited else ""
    return f"uid {user.uid} of its own{cgroups}"


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
