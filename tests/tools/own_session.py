"""A child process run in a session of its own, so that whatever it leaves running ends."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping


def communicate_in_own_session(
    command: list[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """``command``'s stdout and stderr; its process group is killed afterwards, also when
    it hangs or fails (the group may hold workers after the command itself has exited)."""
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        return child.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
