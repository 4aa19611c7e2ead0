"""Given (not a lab module): find and end every process that one bash call started.

Lab 8.5 asks you to signal bash's process group. A process can leave that group (setsid,
a double fork), so the reference bash also uses this scope, which is as strong as the
kernel allows and costs what the command started, not what runs on the host:

- cgroup v2 (Linux, where this process may create a child of its own cgroup): the command
  runs in a cgroup of its own from its first instruction, and ``cgroup.kill`` ends all of
  it at once; nothing inside can leave. Moving bash in costs the kernel an RCU grace period
  (~20 ms where cgroup2 is mounted without favordynmods): a price for a sure end.
- child subreaper (Linux): an orphan of the command is re-parented to this process instead
  of to init, so walking down from this process finds it, and the marker in its
  environment says which call it belongs to.
- elsewhere (macOS): every process on the host is scanned for the marker.

A pass kills what it finds; passes repeat until two in a row find nothing, so a process
that forks while it is being killed is caught by the next pass. A pass that saw a child of
this process die unseen (a new zombie) is not quiet either: a process that forks and exits
every few milliseconds (a pid hopper) leaves one behind at each hop, and may have moved on
between the listing of the children and the look at them. Nor is a pass that saw a child
of this process in the middle of its exit: its environment (the marker) is already gone,
and its children become this process's only once it is done, so until then nothing leads
to them; on a busy machine a hopper can be caught there for longer than two passes take.
The grace after SIGTERM lasts until the kernel reports the shell's process group empty
(``killpg(pgid, 0)``) and nothing marked is left. The call's orphans that die under this
process are reaped here, so a long session collects no zombies.

What still escapes (without a cgroup): an orphan that dropped its environment (``env -i``)
and, everywhere, work handed to another service (``systemd-run``, ``at``, ``ssh`` to
localhost, a container runtime): those processes were never the command's descendants.
Being a subreaper means this process also adopts orphans of other children; the ones a
sweep kills are reaped by it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal as signals
import sys
import time
from pathlib import Path

import psutil

RUN_MARKER = "PICOURSE_BASH_RUN"
_SWEEP_DEADLINE_SECONDS = 5.0
_PR_SET_CHILD_SUBREAPER = 36
# bash moves itself into the call's cgroup, then becomes the user's command: every process
# the command starts is born inside the cgroup. A failed move only leaves the other scopes.
_JOIN_CGROUP = 'echo 0 2>/dev/null >"$1"; exec bash -c "$2"'


class CommandScope:
    """The processes of one bash call. Create it, spawn ``argv(command)`` with ``env()``,
    ``attach`` the shell's pid, and call ``sweep`` (blocking: run it off the event loop)
    on every ending."""

    def __init__(self) -> None:
        self.marker = secrets.token_hex(8)
        self.started = time.time()
        self.leader: int | None = None
        self._known: dict[int, float] = {}  # pid -> start time of each process of the call
        self._zombies: set[int] = set()  # unreaped children at the last look
        _become_subreaper()
        self._cgroup = _new_cgroup(self.marker)

    def argv(self, command: str) -> list[str]:
        if self._cgroup is None:
            return ["bash", "-c", command]
        return ["bash", "-c", _JOIN_CGROUP, "bash", str(self._cgroup / "cgroup.procs"), command]

    def env(self) -> dict[str, str]:
        return {**os.environ, RUN_MARKER: self.marker}

    def attach(self, pid: int) -> None:
        self.leader = pid  # started in a new session: it leads its own process group

    def terminate(self) -> None:
        """SIGTERM to the group and to every other process of the call: the polite ask."""
        self._signal_group(signals.SIGTERM)
        for pid in self._members():
            _send(pid, signals.SIGTERM)

    def wait_until_gone(self, timeout: float) -> bool:
        """Give every process of the call up to ``timeout`` seconds to exit (after
        ``terminate``); True if none is left."""
        deadline = time.monotonic() + timeout
        # Two quiet looks in a row: a process whose parent is exiting belongs to neither
        # for a moment (it is being re-parented to us), so one look can miss it.
        quiet = 0
        while quiet < 2:
            self._reap_adopted()
            quiet = 0 if self._group_alive() or self._members() else quiet + 1
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def sweep(self) -> None:
        """SIGKILL everything of the call until two passes in a row find nothing; then
        release the cgroup. Never raises; gives up after a few seconds."""
        self._sweep(until_found=False)

    def sweep_unattached(self) -> None:
        """``sweep`` for a shell that was started but never ``attach``ed (asyncio could not
        start the thread that watches it). Two quiet passes prove nothing then: in the
        middle of its exec a process shows an empty environment, so no marker, and no
        process group leads to it. Passes go on until one kills something of the call or
        sees a child of this process die (the shell already gone), up to the deadline."""
        self._sweep(until_found=True)

    def _sweep(self, *, until_found: bool) -> None:
        deadline = time.monotonic() + _SWEEP_DEADLINE_SECONDS
        quiet = 0
        found = not until_found
        while (quiet < 2 or not found) and time.monotonic() < deadline:
            busy = self._kill_pass(deadline)
            found = found or busy
            quiet = 0 if busy else quiet + 1
        self._reap_adopted()
        self._release_cgroup(deadline)

    def _kill_pass(self, deadline: float) -> bool:
        """Kill what this pass finds; True unless the pass was quiet."""
        # Look before killing: a process the group kill has hit no longer shows its
        # environment (the marker), yet it exists until the kernel has torn it down.
        seen = self._members()
        if self._cgroup is not None:
            with contextlib.suppress(OSError):
                (self._cgroup / "cgroup.kill").write_text("1")
        self._signal_group(signals.SIGKILL)
        victims = [pid for pid in seen | self._members() if _send(pid, signals.SIGKILL)]
        for pid in victims:
            self._wait_dead(pid, deadline)
        return bool(victims) | self._children_in_flux()

    def _children_in_flux(self) -> bool:
        """Whether a child of this process died unseen (a new zombie) or is in the middle
        of its exit, in one look at the children."""
        if not _PROC_CHILDREN:
            return False
        children = _children(os.getpid())
        zombies = {pid for pid in children if _state(pid) == "Z"}
        new = bool(zombies - self._zombies)
        self._zombies = zombies
        return new or any(_exiting(pid) for pid in children if pid not in zombies)

    def _members(self) -> set[int]:
        found: set[int] = set()
        if self._cgroup is not None:
            found |= _cgroup_pids(self._cgroup)
        if _PROC_CHILDREN:
            # Newest first, and a cheap look: a process that keeps forking is the last one
            # listed, and must be looked at before it forks again.
            for child in reversed(_children(os.getpid())):
                # The marker, not the pid: a reaped shell's pid may already be reused.
                if _marker_of(child) == self.marker:
                    found |= {child, *_descendants(child)}
        else:
            found |= self._marked_anywhere()
        found.discard(os.getpid())
        for pid in found - self._known.keys():
            started = _start_time(pid)
            if started is not None:
                self._known[pid] = started
        return {pid for pid in found if _alive(pid)}

    def _group_alive(self) -> bool:
        """Whether a process of the shell's group still exists (an unreaped zombie counts
        until its parent, or we, reap it)."""
        if self.leader is None:
            return False
        try:
            os.killpg(self.leader, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _reap_adopted(self) -> None:
        """Reap the call's orphans that died after they were re-parented to us (we are
        their subreaper): left alone they stay zombies for as long as this process lives.
        Only the call's own (seen with its marker, or in the shell's group), never the
        shell, which asyncio reaps, nor another call's orphans."""
        if not _PROC_CHILDREN:
            return
        for pid in _children(os.getpid()):
            ours = _group_of(pid) == self.leader or (
                pid in self._known and _start_time(pid) == self._known[pid]  # not a reused pid
            )
            if pid == self.leader or not ours:
                continue
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)

    def _marked_anywhere(self) -> set[int]:
        found = set()
        for process in psutil.process_iter(["create_time"]):
            with contextlib.suppress(psutil.Error):
                if process.info["create_time"] >= self.started - 2 and (
                    process.environ().get(RUN_MARKER) == self.marker
                ):
                    found |= {process.pid, *(c.pid for c in process.children(recursive=True))}
        return found

    def _wait_dead(self, pid: int, deadline: float) -> None:
        """SIGKILL cannot be ignored, but its delivery is not instant. An adopted orphan
        becomes our zombie: reap it (never the shell, which asyncio reaps)."""
        while time.monotonic() < deadline:
            if pid != self.leader:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            if not _alive(pid):
                return
            time.sleep(0.001)

    def _signal_group(self, signum: int) -> None:
        if self.leader is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leader, signum)

    def _release_cgroup(self, deadline: float) -> None:
        if self._cgroup is None:
            return
        while time.monotonic() < deadline:
            try:
                self._cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # EBUSY: the last killed processes are not gone yet
                time.sleep(0.001)
        self._cgroup = None


