"""Run a grading directory's tests in a separate, limited process and collect the plugin's
signed records.

Isolation, from the outside in: a new session (so the whole group can be killed), a wall
limit enforced by this process, resource limits (address space, processes, file size, no
core files), a scrubbed environment with a temporary HOME, an unprivileged user when the
grader runs as root (root is exempt from the process limit), and, when bubblewrap is
available, no network and a read-only view of the filesystem in which only the grading
directory is writable and solutions, submissions and reports are hidden.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import queue
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil

from grader import _plugin

SandboxMode = Literal["auto", "bwrap", "none"]
OUTPUT_TAIL_BYTES = 64 * 1024
RUN_MARKER = "GRADER_RUN"


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 180
    test_seconds: float = 60
    memory_bytes: int = 1 << 30  # address space; the reference solution needs far less
    processes: int = 128
    file_bytes: int = 1 << 30


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


class SandboxError(Exception):
    """bubblewrap was asked for but cannot run here."""


def bwrap_available() -> bool:
    return shutil.which("bwrap") is not None and shutil.which("setpriv") is not None


def run_tests(
    workdir: Path,
    scratch: Path,
    hidden: list[Path],
    limits: Limits,
    mode: SandboxMode,
    user: tuple[int, int] | None,
) -> RunOutcome:
    """``user``: the uid and gid to run as (when the grader is root), one per parallel job,
    so that one submission's process limit never counts another's processes."""
    use_bwrap = mode == "bwrap" or (mode == "auto" and bwrap_available())
    if mode == "bwrap" and not bwrap_available():
        raise SandboxError(
            "--sandbox bwrap needs bubblewrap (bwrap) and setpriv (util-linux); install them "
            "or use --sandbox none"
        )
    plugin_dir = scratch / "plugin"
    plugin_dir.mkdir(mode=0o755)
    shutil.copyfile(_plugin.__file__, plugin_dir / "grader_plugin.py")
    (plugin_dir / "grader_plugin.py").chmod(0o644)
    home = workdir / ".home"
    home.mkdir()
    if user is not None and not use_bwrap and _closed_ancestors(_interpreter_paths()):
        user = None  # the interpreter is out of an unprivileged user's reach: stay root
    if user is not None:
        _give_to(workdir, user)
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
        _plugin.CHANNEL_FD: str(write_end),
        _plugin.CHANNEL_KEY: key.hex(),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "grader_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "--tb=no",
        "-o",
        "addopts=",
        f"--timeout={limits.test_seconds:g}",
        "tests",
    ]
    drop_in_child = user
    if use_bwrap:
        # bwrap starts as root so that it can mount what it needs; setpriv then drops to
        # the job's user just before Python starts.
        prefix = _bwrap(workdir, plugin_dir, hidden)
        if user is not None:
            prefix += [
                "setpriv",
                f"--reuid={user[0]}",
                f"--regid={user[1]}",
                "--clear-groups",
                "--",
            ]
            drop_in_child = None
        command = prefix + command
    isolation = "bwrap" if use_bwrap else "rlimits"
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
            preexec_fn=lambda: _limit(limits, drop_in_child),
        )
    finally:
        os.close(write_end)
    lines: list[bytes] = []
    tail = bytearray()
    readers = [
        threading.Thread(target=_read_lines, args=(read_end, lines), daemon=True),
        threading.Thread(target=_keep_tail, args=(process.stdout, tail), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        outcome.exit_code = process.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        outcome.timed_out = True
    finally:
        _kill_everything(process, marker, started)
        outcome.exit_code = process.wait() if outcome.exit_code is None else outcome.exit_code
        for reader in readers:
            reader.join(timeout=5)
        with contextlib.suppress(OSError):
            os.close(read_end)
    outcome.output_tail = tail.decode("utf-8", "replace")
    for line in lines:
        record = _verify(line, key)
        if record is None:
            outcome.forged += 1
        else:
            outcome.records.append(record)
    return outcome


def _bwrap(workdir: Path, plugin_dir: Path, hidden: list[Path]) -> list[str]:
    command = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
    ]
    for path in hidden:
        if path.exists():
            command += ["--tmpfs", str(path)]
    # A private directory on the way to the interpreter (a Python under /root, say): hide it
    # behind an empty tmpfs and bind just the interpreter's prefixes back, read-only.
    interpreter = _interpreter_paths()
    for closed in _closed_ancestors(interpreter):
        command += ["--tmpfs", str(closed)]
    for prefix in interpreter:
        command += [*_traversable(prefix), "--ro-bind", str(prefix), str(prefix)]
    command += [*_traversable(plugin_dir), "--ro-bind", str(plugin_dir), str(plugin_dir)]
    command += [*_traversable(workdir), "--bind", str(workdir), str(workdir)]
    return [*command, "--chdir", str(workdir), "--"]


def _traversable(path: Path) -> list[str]:
    """bwrap makes missing mount points 0700 (root's); the job's user must pass them."""
    options = []
    for ancestor in reversed(path.parents):
        if ancestor != Path("/"):
            options += ["--perms", "0711", "--dir", str(ancestor)]
    return options


class UserPool:
    """Unprivileged uids for parallel jobs when the grader runs as root, else nothing."""

    FIRST_UID = 61000

    def __init__(self, size: int) -> None:
        self._free: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
        root = os.geteuid() == 0
        for slot in range(max(1, size)):
            self._free.put((self.FIRST_UID + slot, self.FIRST_UID + slot) if root else None)

    @contextlib.contextmanager
    def user(self) -> Iterator[tuple[int, int] | None]:
        taken = self._free.get()
        try:
            yield taken
        finally:
            self._free.put(taken)


def _interpreter_paths() -> list[Path]:
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent}
    return sorted(p.resolve() for p in paths)


def _closed_ancestors(paths: list[Path]) -> list[Path]:
    """Directories on the way to ``paths`` that others may not traverse."""
    closed = set()
    for path in paths:
        for ancestor in reversed(path.parents):
            if ancestor != Path("/") and not os.stat(ancestor).st_mode & 0o001:
                closed.add(ancestor)
                break
    return sorted(closed)


def _give_to(directory: Path, user: tuple[int, int]) -> None:
    for root, dirs, files in os.walk(directory):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), *user)
    os.chown(directory, *user)


def _limit(limits: Limits, user: tuple[int, int] | None) -> None:
    """Runs in the child between fork and exec."""
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    if user is not None:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])


def _read_lines(fd: int, lines: list[bytes]) -> None:
    buffer = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        lines.extend(complete)
        if len(lines) > 100_000:  # a flood of records is not a test run
            break


def _keep_tail(stream: Any, tail: bytearray) -> None:
    while chunk := stream.read1(1 << 16):
        tail += chunk
        del tail[: max(0, len(tail) - OUTPUT_TAIL_BYTES)]


def _verify(line: bytes, key: bytes) -> dict[str, Any] | None:
    data, _, signature = line.rpartition(b"\t")
    expected = hmac.new(key, data, hashlib.sha256).hexdigest().encode()
    if not data or not hmac.compare_digest(signature, expected):
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _kill_everything(process: subprocess.Popen[bytes], marker: str, started: float) -> None:
    """The group, every descendant, and any process that left the tree but still carries
    this run's marker in its environment; idempotent."""
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    descendants += _marked(marker, started)
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [c for c in descendants if _alive(c)]
        if not alive:
            return
        time.sleep(0.01)


def _marked(marker: str, started: float) -> list[psutil.Process]:
    found = []
    for candidate in psutil.process_iter(["create_time"]):
        try:
            if candidate.info["create_time"] >= started - 1 and (
                candidate.environ().get(RUN_MARKER) == marker
            ):
                found.append(candidate)
        except psutil.Error:
            continue
    return found


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
