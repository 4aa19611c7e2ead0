"""The judge's parts on their own: the wire's codec, the canary check, the in-host credit
bound and the judge's refusal to be observed as if it were the student's process."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT
from coursekit.runner import LAB_PYTEST_ENV
from grader import _pristine
from grader._judge import hosted, hosted_plugin, needs_host
from grader._judge.wire import Codec, WireError
from grader._scoring import InventoryItem, score

LAB = load_lab("08")


class _Details:
    """Stands in for a student's own class: never rebuilt, only referenced."""


def codec() -> Codec:
    side = Codec(lambda module: module == __name__ or module.startswith("picourse"))
    side.make_proxy = lambda ref: ("proxy", ref["id"])  # type: ignore[method-assign]
    return side


def test_plain_data_and_allowed_dataclasses_cross_as_themselves() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Point:
        x: int
        label: str

    Point.__module__ = __name__
    globals()["Point"] = Point
    Point.__qualname__ = "Point"
    value = {"a": [1, 2.5, None, True], ("t", 1): b"\x00\xff", "p": Point(1, "\udc80")}
    sender, receiver = codec(), codec()
    wire = json.loads(json.dumps(sender.encode(value)))
    assert receiver.decode(wire) == value


def test_a_dataclass_of_another_module_is_never_rebuilt() -> None:
    data = {"t": "dc", "c": "os:stat_result", "f": {}}
    with pytest.raises(WireError, match="not a dataclass defined in os"):
        codec().decode(data)
    data = {"t": "dc", "c": f"{__name__}:_Details", "f": {}}
    with pytest.raises(WireError, match="not a dataclass"):
        codec().decode(data)


_TOUCHED: list[str] = []


class _Hooked(type):
    """A class whose attribute hook records each use, as the judge's stubs of the student's
    modules do (there the hook sends the test to the in-host run)."""

    def __getattr__(cls, name: str) -> Any:
        _TOUCHED.append(name)
        raise AttributeError(name)


class _Stub(metaclass=_Hooked):
    pass


_stub_module = type(sys)("stub_of_a_students_module")
_stub_module._Stub = _Stub  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "name",
    [
        f"{__name__}:_Stub.Inner",  # through a class with a metaclass's hook
        f"{__name__}:_stub_module._Stub",  # through a module reached as an attribute
        f"{__name__}:_Stub",  # a class defined with a metaclass
        "picourse.__main__:main",  # importing a program's __main__ runs it
    ],
)
def test_the_peer_names_a_class_but_never_walks_this_process(name: str) -> None:
    _TOUCHED.clear()
    with pytest.raises(WireError, match="not a dataclass"):
        codec().decode({"t": "dc", "c": name, "f": {}})
    error = codec().decode_error({"type": name.partition(":")[2], "module": __name__})
    assert type(error).__module__ == "student", "an unknown error class is made, not looked up"
    assert _TOUCHED == [], "the peer's names reached an attribute hook of this process"
    assert "picourse.__main__" not in sys.modules


def test_a_student_object_crosses_as_a_reference() -> None:
    encoded = codec().encode(_Details())
    assert encoded["t"] == "ref" and encoded["type"] == "_Details"


class _Recorder(list[str]):
    """A listener as a lab test writes one: a list that records the events it is called with."""

    def __call__(self, event: str) -> None:
        self.append(event)


@pytest.mark.parametrize("kind", [list, _Recorder], ids=["plain-list", "callable-list"])
def test_a_callable_container_crosses_as_a_reference_a_plain_one_as_data(kind: type) -> None:
    # A recorder sent as a list arrived as a plain list, and the student's code could not
    # call it: an honest run_coding_agent failed with "'list' object is not callable".
    encoded = codec().encode(kind(["agent_start"]) if kind is list else kind())
    if kind is list:
        assert encoded == ["agent_start"]
    else:
        assert encoded["t"] == "ref" and encoded["callable"], encoded
        assert encoded["truth"] is False, "an empty recorder is false on the other side too"
        assert not host_proxy(encoded) and host_proxy({**encoded, "truth": True})


