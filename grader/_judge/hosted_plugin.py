"""The plugin of the in-host pytest: the tests the judge could not decide, with canaries.

Started once the judge has collected its tests; it collects the same pristine tests and
then runs the batches the judge sends. Runs in the student's process, so nothing here is
trusted. Each selected test runs twice
under one name, ``nodeid@token``: once as itself and once as a canary that must fail (it
fails after the test's own body). Which token is the canary follows from a per-run salt
the judge keeps; a report that shows a canary passed or leaves it out is forged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

PLAN = "GRADER_HOSTED_PLAN"
RESULTS_FD = "GRADER_HOSTED_FD"
COMMANDS_FD = "GRADER_HOSTED_COMMANDS_FD"


def tokens(salt: str, nodeid: str) -> tuple[str, str]:
    """(the real run's token, the canary's token) of one test in one run."""
    digest = hashlib.sha256(f"{salt}\0{nodeid}".encode()).hexdigest()
    first, second = digest[:12], digest[12:24]
    return (first, second) if int(digest[24], 16) % 2 else (second, first)


def selected(nodeid: str, tests: list[str], files: list[str]) -> bool:
    return nodeid in tests or any(nodeid.startswith(f"{prefix}::") for prefix in files)


@dataclass
class _Plan:
    salt: str = ""
    fd: int = -1
    commands: int = -1
    failed: dict[str, str] = field(default_factory=dict)
    called: set[str] = field(default_factory=set)


plan = _Plan()


def pytest_configure(config: pytest.Config) -> None:
    plan.salt = json.loads(os.environ.pop(PLAN, "{}"))["salt"]
    plan.fd = int(os.environ.pop(RESULTS_FD))
    plan.commands = int(os.environ.pop(COMMANDS_FD))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool:
    """Collected once, then run batch after batch as the judge sends them (one JSON line
    each: the tests and the files to run), each batch ending with a ``done`` line."""
    with os.fdopen(plan.commands, "rb") as commands:
        for line in commands:
            batch = json.loads(line)
            for item in _twins(session.items, batch["tests"], batch["files"]):
                item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            _write({"done": batch["id"]})
    return True


def _twins(items: list[pytest.Item], tests: list[str], files: list[str]) -> list[pytest.Item]:
    chosen: list[pytest.Item] = []
    for item in items:
        if not isinstance(item, pytest.Function) or not selected(item.nodeid, tests, files):
            continue
        real, canary = tokens(plan.salt, item.nodeid)
        pair = []
        for token in (real, canary):
            twin = pytest.Function.from_parent(
                item.parent,
                name=item.name,
                callspec=getattr(item, "callspec", None),
                originalname=item.originalname,
                fixtureinfo=item._fixtureinfo,
            )
            twin._grader_run = f"{item.nodeid}@{token}"  # type: ignore[attr-defined]
            twin._grader_canary = token == canary  # type: ignore[attr-defined]
            pair.append(twin)
        chosen += sorted(pair, key=_run_name)
    return chosen


def _run_name(item: pytest.Item) -> str:
    return str(getattr(item, "_grader_run", item.nodeid))


def _write(record: dict[str, Any]) -> None:
    data = memoryview(json.dumps(record).encode() + b"\n")
    while data:
        data = data[os.write(plan.fd, data) :]


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
    result = yield
    if getattr(pyfuncitem, "_grader_canary", False):
        raise AssertionError("assert the expected outcome of this run")
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    yield
    run = _run_name(item)
    if call.excinfo is not None:
        plan.failed.setdefault(run, f"{call.excinfo.typename}: {call.excinfo.value}"[:2000])
    if call.when == "call":
        plan.called.add(run)
    if call.when == "teardown":
        passed = run not in plan.failed and run in plan.called
        _write({"nodeid": run, "passed": passed, "message": plan.failed.get(run, "")})
