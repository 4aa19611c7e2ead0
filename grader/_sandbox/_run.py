"""Run a grading directory's tests in a separate, limited process."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from grader._judge import plugin as judge_plugin
from grader._sandbox._argv import as_user, bwrap_prefix, inner_limits
from grader._sandbox._channel import keep_tail, read_lines, verify
from grader._sandbox._limits import Limits, apply_limits
from grader._sandbox._sweep import RUN_MARKER, kill_everything
from grader._sandbox._users import (
    JobUser,
    closed_ancestors,
    describe,
    give_to,
    interpreter_paths,
)

SandboxMode = Literal["auto", "bwrap", "unsafe-none"]
PACKAGE = "grader_judge"  # the name of grader/_judge next to the judge


@dataclass
class RunOutcome:
    isolation: str
    records: list[dict[str, Any]] = field(default_factory=list)
    forged: int = 0
    timed_out: bool = False
    exit_code: int | None = None
    output_tail: str = ""

    @property
    def ended(self) -> bool:
        return any(r.get("type") == "end" for r in self.records)


@dataclass(frozen=True)
class Judge:
    """The pristine practice directory the judge runs, and the dotted names of the modules
    students write (never imported by the judge)."""

    pristine: Path
    student_modules: list[str]


class SandboxError(Exception):
    """bubblewrap was asked for but cannot run here."""


def bwrap_available() -> bool:
    return all(shutil.which(tool) for tool in ("bwrap", "setpriv", "prlimit"))


def run_tests(
    workdir: Path,
    scratch: Path,
    limits: Limits,
    mode: SandboxMode,
    user: JobUser | None,
    judge: Judge | None = None,
) -> RunOutcome:
    """``user``: the job's own user (when the grader is root), one per parallel job, so that
    one submission's process limit never counts another's processes.

    With ``judge``, the tests are the pristine copy's, run by the judge, and ``workdir`` is
    where the host imports the student's modules; without it, ``workdir``'s own tests run
    in one process (for trusted code only)."""
    use_bwrap = mode != "unsafe-none"
    if use_bwrap and not bwrap_available():
        raise SandboxError(
            "grading needs bubblewrap (bwrap) and setpriv and prlimit (util-linux): "
            "apt-get install bubblewrap util-linux"
        )
    plugin_dir = scratch / "plugin"
    plugin_dir.mkdir(mode=0o755)
    package = Path(judge_plugin.__file__).parent
    shutil.copytree(package, plugin_dir / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    tests = ["tests"]
    if judge is not None:
        tree = plugin_dir / "judge"
        shutil.copytree(judge.pristine, tree)
        tests = ["-c", str(tree / "pyproject.toml"), "--rootdir", str(tree), str(tree / "tests")]
    _readable(plugin_dir)
    home = workdir / ".home"
    home.mkdir()
    if user is not None and not use_bwrap and closed_ancestors(interpreter_paths()):
        user = None  # unsafe mode only, and recorded: the interpreter is out of its reach
    if user is not None:
        give_to(workdir, user)
    read_end, write_end = os.pipe()
    key = secrets.token_bytes(32)
    marker = secrets.token_hex(8)
    started = time.time()
    env = {
        RUN_MARKER: marker,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(plugin_dir),
        "PYTHONDONTWRITEBYTECODE": "1",
        judge_plugin.CHANNEL_FD: str(write_end),
        judge_plugin.CHANNEL_KEY: key.hex(),
    }
    if judge is not None:
        env[judge_plugin.JUDGE] = json.dumps(
            {
                "student": judge.student_modules,
                "src": str(workdir / "src"),
                "workdir": str(workdir),
                "tests": str(plugin_dir / "judge" / "tests"),
                "marker": [RUN_MARKER, marker],
                "timeout": limits.test_seconds,
            }
        )
    command = [
        sys.executable,
        "-P",  # never the working directory (the student's) on the judge's sys.path
        "-m",
        "pytest",
        "-p",
        f"{PACKAGE}.plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "--tb=no",
        "-o",
        "addopts=",
        "--continue-on-collection-errors",
        f"--timeout={limits.test_seconds:g}",
        *tests,
    ]
    drop_in_child = user
    if use_bwrap:
        # bwrap starts as root so that it can mount what it needs; setpriv then drops to
        # the job's user just before Python starts.
        prefix = bwrap_prefix(workdir, plugin_dir, limits)
        if user is not None:
            prefix += as_user(user)
            drop_in_child = None
        command = prefix + inner_limits(limits) + command
    isolation = f"bwrap ({describe(user)})" if use_bwrap else "unsafe: no sandbox (rlimits only)"
    if os.geteuid() == 0 and user is None:
        isolation += " (as root: no process-count limit)"
    outcome = RunOutcome(isolation=isolation)
    try:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            start_new_session=True,
            preexec_fn=lambda: apply_limits(limits, user, drop=drop_in_child is not None),
        )
    finally:
        os.close(write_end)
    lines: list[bytes] = []
    tail = bytearray()
    readers = [
        threading.Thread(target=read_lines, args=(read_end, lines), daemon=True),
        threading.Thread(target=keep_tail, args=(process.stdout, tail), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        outcome.exit_code = process.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        outcome.timed_out = True
    finally:
        kill_everything(process, marker, started)
        outcome.exit_code = process.wait() if outcome.exit_code is None else outcome.exit_code
        for reader in readers:
            reader.join(timeout=5)
        with contextlib.suppress(OSError):
            os.close(read_end)
    outcome.output_tail = tail.decode("utf-8", "replace")
    for line in lines:
        record = verify(line, key)
        if record is None:
            outcome.forged += 1
        else:
            outcome.records.append(record)
    return outcome


def _readable(directory: Path) -> None:
    """The judge's files: readable by the job's user, writable only by the grader."""
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
