"""Run a grading directory's tests in a separate, confined process and collect the plugin's
signed records.

Isolation, from the outside in: bubblewrap (required unless the instructor asks for
``unsafe-none`` by name) gives each run new user, pid, network, IPC and UTS namespaces and an
allowlist view of the filesystem (system directories and the interpreter read-only, the
grading directory read-only, a private size-limited /tmp) and a seccomp filter that refuses
the kernel keyrings (not namespaced); as root, each parallel job runs as its own
unprivileged uid with its own pids, memory and cpu cgroups (where writable); the process
limit is counted per job (per uid or per user namespace), never shared, a job's memory,
its /tmp included, is capped as a whole, and its processes together get one job's share
of the cores; a wall limit is enforced by the grader; every run dies with the grader; and a
uid is reused only once none of its processes is left.
"""

from grader._sandbox._check import require_sandbox
from grader._sandbox._limits import Limits
from grader._sandbox._run import (
    Judge,
    RunOutcome,
    SandboxError,
    SandboxMode,
    bwrap_available,
    run_tests,
    share_read_only,
)
from grader._sandbox._sweep import RUN_MARKER, end_every_run
from grader._sandbox._users import JobUser, UserPool

__all__ = [
    "RUN_MARKER",
    "JobUser",
    "Judge",
    "Limits",
    "RunOutcome",
    "SandboxError",
    "SandboxMode",
    "UserPool",
    "bwrap_available",
    "end_every_run",
    "require_sandbox",
    "run_tests",
    "share_read_only",
]
