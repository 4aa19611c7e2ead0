"""A child process run in a session of its own, so that whatever it leaves running ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest


def communicate_in_own_session(
    command: list[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """``command``'s stdout and stderr; its process group is killed afterwards, also when
    it hangs or fails (the group may hold workers after the command itself has exited)."""
    completed = _run_in_own_session(command, timeout=timeout, env=env)
    return completed.stdout, completed.stderr


def json_from_reference(src: Path, script: str, *args: str, timeout: float, hung: str) -> Any:
    """What ``script``, run with the reference package ``src`` importable, printed last as
    JSON; it must exit 0. ``hung``: the failure when it outlasts ``timeout`` (a child can be
    stopped where a regular expression holding the GIL or a hung call could not)."""
    try:
        completed = _run_in_own_session(
            [sys.executable, "-c", script, *args],
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(src)},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(hung)
    out = completed.stdout.strip()
    assert completed.returncode == 0 and out, f"the script failed: {completed.stderr[-3000:]}"
    return json.loads(out.splitlines()[-1])


def _run_in_own_session(
    command: list[str], *, timeout: float, env: Mapping[str, str] | None
) -> subprocess.CompletedProcess[str]:
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
        return subprocess.CompletedProcess(command, child.returncode, out, err)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
