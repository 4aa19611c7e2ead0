"""Lab runs forked from a process that has imported pytest once.

The catalogue runs pytest once per mutant, a few tests each time: most of such a run is
starting Python and importing pytest and the libraries every lab run imports. A server
process imports them once and forks a child for each run; the child runs pytest as
``python -m pytest`` would in the practice directory (its working directory first on
``sys.path``, its environment, its output in a file) and exits as an interpreter does. The
server imports nothing of a practice directory: every module of one is imported afresh by
the child that runs its tests.

For the project's tests only (``launch`` of ``coursekit.runner.run_lab_tests``): students
and the grader start pytest in a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

SERVER = r"""
import gc, importlib, json, os, sys

import pytest
# The libraries the lab runs import, never a module of a practice directory: pytest's own
# plugins and what they import, the libraries the lab's code and tests use.
import _pytest.config, _pytest.junitxml
for plugin in _pytest.config.default_plugins:
    importlib.import_module(f"_pytest.{plugin}")
import asyncio, ctypes, difflib, mmap, pathspec, psutil, pytest_timeout, tracemalloc  # noqa
import concurrent.futures.thread, getpass, hmac, pdb, queue, secrets, tomllib, unittest  # noqa
import rich._emoji_codes, rich.console, rich.syntax, xml.etree.ElementTree  # noqa
_pytest.junitxml.bin_xml_escape("")  # compiles its pattern once, not in every run
# Out of the collector's sight: a child's collections (pytest runs one at its end) would
# otherwise walk, and so copy, every page of the server's heap.
gc.freeze()


def serve():
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"exit": os.waitstatus_to_exitcode(status)}), flush=True)
    return None


request = serve()
if request is not None:  # the child: pytest in the practice directory, then a normal exit
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    sys.argv = ["pytest", *request["args"]]
    sys.path[0] = request["cwd"]
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    output = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(output, 1)
    os.dup2(output, 2)
    sys.exit(pytest.console_main())
"""


class ForkedPytest:
    """A ``coursekit.runner.Launch`` whose runs are forked from one server process (started
    again when it has ended, or for another environment). ``close`` ends it."""

    def __init__(self) -> None:
        self._server: subprocess.Popen[bytes] | None = None
        self._env: dict[str, str] = {}
        self._pending = b""  # what the server wrote after the last line read

    def __call__(
        self, arguments: list[str], directory: Path, env: dict[str, str], timeout: float
    ) -> str:
        server = self._serving(env)
        assert server.stdin is not None
        with tempfile.TemporaryDirectory(prefix="forked-run-") as scratch:
            output = Path(scratch) / "output"
            request = {"cwd": str(directory), "env": env, "args": arguments}
            pid = None
            try:
                server.stdin.write(json.dumps({**request, "output": str(output)}).encode() + b"\n")
                server.stdin.flush()
                pid = json.loads(self._line(60))["pid"]
                self._line(timeout)
            except TimeoutError:
                self._discard(pid)
                raise subprocess.TimeoutExpired(["pytest", *arguments], timeout) from None
            except BaseException:
                # Interrupted mid-run (pytest-timeout's Failed, Ctrl-C): the server's answers
                # for this run would be read as the next run's. End both; the next call
                # starts a fresh server.
                self._discard(pid)
                raise
            return output.read_text(errors="replace") if output.exists() else ""

    def _discard(self, pid: int | None) -> None:
        """End the run ``pid`` with everything it started, and the server."""
        victims = []
        for root in (pid, self._server.pid if self._server is not None else None):
            if root is None:
                continue
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(root)
                victims += [*process.children(recursive=True), process]
        for victim in victims:
            with contextlib.suppress(psutil.Error):
                victim.kill()
        psutil.wait_procs(victims, timeout=30)
        if self._server is not None:
            self._server.wait(timeout=30)
            for stream in (self._server.stdin, self._server.stdout):
                if stream is not None:
                    stream.close()
        self._server, self._pending = None, b""

    def close(self) -> None:
        if self._server is not None:
            assert self._server.stdin is not None
            self._server.stdin.close()
            self._server.wait(timeout=60)
            self._server = None

    def _serving(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        # A child takes its whole environment from its request; only what Python reads as it
        # starts (PYTHONPATH and the like) needs a server started with it.
        startup = {k: v for k, v in env.items() if k.startswith("PYTHON")}
        if self._server is None or self._server.poll() is not None or startup != self._env:
            self.close()
            self._env, self._pending = startup, b""
            self._server = subprocess.Popen(
                [sys.executable, "-c", SERVER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                bufsize=0,
            )
        return self._server

    def _line(self, timeout: float) -> str:
        """The server's next line, read from its pipe without a buffer that select cannot see."""
        assert self._server is not None and self._server.stdout is not None
        fd = self._server.stdout.fileno()
        while b"\n" not in self._pending:
            if not select.select([fd], [], [], timeout)[0]:
                raise TimeoutError(f"no answer from the forked pytest in {timeout:g} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError("the forked pytest's server has ended")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode()
