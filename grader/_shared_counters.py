"""What a normal user's jobs share through their one uid: the kernel's per-user counters.

As a normal user every job runs as the grader's own uid (bubblewrap gives each a user
namespace, but the kernel counts epoll watches, ``fs.epoll.max_user_watches``, and pipe
buffer pages, ``fs.pipe-user-pages-soft``, per real uid). A job that takes them all makes
its neighbours' event loops fail (``OSError: [Errno 28] No space left on device``) or their
pipes small, until it ends. No limit of a job's own can stop that, so while jobs run side
by side a thread looks at both counters, and a job whose run saw one used up is graded
again, alone, after the others (as a timeout under CPU pressure is). inotify instances, the
third such counter, are refused to jobs outright (``_sandbox/_seccomp.py``). As root every
job has a uid of its own and nothing is watched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from types import TracebackType
from typing import Any

# How often the counters are looked at: a job that keeps one used up long enough to harm a
# neighbour is seen (a look costs a few hundred system calls).
PROBE_SECONDS = 0.1
# The free watches a look asks for: fewer left than a neighbour's event loops and their
# child processes' pipes need at once counts as used up.
_EPOLLS, _FDS_PER_EPOLL = 8, 16


class _Probe:
    """The grader's own descriptors for one look at the counters (Linux only)."""

    def __init__(self) -> None:
        import fcntl
        import select

        if not hasattr(select, "epoll"):
            raise OSError(errno.ENOSYS, "no epoll here: its counter cannot be looked at")
        self._fcntl = fcntl
        self._epolls = [select.epoll() for _ in range(_EPOLLS)]
        self._read, self._write = os.pipe()
        self._fds = [os.dup(self._read) for _ in range(_FDS_PER_EPOLL)]
        self._pipe_bytes = self._new_pipe_bytes()  # a pipe's size while nothing is used up

    def __call__(self) -> str | None:
        found = None
        try:
            for epoll in self._epolls:
                for fd in self._fds:
                    epoll.register(fd)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            found = "epoll watches (fs.epoll.max_user_watches)"
        finally:
            for epoll in self._epolls:
                for fd in self._fds:
                    with contextlib.suppress(OSError):
                        epoll.unregister(fd)
        if found is None and self._new_pipe_bytes() < self._pipe_bytes:
            found = "pipe buffers (fs.pipe-user-pages-soft)"
        return found

    def _new_pipe_bytes(self) -> int:
        read, write = os.pipe()
        try:
            size: int = self._fcntl.fcntl(read, self._fcntl.F_GETPIPE_SZ)
            return size
        finally:
            os.close(read)
            os.close(write)

    def close(self) -> None:
        for epoll in self._epolls:
            epoll.close()
        for fd in [*self._fds, self._read, self._write]:
            os.close(fd)


class SharedCounters:
    """While open (and ``watched``): when the uid's shared counters were seen used up."""

    def __init__(self, watched: bool) -> None:
        self._watched = watched
        # Spans of time.monotonic() in which looks saw a counter used up: (from, to, what),
        # a look's whole duration (its state is some moment of it), run-on looks merged.
        self._seen: list[list[Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> SharedCounters:
        if self._watched:
            self._thread = threading.Thread(target=self._watch, name="shared-counters")
            self._thread.daemon = True
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def used_up(self, started: float, ended: float) -> str | None:
        """What was seen used up between two ``time.monotonic()`` readings, if anything."""
        with self._lock:
            for since, until, what in self._seen:
                if since <= ended and until >= started:
                    return str(what)
        return None

    def _watch(self) -> None:
        try:
            probe = _Probe()
        except OSError:
            return  # not Linux, or no descriptors to spare: nothing can be told
        try:
            before = None
            while not self._stop.is_set():
                since = time.monotonic()
                try:
                    found = probe()
                except OSError:  # out of descriptors for a moment: look again next time
                    found = None
                until = time.monotonic()
                with self._lock:
                    if found is not None and before == found:
                        self._seen[-1][1] = until
                    elif found is not None:
                        self._seen.append([since, until, found])
                before = found
                self._stop.wait(PROBE_SECONDS)
        finally:
            probe.close()
