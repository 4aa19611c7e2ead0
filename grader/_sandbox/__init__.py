"""Run a grading directory's tests in a separate, limited process and collect the plugin's
signed records.

Isolation, from the outside in: a new session (so the whole group can be killed), a wall
limit enforced by this process, resource limits (address space, processes, file size, no
core files), a scrubbed environment with a temporary HOME, an unprivileged user when the
grader runs as root (root is exempt from the process limit), and, when bubblewrap is
available, no network and a read-only view of the filesystem in which only the grading
directory is writable and solutions, submissions and reports are hidden.
"""

from grader._sandbox._limits import Limits
from grader._sandbox._run import (
    Judge,
    RunOutcome,
    SandboxError,
    SandboxMode,
    bwrap_available,
    run_tests,
)
from grader._sandbox._sweep import RUN_MARKER
from grader._sandbox._users import UserPool

__all__ = [
    "RUN_MARKER",
    "Judge",
    "Limits",
    "RunOutcome",
    "SandboxError",
    "SandboxMode",
    "UserPool",
    "bwrap_available",
    "run_tests",
]