def host_proxy(ref: dict[str, Any]) -> Any:
    """The host's proxy of a judge object described by ``ref``."""
    from grader._judge.host import _JudgeObject

    return _JudgeObject(ref)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (NotImplementedError("Lab 8.1 read is not implemented yet"), NotImplementedError),
        (FileNotFoundError(2, "gone"), FileNotFoundError),
        (KeyboardInterrupt(), Exception),  # never stops the receiving process
        (SystemExit(0), Exception),
    ],
)
def test_errors_keep_their_builtin_type_and_text(error: BaseException, expected: type) -> None:
    side = codec()
    decoded = side.decode_error(json.loads(json.dumps(side.encode_error(error))))
    assert type(decoded).__name__ == type(error).__name__
    assert isinstance(decoded, expected) and str(decoded) == str(error)
    assert not isinstance(decoded, (KeyboardInterrupt, SystemExit))


def test_patching_or_measuring_the_judge_marks_the_test_for_the_host() -> None:
    needs_host.raised.clear()
    patch: Any = needs_host.RefusingMonkeyPatch()
    with pytest.raises(BaseException) as caught, contextlib.suppress(Exception):
        patch.setattr("os.replace", None)  # code that swallows errors cannot hide it
    assert isinstance(caught.value, needs_host.NeedsHost)
    assert needs_host.raised, "recorded even when caught"
    needs_host.raised.clear()


def test_a_signal_the_test_watches_marks_the_test_for_the_host() -> None:
    # Only the host's copy of a signal sees how the student's code uses it: a listener it
    # keeps, or the looks a signal counts. A plain signal crosses as it is.
    from grader._judge.remote import codec
    from picourse.abort import AbortController, AbortSignal

    class Counting(AbortSignal):
        pass

    wrapped = AbortController().signal
    wrapped.add_listener = lambda callback: lambda: None  # type: ignore[method-assign]
    for watched in (Counting(), wrapped):
        needs_host.raised.clear()
        with pytest.raises(needs_host.NeedsHost):
            codec.encode_signal(watched)
        assert needs_host.raised
    needs_host.raised.clear()
    assert codec.encode_signal(AbortController().signal) is not None
    assert not needs_host.raised


_FIXTURE_THAT_PATCHES = """
import pytest

@pytest.fixture
def patched(monkeypatch):
    monkeypatch.setattr("os.sep", "/")

def test_one(patched):
    pass

def test_two(patched):
    pass
"""

# Judging from the first test on (set after collection: the judge's collection starts a host).
_JUDGING = """
import pytest
from grader._judge import plugin

@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    plugin.state.judging = True
"""


