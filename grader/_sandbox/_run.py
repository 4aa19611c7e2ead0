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

from coursekit.runner import LAB_PYTEST_ENV
from grader._judge import plugin as judge_plugin
from grader._sandbox._argv import PRIVATE_TMP, as_user, bwrap_prefix, inner_limits
from grader._sandbox._channel import keep_tail, key_pipe, read_lines, verify
from grader._sandbox._limits import Limits, apply_limits
from grader._sandbox._seccomp import denied_calls_filter
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
    # From the start of the test process until it and everything it started have ended.
    process_seconds: float = 0.0

    @property
    def ended(self) -> bool:
        return any(r.get("type") == "end" for r in self.records)


@dataclass(frozen=True)
class Judge:
    """The pristine practice directory the judge runs, and the dotted names of the modules
    students write (never imported by the judge)."""

    pristine: Path
    student_modules: list[str]
    # The student's modules by path in the practice directory (``src/picourse/...``).
    files: dict[str, bytes] = field(default_factory=dict)
    # The test files to run, by name in the pristine ``tests`` folder; empty: all of them.
    test_files: tuple[str, ...] = ()


class SandboxError(Exception):
    """bubblewrap was asked for but cannot run here."""


def bwrap_available() -> bool:
    return all(shutil.which(tool) for tool in ("bwrap", "setpriv", "prlimit"))


def require_reachable_interpreter(user: JobUser | None) -> None:
    """Without bubblewrap a job's own user must reach the interpreter itself. When it cannot,
    the only way left would be to run the student's code as the grader (root): refused, for
    it could then rewrite the grader and its results."""
    closed = closed_ancestors(interpreter_paths()) if user is not None else []
    if closed:
        raise SandboxError(
            "without bubblewrap the student's code runs as a user of its own, which cannot "
            f"reach this interpreter ({', '.join(map(str, closed))} is closed to others), "
            "and it never runs as root: install the kit's virtual environment under a "
            "directory every user can enter (e.g. python3 -m venv /opt/course-venv), or "
            "install bubblewrap"
        )


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
    if not use_bwrap:
        require_reachable_interpreter(user)
    plugin_dir = scratch / "plugin"
    plugin_dir.mkdir(mode=0o755)
    package = Path(judge_plugin.__file__).parent
    shutil.copytree(package, plugin_dir / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    tests = ["tests"]
    selection: list[str] = []
    mounts: list[tuple[Path, Path]] = []  # (source, mount point), read-only, in bwrap
    if judge is not None:
        tree = plugin_dir / "judge"
        mounts = _student_tree(judge, workdir, scratch, mounted=use_bwrap)
        if use_bwrap:
            tree.mkdir()  # the pristine copy itself is mounted here
            mounts.append((judge.pristine, tree))
        else:
            shutil.copytree(judge.pristine, tree)
        selection = [str(tree / "tests" / name) for name in judge.test_files]
        tests = [
            *("-c", str(tree / "pyproject.toml"), "--rootdir", str(tree)),
            *(selection or [str(tree / "tests")]),
        ]
    share_read_only(plugin_dir)
    # A sandboxed run's HOME is its private /tmp; only an unsandboxed one writes here.
    home = workdir / ".home" if not mounts else Path(PRIVATE_TMP)
    if not mounts:
        home.mkdir()
    if user is not None and not mounts:
        give_to(workdir, user)
    isolation = f"bwrap ({describe(user)})" if use_bwrap else "unsafe: no sandbox (rlimits only)"
    if os.geteuid() == 0 and user is None:
        isolation += " (as root: no process-count limit)"
    outcome = RunOutcome(isolation=isolation)
    read_end, write_end = os.pipe()
    # Closed here once the child has them, or when it never starts: building the command
    # (the seccomp filter, bwrap's arguments) or the fork itself can fail.
    passed = [write_end]
    try:
        key = secrets.token_bytes(judge_plugin.CHANNEL_KEY_BYTES)
        key_read = key_pipe(key)
        passed.append(key_read)
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
            **LAB_PYTEST_ENV,  # the judge's own pytest passes these on to the in-host one
            judge_plugin.CHANNEL_FD: str(write_end),
            judge_plugin.CHANNEL_KEY_FD: str(key_read),
        }
        if judge is not None:
            env[judge_plugin.JUDGE] = json.dumps(
                {
                    "student": judge.student_modules,
                    "src": str(workdir / "src"),
                    "workdir": str(workdir),
                    "tests": str(plugin_dir / "judge" / "tests"),
                    "test_files": selection,
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
            passed.append(denied_calls_filter())
            prefix = bwrap_prefix(workdir, plugin_dir, limits, passed[-1], mounts)
            if user is not None:
                prefix += as_user(user)
                drop_in_child = None
            command = prefix + inner_limits(limits) + command
        process_started = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=passed,
            start_new_session=True,
            preexec_fn=lambda: apply_limits(limits, user, drop=drop_in_child is not None),
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        for fd in passed:
            os.close(fd)
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
        kill_everything(process, marker, started, user.cgroups if user is not None else ())
        outcome.exit_code = process.wait() if outcome.exit_code is None else outcome.exit_code
        outcome.process_seconds = time.perf_counter() - process_started
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


def _student_tree(
    judge: Judge, workdir: Path, scratch: Path, mounted: bool
) -> list[tuple[Path, Path]]:
    """``workdir``: the pristine copy with the student's modules in place of the stubs.
    Sandboxed, nothing is copied: the pristine copy is mounted there read-only, each module
    on top of its stub (the mounts returned); else ``workdir`` is a copy."""
    if not mounted:
        shutil.copytree(judge.pristine, workdir)
        for module, content in judge.files.items():
            (workdir / module).write_bytes(content)
        return []
    workdir.mkdir()  # where bwrap starts; the job sees the mounts there
    own = scratch / "student"
    mounts = [(judge.pristine, workdir)]
    for module, content in judge.files.items():
        if not (judge.pristine / module).is_file():
            raise ValueError(f"{module} has no stub in the pristine copy to be mounted on")
        (own / module).parent.mkdir(parents=True, exist_ok=True)
        (own / module).write_bytes(content)
        mounts.append((own / module, workdir / module))
    share_read_only(own)
    return mounts


def share_read_only(directory: Path) -> None:
    """The judge's files: readable by the job's user, writable only by the grader."""
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
