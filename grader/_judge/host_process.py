"""The host process as the judge starts it: once, on the first call into the student's code,
never before every test file is imported; with a clean environment, its listening socket
as its only inherited descriptor, and the run's marker so the grader's sweep finds it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

from .needs_host import NeedsHost

HOST_ENVIRONMENT = (
    *("PATH", "HOME", "TMPDIR", "LANG", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"),
    *("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS"),  # only pytest-timeout, as the judge
)


class HostGone(RuntimeError):
    """The student's process ended (it crashed or exited); later calls fail at once."""


class _Settings:
    student: frozenset[str] = frozenset()
    src: str = ""
    workdir: str = ""
    tests: str = ""
    # The test files the judge runs (paths); empty: the whole tests folder.
    test_files: tuple[str, ...] = ()
    marker: tuple[str, str] | None = None
    collected = False


settings = _Settings()


class _Host:
    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.path = ""

    def address(self) -> str:
        if self.process is None:
            self._start()
        return self.path

    def _start(self) -> None:
        if not settings.collected:
            raise NeedsHost("the test calls the student's code while tests are collected")
        directory = tempfile.mkdtemp(prefix="host-")
        if len(directory) > 90:  # a socket's path has at most 104 bytes on macOS
            directory = tempfile.mkdtemp(prefix="host-", dir="/tmp")
        self.path = os.path.join(directory, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(128)
        env = {k: os.environ[k] for k in HOST_ENVIRONMENT if k in os.environ}
        if settings.marker is not None:
            env[settings.marker[0]] = settings.marker[1]
        command = [sys.executable, "-m", f"{__package__}.host", str(listener.fileno())]
        try:
            self.process = subprocess.Popen(
                [*command, settings.src, *sorted(settings.student)],
                cwd=settings.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                pass_fds=(listener.fileno(),),
                close_fds=True,
            )
        finally:
            listener.close()

    def gone(self) -> HostGone:
        code = self.process.poll() if self.process is not None else None
        return HostGone(f"the student's process has ended (exit code {code})")

    def stop(self) -> int | None:
        """The exit code when the host ended on its own, else ``None``."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            self.process.kill()
        self.process.wait()
        return code


host = _Host()
