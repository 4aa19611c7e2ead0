"""The system calls a job may not make, as a seccomp filter bubblewrap loads.

The kernel's keyrings are not namespaced: a job could read a key of the session keyring it
inherited from the grader (the instructor's, after a login that made one), and a key a job
adds to its uid's user keyring stays there for the next job of that pool uid. No test needs
a keyring, so a job gets none: add_key, request_key and keyctl fail with EPERM, as in
Docker's default profile.

inotify instances are counted per real uid (128 by default), and as a normal user every job
runs as the grader's uid: a job that opened them all would leave the grader's user without
any (the instructor's editor, file watchers) until it ended. No lab test watches files, so
inotify_init and inotify_init1 fail with EPERM too. (The uid's other shared counters, epoll
watches and pipe buffers, every event loop and pipe needs: ``grader/_shared_counters.py``.)

io_uring (io_uring_setup, io_uring_enter, io_uring_register) fails with EPERM as in Docker's
default profile: a second way into the kernel for what a job can already do with plain
calls, with its own history of privilege escalations, whose operations this filter could
not see; no lab test or library a job loads uses it.

Two calls are refused only with some arguments, where a job would stall or shut out the
jobs beside it through what it shares with them (as a normal user, the grader's own uid):
``fcntl(F_SETLEASE)``, whose lease on a file of that uid (the venv, the pristine tests)
makes every other process that opens it wait 45 s; and a new user namespace (``unshare``
or ``clone`` with ``CLONE_NEWUSER``), which, nested, uses up the uid's
``max_user_namespaces`` so that no sandbox can start until the job ends. ``clone3`` hides
its flags in memory a filter cannot read: it fails with ENOSYS, so the C library falls
back to ``clone`` (Docker's default profile does the same).
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import tempfile

DENIED = (
    *("add_key", "request_key", "keyctl"),
    *("inotify_init", "inotify_init1"),
    *("io_uring_setup", "io_uring_enter", "io_uring_register"),
)
_F_SETLEASE = 1024  # fcntl.F_SETLEASE, which Python names only on Linux
_CLONE_NEWUSER = 0x10000000


class FilterUnavailable(Exception):
    """libseccomp (and its binding) is missing here."""


def denied_calls_filter() -> int:
    """The read end of a pipe holding the compiled filter (for ``bwrap --seccomp FD``); the
    caller closes it. Raises FilterUnavailable where libseccomp cannot be loaded."""
    compiled = _compiled()
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, compiled)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write_end)
    return read_end


@functools.cache
def _compiled() -> bytes:
    try:
        import pyseccomp as seccomp  # ctypes, loads libseccomp.so.2
    except (ImportError, OSError) as error:
        raise FilterUnavailable(str(error)) from None
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    if platform.machine() == "x86_64":
        # The 32-bit and x32 entry points reach the same calls by other numbers.
        for arch in (seccomp.Arch.X86, seccomp.Arch.X32):
            rules.add_arch(arch)
    refused = seccomp.ERRNO(errno.EPERM)
    for call in DENIED:
        try:
            rules.add_rule(refused, call)
        except OSError:  # a libseccomp older than the call: refuse to run, never run unfiltered
            raise FilterUnavailable(
                f"this libseccomp does not know the system call {call}; a newer one does"
            ) from None
    lease = seccomp.Arg(1, seccomp.EQ, _F_SETLEASE)
    for call in ("fcntl", "fcntl64") if platform.machine() == "x86_64" else ("fcntl",):
        rules.add_rule(refused, call, lease)
    new_user = seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_NEWUSER, _CLONE_NEWUSER)
    for call in ("unshare", "clone"):
        rules.add_rule(refused, call, new_user)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as compiled:
        rules.export_bpf(compiled)
        compiled.seek(0)
        return compiled.read()
