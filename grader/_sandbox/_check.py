"""Whether the sandbox works here, proven before any submission runs.

A grading run with a sandbox that silently does not hold is worse than none: the instructor
is told what to install or enable instead, and runs without a sandbox only when asked for
by name (every result then records it in its ``isolation`` field).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from coursekit.layout import SOLUTIONS
from grader._sandbox._argv import as_user, bwrap_prefix, inner_limits, visible_roots
from grader._sandbox._limits import Limits
from grader._sandbox._run import (
    SandboxError,
    SandboxMode,
    bwrap_available,
    require_reachable_interpreter,
)
from grader._sandbox._seccomp import FilterUnavailable, denied_calls_filter
from grader._sandbox._users import JobUser

INSTALL = (
    "install bubblewrap and util-linux (Debian/Ubuntu: apt-get install bubblewrap util-linux; "
    "Fedora: dnf install bubblewrap util-linux)"
)
USERNS = (
    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on "
    "Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0), or grade as root"
)
UNSAFE = "or, knowing student code then runs unconfined, pass --sandbox unsafe-none"
# What the job must be able to do inside the view: start the interpreter and import pytest.
PROBE = "import pytest, sys; sys.exit(0 if open('/proc/1/cmdline').read() else 1)"


def require_sandbox(mode: SandboxMode, limits: Limits, user: JobUser | None) -> None:
    """Raise SandboxError saying what to do unless ``mode`` runs safely here."""
    if mode == "unsafe-none":
        require_reachable_interpreter(user)
        return
    if sys.platform != "linux" or not bwrap_available():
        raise SandboxError(f"no sandbox here: {INSTALL}; {UNSAFE}")
    solutions = SOLUTIONS.resolve()
    for root in visible_roots():
        if solutions.is_relative_to(root):
            raise SandboxError(
                f"every job would see the solutions: {solutions} lies in {root}, which the "
                "sandbox shows to jobs (the system or the interpreter); keep the course "
                "checkout and the virtual environment apart (a venv inside the checkout is fine)"
            )
    try:
        seccomp_fd = denied_calls_filter()
    except FilterUnavailable as error:
        raise SandboxError(
            f"the sandbox's seccomp filter cannot be built here ({error}): install libseccomp "
            "(Debian/Ubuntu: apt-get install libseccomp2; Fedora: dnf install libseccomp) and "
            f"the kit's dependencies (pip install -e .); {UNSAFE}"
        ) from None
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as directory:
        workdir = Path(directory)
        workdir.chmod(0o755)
        command = bwrap_prefix(workdir, workdir, limits, seccomp_fd)
        command += as_user(user) if user is not None else []
        command += [*inner_limits(limits), sys.executable, "-I", "-c", PROBE]
        try:
            probe = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                pass_fds=(seccomp_fd,),
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SandboxError(f"bubblewrap cannot start here ({error}): {INSTALL}") from None
        finally:
            os.close(seccomp_fd)
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        if said.startswith("bwrap:"):
            raise SandboxError(f"the sandbox does not work here ({said}): {USERNS}; {UNSAFE}")
        raise SandboxError(
            f"inside the sandbox the interpreter fails ({said}): it sees only the "
            "interpreter's own prefixes, so install pytest and the kit's dependencies in the "
            "virtual environment that runs the grader (pip install -e '.[dev]')"
        )