def _send(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)  # also of a zombie
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _marker_of(pid: int) -> str | None:
    if _PROC_CHILDREN:  # Linux: one read, ten times faster than psutil's
        prefix = f"{RUN_MARKER}=".encode()
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return None
        found = next((v for v in environ.split(b"\0") if v.startswith(prefix)), None)
        return None if found is None else found[len(prefix) :].decode(errors="replace")
    try:
        return psutil.Process(pid).environ().get(RUN_MARKER)
    except psutil.Error:
        return None


def _state(pid: int) -> str | None:
    """The one-letter state of /proc/PID/stat ("Z" for a zombie)."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[0].decode()


_PF_EXITING = 0x4  # a task flag: the process is on its way through the kernel's exit


def _exiting(pid: int) -> bool:
    """Whether the process has begun to exit and is not yet a zombie."""
    fields = _stat_fields(pid)
    return (
        fields is not None and fields[0] not in (b"Z", b"X") and bool(int(fields[6]) & _PF_EXITING)
    )


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command's name: state, ppid, pgrp, session,
    tty, tpgid, flags, ..."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


# /proc/PID/task/TID/children lists a thread's children without scanning the host.
_PROC_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _children(pid: int) -> list[int]:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for thread in threads:
        with contextlib.suppress(OSError, ValueError):
            listed = Path(f"/proc/{pid}/task/{thread}/children").read_text()
            found += [int(word) for word in listed.split()]
    return found


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    pending = [pid]
    while pending:
        for child in _children(pending.pop()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def _cgroup_pids(cgroup: Path) -> set[int]:
    try:
        return {int(word) for word in (cgroup / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


_subreaper_pid: int | None = None  # the process that made itself a subreaper


def _become_subreaper() -> None:
    # Per process, not once per import: a forked child inherits this module's variables but
    # not the subreaper flag, and would otherwise lose its call's orphans to its parent.
    global _subreaper_pid
    if _subreaper_pid == os.getpid() or not sys.platform.startswith("linux"):
        return
    _subreaper_pid = os.getpid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _new_cgroup(marker: str) -> Path | None:
    """A fresh child of this process's own cgroup v2, or None where that is not allowed."""
    base = _own_cgroup()
    if base is None:
        return None
    _remove_stale_cgroups(base)
    cgroup = base / f"{_CGROUP_PREFIX}{os.getpid()}-{marker}"
    try:
        cgroup.mkdir()
    except OSError:
        return None
    if not (cgroup / "cgroup.kill").exists():  # kernels before 5.14
        with contextlib.suppress(OSError):
            cgroup.rmdir()
        return None
    return cgroup


_CGROUP_PREFIX = "picourse-bash-"


def _remove_stale_cgroups(base: Path) -> None:
    """Empty cgroups of processes that died before releasing them (killed, or gave up)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            owner = entry.name.removeprefix(_CGROUP_PREFIX).split("-")[0]
            stale = owner.isdigit() and not psutil.pid_exists(int(owner))
            if entry.name.startswith(_CGROUP_PREFIX) and stale:
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)  # fails, harmlessly, while still populated


def _own_cgroup() -> Path | None:
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        membership = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mount = next((line.split()[4] for line in mounts if " - cgroup2 " in line), None)
    own = next((line[3:] for line in membership if line.startswith("0::")), None)
    if mount is None or own is None:
        return None
    return Path(mount) / own.lstrip("/")
