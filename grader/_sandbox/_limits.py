"""Resource limits of a grading run, set in the child between fork and exec."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import resource
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader._sandbox._users import JobUser

_PR_SET_PDEATHSIG = 1
# Loaded before any fork: only the call itself happens in the child.
_prctl = ctypes.CDLL(ctypes.util.find_library("c")).prctl if sys.platform == "linux" else None


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 180
    test_seconds: float = 60
    memory_bytes: int = 1 << 30  # address space; the reference solution needs far less
    # All of a job's processes and its private /tmp together, where a memory cgroup is
    # writable (the grader as root on Linux): what a job can never take from its neighbours.
    job_memory_bytes: int = 3 << 30
    processes: int = 128
    # Descriptors per process: a job's processes together hold at most processes x this
    # many of the machine's open files (fs.file-max), not the millions the grader may have.
    open_files: int = 1024
    file_bytes: int = 1 << 30
    # The private /tmp of a sandboxed run: a cap on a tmpfs, not a reservation. The lab tests
    # keep their files until the run ends (64 MiB lines, 64 MB files, sparse files).
    disk_bytes: int = 4 << 30


def apply_limits(limits: Limits, user: JobUser | None, drop: bool) -> None:
    """Runs in the child between fork and exec. ``drop``: change to ``user`` here (without
    a sandbox; bubblewrap's runs change user inside and count processes per namespace)."""
    if _prctl is not None:
        # The run dies with the grader, even when the grader is killed with SIGKILL.
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for group in user.cgroups if user is not None else ():
        with contextlib.suppress(OSError):  # the per-uid and per-process limits still hold
            (group / "cgroup.procs").write_text(str(os.getpid()))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, most = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = limits.open_files if most == resource.RLIM_INFINITY else min(limits.open_files, most)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    if drop:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    if drop and user is not None:
        os.setgroups([])
        os.setgid(user.gid)
        os.setuid(user.uid)
