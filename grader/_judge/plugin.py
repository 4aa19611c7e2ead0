"""The judge's pytest plugin, loaded with ``-p`` into the trusted pytest process.

No student code ever runs in this process (see ``stubs.py``): every call into the
student's modules goes to the host. The plugin reports each test's outcome over an
inherited pipe, one HMAC-signed JSON line per record, judging it from the exception of
each phase itself. It takes the pipe's fd and the key out of the environment before
anything else and makes the process non-dumpable, so that the host, which runs as the
same user, can neither read this process's environment, memory or descriptors nor attach
to it; it can at most kill it, which ends the run with the tests reported so far.

A test that needs the student's objects in its own process (``needs_host.py``) is not
reported here: after the session it runs again in the host (``hosted.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import importlib
import json
import os
import pkgutil
import signal
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

from . import host_process, hosted, needs_host, stubs

CHANNEL_FD = "GRADER_CHANNEL_FD"
# The descriptor of a pipe that holds the channel's key, never the key itself: an
# environment stays readable in /proc (bubblewrap's init, the sandbox's pid 1, keeps the one
# it started with, and it is the student's uid when a normal user grades).
CHANNEL_KEY_FD = "GRADER_CHANNEL_KEY_FD"
CHANNEL_KEY_BYTES = 32
JUDGE = "GRADER_JUDGE"  # what the judge needs to know: student modules, paths (not secret)
_PR_SET_DUMPABLE = 4


class _Channel:
    def __init__(self, fd: int, key: bytes) -> None:
        self._fd = fd
        self._sign: Callable[[bytes], str] = lambda data: hmac.new(
            key, data, hashlib.sha256
        ).hexdigest()

    def send(self, record: dict[str, Any]) -> None:
        data = json.dumps(record, ensure_ascii=True).encode()
        line = data + b"\t" + self._sign(data).encode() + b"\n"
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]


@dataclass
class _State:
    channel: _Channel | None = None
    judging: bool = False
    failed: dict[str, str] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)
    to_host: list[str] = field(default_factory=list)
    uncollected: list[str] = field(default_factory=list)
    timeout: float = 60.0
    hosted: hosted.HostedRun = field(default_factory=hosted.HostedRun)


state = _State()


def _undumpable() -> None:
    """Other processes of this user may no longer ptrace this one or open its /proc files."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _read_key(fd: int) -> bytes:
    """The key from its pipe, read to its end (the grader closed its write end) and closed."""
    key = b""
    try:
        while chunk := os.read(fd, CHANNEL_KEY_BYTES + 1):
            key += chunk
    finally:
        os.close(fd)
    if len(key) != CHANNEL_KEY_BYTES:
        raise RuntimeError(f"the channel key's pipe held {len(key)} bytes")
    return key


def pytest_configure(config: pytest.Config) -> None:
    fd, key_fd = os.environ.pop(CHANNEL_FD, None), os.environ.pop(CHANNEL_KEY_FD, None)
    judge = os.environ.pop(JUDGE, None)
    if fd is None or key_fd is None:
        return
    _undumpable()  # first: the key is only ever in a process no other one can look into
    key = _read_key(int(key_fd))
    os.set_inheritable(int(fd), False)  # no process the judge starts gets the channel
    state.channel = _Channel(int(fd), key)
    if judge is not None:
        settings = json.loads(judge)
        host_process.settings.student = frozenset(settings["student"])
        host_process.settings.src = settings["src"]
        host_process.settings.workdir = settings["workdir"]
        host_process.settings.tests = settings["tests"]
        host_process.settings.test_files = tuple(settings.get("test_files", ()))
        host_process.settings.marker = tuple(settings["marker"]) if settings.get("marker") else None
        state.timeout = float(settings.get("timeout", 60))
        stubs.install()
        needs_host.install_guards()
        # The judge has no terminal: a SIGINT can only come from the student's process,
        # and it would stop the judge mid-run (a run the grader could not score). A handler,
        # not SIG_IGN: the host and the commands it runs start with the default again.
        signal.signal(signal.SIGINT, _not_interrupted)
        state.judging = True
    state.channel.send({"type": "start"})


