"""Tell a job that timed out by itself from one its neighbours may have starved: how long
the machine's tasks waited for a CPU during its run (Linux pressure stall information)."""

from __future__ import annotations

import time
from pathlib import Path

from coursekit.runner import over_a_time_limit
from grader.model import SubmissionResult

PSI_CPU = Path("/proc/pressure/cpu")
# A timeout counts as possibly the neighbours' doing when, for at least this share of the
# job's run, some task on the machine waited for a CPU (where the kernel tells: else always).
STARVED_STALL_SHARE = 0.5


def cpu_stall_seconds() -> float | None:
    """Seconds since boot during which at least one task waited for a CPU; None where the
    kernel keeps no such count (macOS, Linux without PSI)."""
    try:
        for line in PSI_CPU.read_text().splitlines():
            kind, *fields = line.split()
            if kind == "some":
                return int(dict(f.split("=", 1) for f in fields)["total"]) / 1e6
    except (OSError, ValueError, KeyError):
        pass
    return None


class StallMeter:
    """From its making: the share of the time in which some task waited for a CPU."""

    def __init__(self) -> None:
        self._stalled = cpu_stall_seconds()
        self._started = time.monotonic()

    def share(self) -> float | None:
        stalled = cpu_stall_seconds()
        span = time.monotonic() - self._started
        if self._stalled is None or stalled is None:
            return None
        return min(1.0, (stalled - self._stalled) / span) if span > 0 else 0.0


def maybe_starved(result: SubmissionResult, stall_share: float | None) -> bool:
    """A run or a test that timed out, or a test failed by a bound on wall-clock time,
    while the machine's CPUs were contended."""
    timed_out = result.status == "timeout" or any(
        over_a_time_limit(test.message) for test in result.tests if test.status == "failed"
    )
    return timed_out and (stall_share is None or stall_share >= STARVED_STALL_SHARE)
