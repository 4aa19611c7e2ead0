"""Resource limits of a grading run, set in the child between fork and exec."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 180
    test_seconds: float = 60
    memory_bytes: int = 1 << 30  # address space; the reference solution needs far less
    processes: int = 128
    file_bytes: int = 1 << 30


def apply_limits(limits: Limits, user: tuple[int, int] | None) -> None:
    """Runs in the child between fork and exec."""
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    if user is not None:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
