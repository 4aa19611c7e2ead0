"""The grader's pytest plugin, loaded into the grading process with ``-p``.

It reports each test's outcome over an inherited pipe, one HMAC-signed JSON line per
record. At configure time, before any student module is imported, it takes the pipe's fd
and the key out of the environment, so student code cannot find them the ordinary way. It
judges outcomes from the exception of each phase itself (not from the report object, which
student code could patch), and it checks at the end that pytest's machinery and its own
hooks are the functions they were at the start.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Generator
from typing import Any

import pytest

CHANNEL_FD = "GRADER_CHANNEL_FD"
CHANNEL_KEY = "GRADER_CHANNEL_KEY"


def _watched() -> dict[str, Any]:
    import _pytest.python
    import _pytest.reports
    import _pytest.runner

    # A classmethod gives a new bound method on every access: compare what it wraps.
    return {
        name: getattr(value, "__func__", value)
        for name, value in {
            "runner.call_and_report": _pytest.runner.call_and_report,
            "runner.CallInfo.from_call": _pytest.runner.CallInfo.from_call,
            "python.Function.runtest": _pytest.python.Function.runtest,
            "reports.TestReport.from_item_and_call": _pytest.reports.TestReport.from_item_and_call,
            "plugin.makereport": pytest_runtest_makereport,
            "plugin.sessionfinish": pytest_sessionfinish,
            "json.dumps": json.dumps,
            "hmac.new": hmac.new,
        }.items()
    }


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


_channel: _Channel | None = None
_snapshot: dict[str, Any] = {}
_phase_failed: dict[str, str] = {}
_reported: set[str] = set()


def pytest_configure(config: pytest.Config) -> None:
    global _channel, _snapshot
    fd, key = os.environ.pop(CHANNEL_FD, None), os.environ.pop(CHANNEL_KEY, None)
    if fd is None or key is None:
        return
    _channel = _Channel(int(fd), bytes.fromhex(key))
    _snapshot = _watched()
    _channel.send({"type": "start"})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    yield
    if _channel is None:
        return
    failure = ""
    if call.excinfo is not None:
        failure = f"{call.excinfo.typename}: {call.excinfo.value}"[:2000] or call.excinfo.typename
    if failure:
        _phase_failed.setdefault(item.nodeid, failure)
    # Teardown runs for every test, also after a failed setup: report once, there.
    if call.when == "teardown" and item.nodeid not in _reported:
        _reported.add(item.nodeid)
        passed = item.nodeid not in _phase_failed and getattr(item, "_grader_called", False)
        markers = sorted({marker.name for marker in item.iter_markers()})
        _channel.send(
            {
                "type": "test",
                "nodeid": item.nodeid,
                "passed": passed,
                "message": _phase_failed.get(item.nodeid, ""),
                "markers": markers,
            }
        )
    if call.when == "call":
        item._grader_called = True  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _channel is None:
        return
    changed = sorted(name for name, value in _watched().items() if _snapshot.get(name) is not value)
    if changed:
        _channel.send({"type": "tamper", "what": changed})
    _channel.send({"type": "end", "exitstatus": int(exitstatus)})