def _not_interrupted(signum: int, frame: object) -> None:
    """SIGINT from the student's process: the judge goes on."""


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if state.judging and report.failed and report.nodeid:
        state.uncollected.append(report.nodeid)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not state.judging:
        return
    # Everything the tests may import later is imported now, before the host (and with it
    # the student's code) exists: files changed afterwards are never read again.
    import picourse

    for module in pkgutil.walk_packages(picourse.__path__, "picourse."):
        if module.name.rsplit(".", 1)[-1] != "__main__":  # a program, not a module to load
            importlib.import_module(module.name)
    host_process.settings.collected = True
    # Start the host now, before the first test: a lab test's own clean-up (its conftest
    # reaps every process that is new since the test began) must see it as already there.
    host_process.host.address()
    state.hosted.start(state.timeout)  # collects the same tests meanwhile, in the host


@pytest.fixture
def monkeypatch() -> Generator[Any, None, None]:
    patch: Any = needs_host.RefusingMonkeyPatch() if state.judging else pytest.MonkeyPatch()
    yield patch
    patch.undo()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: Any) -> Any:
    try:
        return (yield)
    except needs_host.NeedsHost as refused:
        # pytest caches what a fixture raised only for an Exception; NeedsHost is not one.
        # Uncached, the fixture keeps its finalizer and the next test that uses it fails in
        # setup with pytest's own AssertionError, before it can be sent to the host.
        key = fixturedef.cache_key(request)
        fixturedef.cached_result = (None, key, (refused, refused.__traceback__))
        raise


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    needs_host.raised.clear()
    if state.judging and item.get_closest_marker(needs_host.WATCHES_THE_EVENT_LOOP):
        raise needs_host.NeedsHost("the test watches the event loop the tools run on")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    yield
    channel = state.channel
    if channel is None:
        return
    failure = ""
    if call.excinfo is not None:
        failure = f"{call.excinfo.typename}: {call.excinfo.value}"[:2000] or call.excinfo.typename
    if failure:
        state.failed.setdefault(item.nodeid, failure)
    if call.when == "call":
        state.called.add(item.nodeid)
    # Teardown runs for every test, also after a failed setup: decide once, there.
    if call.when == "teardown" and item.nodeid not in state.reported:
        state.reported.add(item.nodeid)
        if needs_host.raised:
            state.to_host.append(item.nodeid)
            return
        passed = item.nodeid not in state.failed and item.nodeid in state.called
        markers = sorted({marker.name for marker in item.iter_markers()})
        channel.send(
            {
                "type": "test",
                "nodeid": item.nodeid,
                "passed": passed,
                "message": state.failed.get(item.nodeid, ""),
                "markers": markers,
            }
        )


# tryfirst: the outermost wrapper, so the batch runs after pytest-timeout has stopped the last
# test's timer. Inside it, a batch longer than one test's timeout (its tests each in time)
# was cut short by that timer, and the next batch read the rest as forged reports.
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    yield
    # A file's in-host tests run as soon as the judge is done with the file, so that a
    # later hang (which ends the run at the wall limit) keeps what they earned.
    if state.judging and state.to_host and (nextitem is None or nextitem.path != item.path):
        _run_in_host(state.to_host, [])
        state.to_host = []


def _run_in_host(tests: list[str], files: list[str]) -> None:
    assert state.channel is not None
    judged = state.reported - set(tests)
    for record in state.hosted.run(tests, files, judged, state.timeout):
        state.channel.send(record)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    channel = state.channel
    if channel is None:
        return
    if state.judging:
        ended = host_process.host.stop()
        if ended is not None:
            channel.send({"type": "host", "exit_code": ended})
        if state.to_host or state.uncollected:
            _run_in_host(state.to_host, state.uncollected)
        state.hosted.stop()
    channel.send({"type": "end", "exitstatus": int(exitstatus)})
