"""The command line of a grading run: bubblewrap's allowlist view of the filesystem.

The job sees only what it needs, never ``/`` minus a denylist: the system directories (for
the interpreter's libraries and for the shell commands the bash tool runs), the interpreter's
own prefixes, its grading directory read-only (tests and given modules cannot be edited), a
private size-limited ``/tmp`` as its only writable place, a minimal ``/dev`` and the ``/proc``
of its own pid namespace. Solutions, other checkouts, other jobs, the staging and the output
folder do not exist in that view.
"""

from __future__ import annotations

import os
from pathlib import Path

from grader._sandbox._limits import Limits
from grader._sandbox._users import JobUser, interpreter_paths

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What the dynamic loader, the C library and the shell commands read from /etc.
ETC_ENTRIES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
)
PRIVATE_TMP = "/tmp"
SHM_BYTES = 64 << 20


def bwrap_prefix(
    workdir: Path,
    plugin_dir: Path,
    limits: Limits,
    seccomp_fd: int,
    mounts: list[tuple[Path, Path]] | None = None,
) -> list[str]:
    """bwrap's arguments up to the command, which runs in the job's directory with
    ``HOME`` and ``TMPDIR`` on the private ``/tmp`` and at most ``limits.processes``
    processes of its own (counted per user namespace, so jobs never share the count).
    ``seccomp_fd``: the filter of the calls a job may not make (``_seccomp``), passed to
    the child. ``mounts``: (source, mount point) pairs mounted read-only in that order, the
    first at ``workdir``; without them, the job's directory is ``workdir`` itself."""
    # A normal user's jobs count their processes apart only in user namespaces of their own
    # (said explicitly for a setuid bwrap, which would not make one by itself).
    user_namespace = ["--unshare-user"] if os.geteuid() != 0 else []
    command = [
        "bwrap",
        *user_namespace,
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--seccomp",
        str(seccomp_fd),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    if os.path.exists("/proc/keys"):  # a kernel without keyrings has none
        # It lists the uid's keys: the filter (_seccomp) refuses every keyring call, but a
        # key of before it would stay listed. Masked as Docker does (on a nodev mount,
        # reading it fails).
        command += ["--ro-bind", "/dev/null", "/proc/keys"]
    # First, so that the binds below (the staging lives under /tmp too) land on top.
    for place, size in ((PRIVATE_TMP, limits.disk_bytes), ("/dev/shm", SHM_BYTES)):
        command += ["--perms", "1777", "--size", str(size), "--tmpfs", place]
    for entry in [*SYSTEM_DIRS, *ETC_ENTRIES]:
        command += _mirror(Path(entry))
    for prefix in interpreter_paths():
        command += [*_traversable(prefix), "--ro-bind", str(prefix), str(prefix)]
    command += [*_traversable(plugin_dir), "--ro-bind", str(plugin_dir), str(plugin_dir)]
    command += _traversable(workdir)
    for source, target in mounts or [(workdir, workdir)]:
        command += ["--ro-bind", str(source), str(target)]
    # bwrap's own root (a tmpfs holding the mount points) and /dev are the job's to write in
    # a user namespace: read-only, so /tmp and /dev/shm (with their sizes) are all there is.
    # Device nodes still work on a read-only mount.
    command += ["--remount-ro", "/", "--remount-ro", "/dev"]
    command += ["--setenv", "HOME", PRIVATE_TMP, "--setenv", "TMPDIR", PRIVATE_TMP]
    command += ["--chdir", str(workdir), "--"]
    return command


def visible_roots() -> list[Path]:
    """Every host directory a job sees (besides its own grading directory)."""
    system = [Path(p).resolve() for p in SYSTEM_DIRS if Path(p).exists()]
    return sorted({*system, *interpreter_paths()})


def inner_limits(limits: Limits) -> list[str]:
    """Set inside the sandbox, after any change of user: the kernel counts processes per
    user and user namespace, so each job has a count of its own."""
    return ["prlimit", f"--nproc={limits.processes}:{limits.processes}", "--"]


def as_user(user: JobUser) -> list[str]:
    """bwrap starts as root so that it can mount; this drops to the job's user last."""
    return ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--"]


def _mirror(path: Path) -> list[str]:
    if path.is_symlink():
        return ["--symlink", os.readlink(path), str(path)]
    if path.exists():
        return ["--ro-bind", str(path), str(path)]
    return []


def _traversable(path: Path) -> list[str]:
    """bwrap makes missing mount points 0700 (root's); the job's user must pass them."""
    options = []
    for ancestor in reversed(path.parents):
        if ancestor != Path("/"):
            options += ["--perms", "0711", "--dir", str(ancestor)]
    return options