def judge_pytest(
    directory: Path, tests: str, conftest: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """pytest with the judge's plugin in ``directory``: one test file and a conftest, with
    the plugins a graded run loads (pytest-timeout only)."""
    (directory / "test_file.py").write_text(tests)
    (directory / "conftest.py").write_text(conftest)
    (directory / "pytest.ini").write_text("[pytest]\n")
    judge = ("-p", "grader._judge.plugin", "-p", "no:cacheprovider", *options)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *judge],
        cwd=directory,
        env={**os.environ, **LAB_PYTEST_ENV, "PYTHONPATH": str(COURSE_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_test_using_a_fixture_that_patches_goes_to_the_host(tmp_path: Path) -> None:
    # NeedsHost is a BaseException, which pytest does not cache for a fixture: the fixture
    # kept a finalizer, and its next test failed in the judge with pytest's own bare
    # AssertionError (an honest submission lost the points of every later such test).
    completed = judge_pytest(tmp_path, _FIXTURE_THAT_PATCHES, _JUDGING)
    errors = [line for line in completed.stdout.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2 and all("NeedsHost" in line for line in errors), completed.stdout


_WATCHES_THE_LOOP = """
import pytest

@pytest.mark.watches_the_event_loop
def test_watching():
    pass

def test_plain():
    pass
"""


def test_a_test_that_watches_the_event_loop_goes_to_the_host(tmp_path: Path) -> None:
    # A task on the test's loop answers the command while bash runs: in the judge the
    # student's code runs on the host's loop, so a grace waited out on that loop (a blocked
    # loop) never stopped the test's, and the test passed there but not in the lab's run.
    conftest = _JUDGING + (
        "\n\ndef pytest_configure(config):\n"
        '    config.addinivalue_line("markers", "watches_the_event_loop: in the host")\n'
    )
    completed = judge_pytest(tmp_path, _WATCHES_THE_LOOP, conftest, "-rA")
    errors = [line for line in completed.stdout.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "test_watching" in errors[0], completed.stdout
    assert "NeedsHost" in errors[0], errors
    assert "the test watches the event loop the tools run on" in completed.stdout, errors
    assert "PASSED test_file.py::test_plain" in completed.stdout, completed.stdout


# An in-host batch that takes longer than one test's timeout (its tests each in time).
_SLOW_BATCH = (
    _JUDGING
    + """
import time
from pathlib import Path


def _slow_batch(tests, files):
    time.sleep(2)
    Path("batch-done").write_text(" ".join(tests))


plugin._run_in_host = _slow_batch


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    plugin.state.to_host.append(item.nodeid)
"""
)


def test_an_in_host_batch_is_not_cut_short_by_the_last_tests_timeout(tmp_path: Path) -> None:
    # The batch ran inside the last test's pytest-timeout timer: cut short there, the rest
    # of its reports were read with the next batch as forged, and an honest submission whose
    # in-host tests together took longer than one timeout was flagged.
    tests = "def test_one():\n    pass\n"
    completed = judge_pytest(tmp_path, tests, _SLOW_BATCH, "--timeout=1")
    done = tmp_path / "batch-done"
    assert done.exists() and done.read_text() == "test_file.py::test_one", completed.stdout
    assert completed.returncode == 0 and "Timeout" not in completed.stdout, completed.stdout


def _lines(salt: str, outcomes: dict[str, tuple[bool, bool]]) -> list[bytes]:
    lines = []
    for nodeid, (real, canary) in outcomes.items():
        real_token, canary_token = hosted_plugin.tokens(salt, nodeid)
        for token, passed in ((real_token, real), (canary_token, canary)):
            lines.append(json.dumps({"nodeid": f"{nodeid}@{token}", "passed": passed}).encode())
    return lines


def test_honest_in_host_reports_pass_the_canary_check() -> None:
    tests = ["tests/a.py::t1", "tests/a.py::t2"]
    lines = _lines("s", {"tests/a.py::t1": (True, False), "tests/a.py::t2": (False, False)})
    *records, summary = hosted.verify(lines, "s", tests, [], judged=set())
    assert {r["nodeid"]: r["passed"] for r in records} == {tests[0]: True, tests[1]: False}
    assert all(r["where"] == "host" for r in records)
    assert (summary["wrong_canaries"], summary["forged"]) == (0, 0)


def test_forged_in_host_reports_are_caught() -> None:
    tests = ["tests/a.py::t1", "tests/a.py::t2"]
    # Every outcome "passed": the canaries too.
    lines = _lines("s", {t: (True, True) for t in tests})
    assert hosted.verify(lines, "s", tests, [], judged=set())[-1]["wrong_canaries"] == 2
    # The canaries left out.
    lines = _lines("s", {t: (True, False) for t in tests})[::2]
    assert hosted.verify(lines, "s", tests, [], judged=set())[-1]["wrong_canaries"] == 2
    # A report for a test the judge decided, and one under an unknown token.
    lines = _lines("s", {"tests/a.py::judged": (True, False)})
    lines.append(json.dumps({"nodeid": "tests/a.py::t1@guess", "passed": True}).encode())
    summary = hosted.verify(lines, "s", tests, [], judged={"tests/a.py::judged"})[-1]
    assert summary["forged"] == 3 and summary["tests"] == 0


def test_an_in_host_line_json_cannot_parse_is_forged_not_a_crash_of_the_judge() -> None:
    tests = ["tests/a.py::t1"]
    lines = [b"[" * 30_000, b'{"nodeid": ' * 5_000, b"[1]", b'"text"']
    lines += _lines("s", {tests[0]: (True, False)})
    *records, summary = hosted.verify(lines, "s", tests, [], judged=set())
    assert [r["nodeid"] for r in records] == tests
    assert (summary["forged"], summary["wrong_canaries"]) == (4, 0)


def test_in_host_credit_is_bounded_by_what_the_judge_saw() -> None:
    inventory = [InventoryItem(f"tests/test_lab8_1_read.py::t{i}", "8.1", False) for i in range(4)]
    judged = [{"type": "test", "nodeid": inventory[i].nodeid, "passed": i == 0} for i in (0, 1)]
    in_host = [
        {"type": "test", "nodeid": item.nodeid, "passed": True, "where": "host"}
        for item in inventory[2:]
    ]
    stages, *_ = score(LAB, inventory, judged + in_host, credit=True)
    # 20 points over 4 tests: the judged pass earns 5, each in-host pass 5 x 1/2.
    assert stages[0].score == 10.0
    nothing = [{**r, "passed": False} for r in judged]
    stages, *_ = score(LAB, inventory, nothing + in_host, credit=True)
    assert stages[0].score == 0.0, "forged in-host passes earn nothing without judged passes"


def test_a_run_cut_short_never_raises_the_bound_on_in_host_credit() -> None:
    # The student's code ends the judge (a signal, a crash) right before its first failing
    # judged test: the one judged test reported passed, two never ran.
    inventory = [InventoryItem(f"tests/test_lab8_1_read.py::t{i}", "8.1", False) for i in range(4)]
    judged = [{"type": "test", "nodeid": inventory[0].nodeid, "passed": True}]
    in_host = [{"type": "test", "nodeid": inventory[1].nodeid, "passed": True, "where": "host"}]
    stages, *_ = score(LAB, inventory, judged + in_host, credit=True)
    # 20 points over 4 tests: the judged pass earns 5, the in-host pass 5 x 1/3.
    assert stages[0].score == round(5 + 5 / 3, 2), "tests never reported count as not passed"


def test_the_pristine_copy_is_made_once_per_grading_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    collected: list[Path] = []

    def collect(lab: object, pristine: Path) -> list[InventoryItem]:
        collected.append(pristine)
        compiled = pristine / "tests/__pycache__/test_lab8_1_read.cpython-311-pytest-9.2.0.pyc"
        compiled.parent.mkdir(parents=True, exist_ok=True)
        compiled.write_bytes(f"compiled in {pristine.name}".encode())
        return [InventoryItem(f"tests/test_lab8_1_read.py::{pristine.name}", "8.1", False)]

    def files_of(root: Path) -> dict[str, tuple[bytes, int]]:
        return {
            path.relative_to(root).as_posix(): (path.read_bytes(), path.stat().st_mode)
            for path in root.rglob("*")
            if path.is_file()
        }

    monkeypatch.setattr(_pristine, "_collect", collect)
    monkeypatch.setattr(_pristine, "_MADE", {})
    first = _pristine.make_pristine(LAB, tmp_path / "a", "key-1")
    made = files_of(tmp_path / "a")
    assert "tests/test_lab8_1_read.py" in made and "src/picourse/coding_tools/read.py" in made
    (tmp_path / "a/tests/test_lab8_1_read.py").write_text("# changed after it was made\n")
    assert _pristine.make_pristine(LAB, tmp_path / "b", "key-1") == first
    assert collected == [tmp_path / "a"], "the same grading key: the same pristine tests"
    assert files_of(tmp_path / "b") == made, (
        "a later pristine copy under the same key has the first's files as they were made "
        "(sources, modes, and the tests compiled for the first)"
    )
    changed = _pristine.make_pristine(LAB, tmp_path / "c", "key-2")
    assert collected == [tmp_path / "a", tmp_path / "c"] and changed != first, (
        "another key (the tests, lab.toml or the scaffold changed) is made afresh"
    )
    fresh = files_of(tmp_path / "c")["tests/test_lab8_1_read.py"]
    assert fresh == made["tests/test_lab8_1_read.py"], "rendered afresh, not copied from a copy"


def test_tracemalloc_in_the_judge_needs_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracemalloc, "start", tracemalloc.start)  # restored afterwards
    needs_host.install_guards()
    with pytest.raises(needs_host.NeedsHost):
        tracemalloc.start()
    needs_host.raised.clear()


def test_a_students_subclass_crosses_as_the_class_the_tests_know() -> None:
    from picourse.coding_tools.errors import PathError
    from picourse.tool import ToolOutput

    class Output(ToolOutput):
        """A student's own kind of output."""

    class Refused(PathError):
        """A student's own kind of path error."""

    side = Codec(lambda module: module.startswith("picourse"))  # not this test's classes
    decoded = side.decode(json.loads(json.dumps(side.encode(Output([], None, True)))))
    assert type(decoded) is ToolOutput and decoded.is_error
    error = side.decode_error(json.loads(json.dumps(side.encode_error(Refused("outside")))))
    assert isinstance(error, PathError) and type(error).__name__ == "Refused"


def test_a_batch_cut_short_by_the_students_code_is_not_run_rather_than_forged() -> None:
    tests = ["tests/a.py::t1", "tests/a.py::t2"]
    lines = _lines("s", {t: (True, False) for t in tests})
    real_token, _ = hosted_plugin.tokens("s", tests[1])
    cut = [line for line in lines if real_token.encode() in line or b"t1" in line]
    *records, summary = hosted.verify(cut, "s", tests, [], judged=set(), complete=False)
    assert [r["nodeid"] for r in records] == [tests[0]], "t2's canary never ran"
    assert (summary["wrong_canaries"], summary["forged"]) == (0, 0)


@pytest.mark.timeout(30)
def test_the_judge_stops_reading_when_the_in_host_pytest_has_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write end of the results pipe reopened through /proc by the student's code (and
    held) must not keep the judge waiting until the wall once the in-host pytest is gone."""
    run = hosted.HostedRun()
    read_end, held_write_end = os.pipe()
    run.results = os.fdopen(read_end, "rb", buffering=0)
    run.process = subprocess.Popen([sys.executable, "-c", "pass"])
    run.process.wait()
    monkeypatch.setattr(hosted, "MAX_LINE_BYTES", 16)
    long_line = b"x" * 21
    os.write(held_write_end, b'{"a": 1}\n' + long_line + b"\n" + b"cut off")
    try:
        assert list(run._lines()) == [
            b'{"a": 1}\n',
            long_line[:16],
            b"xxxxx\n",
            b"cut off",
        ]
    finally:
        os.close(held_write_end)
        run.results.close()


FLOOD = """
import json, sys
sys.stdin.readline()  # the batch
for _ in range(1000):
    sys.stdout.write("x" * 99 + "\\n")
print(json.dumps({"done": 1}), flush=True)
"""


@pytest.mark.timeout(30)
def test_an_in_host_batch_keeps_bounded_bytes_however_much_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 20,000 lines of 64 KiB (1.25 GiB) passed the line-count bound and ran the judge out
    # of its 1 GiB address space (an INTERNALERROR, no end record).
    monkeypatch.setattr(hosted, "MAX_BATCH_BYTES", 5000)
    seen: list[list[bytes]] = []
    verify = hosted.verify

    def spy(lines: list[bytes], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        seen.append(lines)
        return verify(lines, *args, **kwargs)

    monkeypatch.setattr(hosted, "verify", spy)
    run = hosted.HostedRun()
    flood = [sys.executable, "-c", FLOOD]
    run.process = subprocess.Popen(flood, bufsize=0, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    run.commands, run.results = run.process.stdin, run.process.stdout
    try:
        run.run(["test_file.py::test_one"], ["test_file.py"], set(), 5)
    finally:
        run.stop()
    (lines,) = seen
    assert len(lines) == 50 and sum(map(len, lines)) == 5000


# The in-host pytest as the student's code can make it: it fills the commands pipe through
# /proc (its write end reopened), says so on the fd it is given, then blocks writing 256 KiB
# of results before it reads a command. Sent with a blocking write, the batch waited forever.
JAMMED = """
import json, os, sys
jam = os.open(f"/proc/self/fd/{sys.stdin.fileno()}", os.O_WRONLY | os.O_NONBLOCK)
try:
    while True:
        os.write(jam, b"garbage\\n" * 512)
except BlockingIOError:
    pass
ready = int(sys.argv[2])
os.write(ready, b"full")
os.close(ready)
if sys.argv[1] == "then-answer":
    sys.stdout.buffer.write(b"x" * (256 << 10) + b"\\n")
    sys.stdout.flush()
    for line in sys.stdin.buffer:
        if line.startswith(b"{"):
            print(json.dumps({"done": json.loads(line)["id"]}), flush=True)
else:
    import signal
    signal.pause()  # takes no command, ever
"""


def _jammed_run(behaviour: str) -> tuple[hosted.HostedRun, subprocess.Popen[bytes]]:
    ready_read, ready_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-c", JAMMED, behaviour, str(ready_write)],
        bufsize=0,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        pass_fds=(ready_write,),
    )
    os.close(ready_write)
    with os.fdopen(ready_read, "rb") as ready:
        assert ready.read() == b"full", "the stand-in never filled its commands pipe"
    run = hosted.HostedRun()
    run.process, run.commands, run.results = process, process.stdin, process.stdout
    return run, process


def _batch_within(run: hosted.HostedRun, seconds: float, wait: float, why: str) -> Any:
    """One batch of one test, run in a thread that must end within ``wait``; the in-host
    stand-in is stopped and reaped whatever happens, which also frees a judge still blocked."""
    returned: list[Any] = []
    batch = threading.Thread(
        target=lambda: returned.append(run.run(["t.py::test_one"], [], set(), seconds)),
        daemon=True,
    )
    batch.start()
    try:
        batch.join(wait)
        assert not batch.is_alive(), why
    finally:
        run.stop()
        batch.join(10)
    return returned[0]


@pytest.mark.timeout(60)
def test_a_batch_waiting_on_a_jammed_pipe_reads_the_results_meanwhile() -> None:
    run, process = _jammed_run("then-answer")
    (*records, summary) = _batch_within(
        run,
        30,
        40,
        "the judge blocked writing its batch while the in-host pytest blocked writing "
        "its results: read the results while the batch waits",
    )
    assert records == [] and summary["forged"] >= 1, (
        f"what arrives between batches is no answer: counted as forged ({summary})"
    )
    assert summary["stalled"] is False, "the batch was taken and answered"
    assert process.returncode is not None


@pytest.mark.timeout(60)
def test_a_batch_never_taken_ends_the_in_host_run_after_one_tests_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, process = _jammed_run("then-wait")
    (*records, summary) = _batch_within(
        run, 2, 30, "a batch nobody takes must end after one test's timeout"
    )
    assert records == [] and summary["tests"] == 0
    assert summary["stalled"] is True, "the report says why the batch's tests earn nothing"
    assert process.returncode is not None, "the stalled in-host pytest is ended and reaped"

    def start_again(seconds: float) -> None:
        raise AssertionError("a stalled in-host run is not started again for every batch")

    monkeypatch.setattr(run, "start", start_again)
    (*records, summary) = run.run(["t.py::test_two"], [], set(), 2)
    assert records == [] and summary["tests"] == 0 and summary["stalled"] is True


SILENT = """
import signal, sys
sys.stdin.readline()  # takes the batch, then never answers: its own timeout is off
signal.pause()
"""


@pytest.mark.timeout(60)
def test_a_batch_taken_but_never_answered_ends_the_in_host_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hosted, "QUIET_MARGIN_SECONDS", 0.0)
    process = subprocess.Popen(
        [sys.executable, "-c", SILENT], bufsize=0, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    run = hosted.HostedRun()
    run.process, run.commands, run.results = process, process.stdin, process.stdout
    (*records, summary) = _batch_within(
        run,
        1,
        30,
        "an in-host pytest quiet for two tests' timeouts is stuck: the judge must stop "
        "waiting for it, not wait until the wall",
    )
    assert records == [] and summary["tests"] == 0 and summary["stalled"] is True
    assert run.stalled and process.returncode is not None, "ended, reaped, and not restarted"


def test_an_in_host_pytest_that_cannot_be_started_stalls_the_run_and_leaks_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The student's code can fill the job's process limit, which the judge shares, and end
    # the in-host pytest: the judge's start of another one then fails with EAGAIN.
    def no_process(*args: Any, **kwargs: Any) -> Any:
        raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(subprocess, "Popen", no_process)
    open_before = sorted(os.listdir("/dev/fd"))
    at_collection = hosted.HostedRun()
    at_collection.start(5)
    assert at_collection.stalled, "a start that failed stalls the in-host run, never the judge"
    for run in (at_collection, hosted.HostedRun()):  # the second starts it for its batch
        (*records, summary) = run.run(["t.py::test_one"], [], set(), 5)
        assert records == [] and summary["tests"] == 0 and summary["stalled"] is True
    assert sorted(os.listdir("/dev/fd")) == open_before, "the pipes of a failed start are closed"


# In-host stand-ins: one that takes its batch and ends without a word, and one that answers
# each test of every batch honestly (the test passed, its canary failed) until its commands end.
ENDS = """
import sys
sys.stdin.readline()
sys.exit(3)
"""
ANSWERS = """
import json, sys
from grader._judge.hosted_plugin import tokens
for line in sys.stdin:
    batch = json.loads(line)
    for nodeid in batch["tests"]:
        real, canary = tokens(sys.argv[1], nodeid)
        print(json.dumps({"nodeid": f"{nodeid}@{real}", "passed": True}))
        print(json.dumps({"nodeid": f"{nodeid}@{canary}", "passed": False}))
    print(json.dumps({"done": batch["id"]}), flush=True)
"""


def _stand_ins(
    monkeypatch: pytest.MonkeyPatch, run: hosted.HostedRun, scripts: list[str]
) -> list[str]:
    """Start ``run``'s in-host pytest as the first stand-in, and each later start as the next
    one (the last one again when they run out); returns the starts made, in order."""
    started: list[str] = []

    def spawn(seconds: float) -> None:
        script = scripts[min(len(started), len(scripts) - 1)]
        started.append("ends" if script is ENDS else "answers")
        process = subprocess.Popen(
            [sys.executable, "-c", script, run.salt],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            cwd=COURSE_ROOT,
        )
        run.process, run.commands, run.results = process, process.stdin, process.stdout

    monkeypatch.setattr(run, "_spawn", spawn)
    run.start(5)
    return started


@pytest.mark.timeout(60)
def test_a_batch_whose_in_host_pytest_ends_runs_once_more_in_a_fresh_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Graded beside the busy project suite as a normal user, the reference's Lab 8.1 lost
    # all 34 in-host tests of its file, unseen ("graded", no reason): the in-host pytest had
    # ended before its batch, and the next file's batch, in a fresh one, passed.
    run = hosted.HostedRun()
    started = _stand_ins(monkeypatch, run, [ENDS, ANSWERS])
    tests = ["tests/a.py::t1", "tests/a.py::t2"]
    try:
        *records, summary = run.run(tests, [], set(), 5)
    finally:
        run.stop()
    assert started == ["ends", "answers"], "the batch runs once more in a fresh in-host pytest"
    assert [(r["nodeid"], r["passed"]) for r in records] == [(t, True) for t in tests]
    assert (summary["tests"], summary["forged"], summary["wrong_canaries"]) == (2, 0, 0)
    assert summary["stalled"] is False
    # Recovered, but said: the grade's reason names how the first one ended, for review.
    assert (summary["cut"], summary["ended"]) == (False, [3])


@pytest.mark.timeout(60)
def test_an_in_host_pytest_that_always_ends_costs_one_more_start_per_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The student's code can end the in-host pytest on purpose: its tests are not run, and
    # the judge starts no more than one extra pytest for it in the whole session.
    run = hosted.HostedRun()
    started = _stand_ins(monkeypatch, run, [ENDS])
    try:
        for batch, ends in ((["tests/a.py::t1"], [3, 3]), (["tests/b.py::t2"], [3])):
            *records, summary = run.run(batch, [], set(), 5)
            assert records == [] and summary["tests"] == 0, "its tests are not run"
            assert summary["forged"] == 0 and summary["stalled"] is False
            # What the grade says (crashed, and why): each end the batch saw, by exit code.
            assert (summary["cut"], summary["ended"]) == (True, ends)
            # Its results ended as it exited: the next batch finds it gone, not exiting.
            assert run.process is not None
            run.process.wait(timeout=30)
    finally:
        run.stop()
    # At collection; once more for the first batch; and, as before, a start for each later
    # batch that finds it ended.
    assert started == ["ends", "ends", "ends"]


def test_no_lab_test_has_a_timeout_of_its_own() -> None:
    marked = [
        f"{path.name}:{number}"
        for path in sorted((LAB.root / "tests").glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "mark.timeout" in line or "timeout_func_only" in line
    ]
    assert not marked, (
        "the judge gives up on an in-host batch quiet for two tests' timeouts (hosted.py, "
        f"QUIET_MARGIN_SECONDS): a lab test with a longer timeout of its own needs a larger "
        f"bound there: {marked}"
    )


def test_an_answer_too_deep_to_decode_fails_its_call_and_says_why() -> None:
    from grader._judge import remote

    deep: Any = 0
    for _ in range(100_000):
        deep = [deep]

    async def settle() -> asyncio.Future[Any]:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        remote._settle(answer, {"op": "result", "call": 1, "value": deep})
        return answer

    answer = asyncio.run(settle())
    with pytest.raises(WireError, match="cannot be used: RecursionError"):
        answer.result()


def test_a_call_from_a_thread_of_the_test_marks_the_test_for_the_host() -> None:
    # The host runs every call on its one event loop: two agents' loops in two threads of
    # the test would meet there, one lane where the test has two. In the host's own
    # process the test's threads are real.
    from grader._judge import remote

    target = {"ref": 1, "method": "edit"}
    errors: list[BaseException | None] = []
    recorded: list[list[str]] = []

    def call(kind: str) -> None:
        needs_host.raised.clear()
        try:
            if kind == "async":
                asyncio.run(remote.call_async(target, (), {}))
            else:
                remote.call_sync(target, (), {})
        except BaseException as error:  # noqa: BLE001 - looked at in the test's thread
            errors.append(error)
        else:
            errors.append(None)
        recorded.append(list(needs_host.raised))

    for kind in ("async", "sync"):
        errors.clear()
        recorded.clear()
        worker = threading.Thread(target=call, args=(kind,))
        worker.start()
        worker.join(30)
        assert isinstance(errors[0], needs_host.NeedsHost), (kind, errors)
        assert "a thread of its own" in str(errors[0]) and recorded[0], (kind, recorded)
    needs_host.raised.clear()


def test_what_the_host_asks_the_judge_to_run_never_moves_a_test() -> None:
    from grader._judge import remote

    class Given:
        """A judge-side object handed to the host whose method touches a student's stub."""

        def peek(self) -> None:
            raise needs_host.NeedsHost("the test looks inside the student's class")

    handle = remote.codec.reference(Given())["id"]
    before = list(needs_host.raised)
    call = {"cb": 1, "ref": handle, "method": "peek", "args": [], "kwargs": {"t": "dict", "v": []}}
    reply = remote._callback_blocking(call)
    assert "error" in reply and "needs the student's objects" in reply["error"]["text"]
    assert needs_host.raised == before, "a callback the host asked for decided where a test runs"


def test_a_tool_registry_crosses_by_value_so_synchronous_code_can_list_it(
    tmp_path: Path,
) -> None:
    # build_system_prompt(cwd, create_coding_tools(ws)) graded in the judge: the registry is
    # made there (registry.py is given) and handed to the student's function in the host.
    # As a reference, its list() answered the student's synchronous code with a future, and
    # an honest submission failed ('_asyncio.Future' object has no attribute 'name').
    from grader._judge.host import _HostCodec
    from grader._judge.remote import codec as judge
    from picourse.coding_tools import create_coding_tools
    from picourse.tool import ToolRegistry

    made = create_coding_tools(tmp_path)
    host = _HostCodec(set())
    received = host.decode(json.loads(json.dumps(judge.encode(made))))
    assert type(received) is ToolRegistry
    assert received.names() == made.names() and received.definitions() == made.definitions()
    assert all(type(tool.execute).__name__ == "_JudgeObject" for tool in received), (
        "each tool's execute still runs in the judge, where the registry was made"
    )
    home = judge.decode(json.loads(json.dumps(host.encode(received))))
    assert [tool.execute for tool in home] == [tool.execute for tool in made], (
        "a registry sent back holds the judge's own functions again"
    )


@pytest.mark.parametrize(
    "tools", [[1], "not a list", "twice"], ids=["not-a-tool", "not-a-list", "a-name-twice"]
)
def test_a_forged_tool_registry_is_a_wire_error(tools: Any) -> None:
    from grader._judge.remote import codec as judge
    from picourse.tool import Tool, object_schema

    if tools == "twice":

        async def run(params: Any, ctx: Any) -> Any:
            return None

        tool = judge.encode(Tool("read", "Read.", object_schema({}), run))
        tools = [tool, tool]
    with pytest.raises(WireError, match="ToolRegistry"):
        judge.decode({"t": "registry", "v": tools})
