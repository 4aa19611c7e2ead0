"""Credit without implementing anything: one submission per attack class, all graded in
one run. Each attack sits in an otherwise unimplemented read.py, so an attack that works
shows as points; none may earn any, and an honest neighbour (the reference's read.py) still
earns exactly its credit.

The attacks run where student code runs: in the host (the process serving the tools) and
in the in-host pytest. They aim at the judge's channel key, its records, its plugin's
globals, pytest's hooks, the test files and the static scan."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from coursekit import load_lab
from grader import GradeOptions, grade_submissions
from grader._sandbox import Limits
from tests.grader.graded_class import gradebook, result_of, solved_modules, start_on_its_stub

LAB = load_lab("08")
READ = "src/picourse/coding_tools/read.py"
HONEST_STAGE = next(s.id for s in LAB.stages if READ in s.modules)  # where every attack sits
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Every test of the suite by name, as an attacker would list them from the test files.
NODEIDS = """
def _nodeids():
    import glob, os, re
    found = []
    for root in {os.getcwd(), *(p for p in glob.glob("/tmp/*/*/plugin/judge"))}:
        for path in glob.glob(os.path.join(root, "tests", "test_lab8_*.py")):
            text = open(path, encoding="utf-8").read()
            for name in re.findall(r"^def (test_\\w+)", text, re.M):
                found.append(f"tests/{os.path.basename(path)}::{name}")
    return found
"""

STUB = """

async def read_file(options, path, *, offset=1, limit=None):
    raise NotImplementedError("Lab 8.1 read is not implemented yet")
"""

FORGE = """
def _forge(send):
    import os, signal
    for nodeid in _nodeids():
        send({"type": "test", "nodeid": nodeid, "passed": True, "message": "", "markers": []})
    send({"type": "end", "exitstatus": 0})
    os.kill(os.getpid(), signal.SIGKILL)  # before the real outcomes are reported
"""

ATTACKS = {
    # The channel's key and fd read from a process's environment, then signed passes.
    "environ-key": NODEIDS
    + FORGE
    + """
import glob, hashlib, hmac, json, os

for environ in glob.glob("/proc/[0-9]*/environ"):
    try:
        data = open(environ, "rb").read()
    except OSError:
        continue
    found = dict(v.split(b"=", 1) for v in data.split(b"\\0") if b"=" in v)
    key, fd = found.get(b"GRADER_CHANNEL_KEY"), found.get(b"GRADER_CHANNEL_FD")
    if key and fd:
        try:
            out = os.open(f"/proc/{environ.split('/')[2]}/fd/{int(fd)}", os.O_WRONLY)
        except OSError:
            continue

        def send(record, out=out, key=bytes.fromhex(key.decode())):
            body = json.dumps(record).encode()
            sign = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
            os.write(out, body + b"\\t" + sign + b"\\n")

        _forge(send)
""",
    # Records written to every descriptor this process has or can open in /proc.
    "forged-records": NODEIDS
    + """
import glob, json, os

lines = b"".join(
    json.dumps({"type": "test", "nodeid": n, "passed": True, "message": "",
                "markers": []}).encode() + b"\\t" + b"0" * 64 + b"\\n"
    for n in _nodeids()
)
targets = [str(fd) for fd in range(3, 64)] + glob.glob("/proc/[0-9]*/fd/*")
for target in targets:
    try:
        fd = int(target) if target.isdigit() else os.open(target, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, lines + b'{"type": "end", "exitstatus": 0}\\tx\\n')
    except (OSError, ValueError):
        pass
""",
    # Plugin globals reached through vars(sys) and built names: the judge's own channel
    # used to send passes, or every in-host outcome made "passed".
    "plugin-globals": NODEIDS
    + FORGE
    + """
import sys

class _Forgetful(dict):
    def setdefault(self, key, default=None):
        return default

for name, module in list(vars(sys)["mod" + "ules"].items()):
    if "grader" in name or "plugin" in name:
        channel = vars(module).get("_chan" + "nel") or getattr(
            vars(module).get("st" + "ate"), "chan" + "nel", None
        )
        if channel is not None:
            _forge(getattr(channel, "se" + "nd"))
        target = vars(module).get("pl" + "an")
        if target is not None and hasattr(target, "failed"):
            setattr(target, "fail" + "ed", _Forgetful())
            target.called = type("All", (set,), {"__contains__": lambda s, k: True})()
""",
    # A pytest hook registered through frames reached with getattr: test bodies skipped.
    "hooks-via-frames": """
import sys

class _Forger:
    def pytest_pyfunc_call(self, pyfuncitem):
        return True

    def pytest_runtest_logreport(self, report):
        report.outcome = "passed"

_Forger.pytest_pyfunc_call.tryfirst = True
frame = getattr(sys, "_get" + "frame")()
while frame is not None:
    for value in list(frame.f_locals.values()):
        manager = getattr(value, "plugin" + "manager", None)
        if manager is not None and not manager.is_registered(_Forger):
            getattr(manager, "reg" + "ister")(_Forger(), "forger")
    frame = frame.f_back
""",
    # Test files found and rewritten to pass, wherever they are.
    "rewrite-tests": """
import glob, os, re

roots = {os.getcwd(), *glob.glob("/tmp/*/*/plugin/judge")}
for line in open("/proc/self/mountinfo", encoding="utf-8"):
    roots.add(line.split()[4])
for root in roots:
    for path in glob.glob(os.path.join(root, "tests", "test_lab8_*.py")):
        try:
            text = open(path, encoding="utf-8").read()
            names = re.findall(r"^def (test_\\w+)", text, re.M)
            with open(path, "w", encoding="utf-8") as out:
                out.write("".join(f"def {n}():\\n    pass\\n" for n in names))
        except OSError:
            pass
""",
    # The tests' compiled code (pytest's own bytecode, next to them) replaced by tests that
    # pass, behind the header pytest wrote, which it checks against the source.
    "poison-compiled-tests": """
import glob, marshal, os, re

roots = {os.getcwd(), *glob.glob("/tmp/*/*/plugin/judge")}
for line in open("/proc/self/mountinfo", encoding="utf-8"):
    roots.add(line.split()[4])
for root in roots:
    for target in glob.glob(os.path.join(root, "tests", "__pycache__", "test_lab8_*-pytest-*.pyc")):
        path = os.path.join(root, "tests", os.path.basename(target).split(".")[0] + ".py")
        try:
            names = re.findall(r"^def (test_\\w+)", open(path, encoding="utf-8").read(), re.M)
            code = compile("".join(f"def {n}(*a, **k):\\n    pass\\n" for n in names), path, "exec")
            header = open(target, "rb").read(16)
            with open(target, "wb") as out:
                out.write(header + marshal.dumps(code))
        except OSError:
            pass
""",
    # The parent judge killed: the run must end with no credit for what never ran.
    "kill-the-judge": """
import os, signal

if os.getppid() > 1:
    os.kill(os.getppid(), signal.SIGKILL)
""",
    # SIGINT to the parent judge: it used to stop the judge mid-collection, and the run
    # ended as the grader's `error`, graded again on every run.
    "interrupt-the-judge": """
import os, signal

if os.getppid() > 1:
    os.kill(os.getppid(), signal.SIGINT)
""",
    # The job's process limit, which the judge shares, filled from the host, and the in-host
    # pytest killed again and again: the judge's start of another one failed with EAGAIN,
    # pytest ended with an internal error, and the run was the grader's `error`.
    "fill-the-process-limit": """
import os, signal, sys, threading, time

def _sleeper():
    if os.fork() == 0:
        try:
            time.sleep(100_000)
        finally:
            os._exit(0)

def _in_host_pytests():
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                if b"hosted_plug" + b"in" in cmdline.read():
                    found.append(int(name))
        except (OSError, ValueError):
            pass
    return found

def _fill():
    end = time.monotonic() + 60
    looked = 0.0
    while time.monotonic() < end:
        try:
            _sleeper()
        except OSError:
            time.sleep(0.005)  # full: look again soon, without spinning a core
        if time.monotonic() - looked > 0.3:
            looked = time.monotonic()
            for pid in _in_host_pytests():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

if sys.argv and sys.argv[0].endswith("host.py"):
    threading.Thread(target=_fill, daemon=True).start()
""",
}


# The host's answers name "dataclasses" whose path walks into the stub of a student's module
# in the judge, whose hooks would send the test to the in-host run; there the run's own plan
# is rewritten so that every real twin passes and every canary fails. Its read_file refuses
# `..` so that the judge decides (and passes) those tests: a trust share of 1 for the rest.
DIVERT_BY_WIRE = """
import sys

def _divert():
    modules = vars(sys)["mod" + "ules"]
    main = modules.get("__main__")
    if main is not None and hasattr(main, "_Connection"):
        poison = {"t": "dc", "c": "picourse.coding_tools:mutation_queue.MutationQueue.zzz",
                  "f": {}}
        send = main._Connection.send

        def _send(self, message):
            value = message.get("value")
            if message.get("op") == "result" and not message.get("cancelled") and not (
                isinstance(value, dict) and value.get("t") == "dc"
            ):
                message = {"op": "result", "call": message["call"], "value": poison}
            send(self, message)

        main._Connection.send = _send
    hosted = modules.get("grader" + "_judge.hosted_plugin")
    if hosted is not None:
        plan = hosted.plan

        def real(run):
            base, _, token = str(run).rpartition("@")
            return token == hosted.tokens(plan.salt, base)[0]

        class Failed(dict):
            def setdefault(self, key, default=None):
                return default if real(key) else dict.setdefault(self, key, default)

        class Called(set):
            def __contains__(self, key):
                return real(key) or set.__contains__(self, key)

        plan.failed, plan.called = Failed(), Called()

_divert()

from picourse.tool import ToolOutput

async def read_file(options, path, *, offset=1, limit=None, signal=None):
    if ".." in str(path):
        return ToolOutput.error(f"{path} escapes the workspace")
    raise NotImplementedError("Lab 8.1 read is not implemented yet")
"""


def _utf7_module() -> bytes:
    """The environ-key attack in a utf-7 source file: a UTF-8 scan sees no code."""
    body = "# coding: utf-7\n" + ATTACKS["environ-key"] + STUB
    return body.encode("utf-7")


# Counts the 32-byte hex secrets that any process's environment or command line shows in
# /proc, and says how many in each failure: the channel's key must be in none (bubblewrap's
# init, the sandbox's pid 1, is the student's uid when a normal user grades, and it keeps
# the environment it was started with).
KEY_PROBE = """
import glob, re


def _keys_in_proc():
    found = 0
    for path in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
        try:
            data = open(path, "rb").read()
        except OSError:
            continue
        found += len(re.findall(rb"(?:^|[=\\0])[0-9a-f]{64}(?=\\0|$)", data))
    return found


SEEN = _keys_in_proc()


async def read_file(options, path, *, offset=1, limit=None, signal=None):
    raise NotImplementedError(f"Lab 8.1 read is not implemented yet; keys in /proc: {SEEN}")
"""


@pytest.fixture(scope="module")
def red_team_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("red-team-out")


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory, red_team_out: Path
) -> dict[str, dict[str, str]]:
    submissions = tmp_path_factory.mktemp("red-team")
    for name, attack in ATTACKS.items():
        module = submissions / name / READ
        module.parent.mkdir(parents=True)
        module.write_text(textwrap.dedent(attack) + STUB)
    divert = submissions / "divert-by-wire" / READ
    divert.parent.mkdir(parents=True)
    divert.write_text(DIVERT_BY_WIRE)
    # Its containment started (the stub and a comment), so that stage 8.2 runs: a stage
    # still on its stub is recorded failed without running, and with no judged pass the
    # diversion could earn nothing however well it worked (see the test of it below).
    start_on_its_stub(divert.parents[3], LAB.stage("8.2").modules[0])
    probe = submissions / "key-in-proc" / READ
    probe.parent.mkdir(parents=True)
    probe.write_text(KEY_PROBE)
    utf7 = submissions / "utf7-cookie" / READ
    utf7.parent.mkdir(parents=True)
    utf7.write_bytes(_utf7_module())
    # The honest neighbour: the reference's read.py, the module every attack sits in, the
    # rest on its stubs (the whole reference is graded beside the cheating samples in
    # test_grading.py).
    solved_modules(submissions / "honest", [HONEST_STAGE])
    # The honest reference must finish, also beside other grader modules on a loaded machine.
    limits = Limits(wall_seconds=300, test_seconds=30)
    grade_submissions(submissions, red_team_out, GradeOptions(jobs=2, limits=limits))
    return gradebook(red_team_out)


@pytest.mark.parametrize("attack", [*sorted(ATTACKS), "utf7-cookie", "key-in-proc"])
def test_an_attack_earns_nothing(graded: dict[str, dict[str, str]], attack: str) -> None:
    row = graded[attack]
    assert (float(row["total"]), float(row["bonus"])) == (0.0, 0.0), row
    # An attack may break its own run (garbage on the host's sockets ends in a timeout).
    assert row["status"] in ("graded", "flagged", "crashed", "timeout"), row


def test_no_process_a_job_can_read_shows_the_channels_key(
    graded: dict[str, dict[str, str]], red_team_out: Path
) -> None:
    messages = [test["message"] for test in result_of(red_team_out, "key-in-proc")["tests"]]
    counts = {int(m) for message in messages for m in re.findall(r"keys in /proc: (\d+)", message)}
    assert counts == {0}, (
        f"the student's code read a 32-byte hex secret in /proc ({sorted(counts)} found, "
        "none expected): the channel's key must reach the judge through a pipe, never an "
        f"environment or a command line. {messages[:1]}"
    )


def test_an_interrupted_judge_goes_on_and_scores_the_run(
    graded: dict[str, dict[str, str]],
) -> None:
    row = graded["interrupt-the-judge"]
    assert row["status"] == "graded", row


def test_a_full_process_table_is_the_students_doing_never_the_graders_error(
    graded: dict[str, dict[str, str]],
) -> None:
    row = graded["fill-the-process-limit"]
    assert row["status"] in ("crashed", "graded"), (
        f"a judge that cannot start the in-host pytest again goes on without it: {row}"
    )
    if row["status"] == "crashed":
        # No room to start it again, or it was ended (the student's code kills it) again.
        stalled, cut = "could not go on", "ended before they all ran"
        assert stalled in row["reason"] or cut in row["reason"], row


def test_the_hosts_answers_never_decide_where_a_test_runs(
    graded: dict[str, dict[str, str]],
) -> None:
    row = graded["divert-by-wire"]
    # What its read_file really does (refuse `..`) earns the few 8.2 tests of it, no more:
    # eight of 76 (`..` four ways, a sibling tried as `../name` in three, `..` out and back
    # in), of 15 points. A new 8.2 test that leaves through `..` raises this: count again.
    # The eleven in-host 8.2 tests (they set HOME and PROJ, or change the current folder)
    # earn what any in-host report earns: their value times the share of judge-decided
    # tests passed, 8 of 65.
    judged = 15 * 8 / 76
    in_host = 11 * (15 / 76) * (8 / 65)
    assert float(row["total"]) <= round(judged + in_host, 2) and float(row["bonus"]) == 0.0, (
        f"an answer of the host moved the judge's tests to the in-host run: {row}"
    )
    assert float(row["stage 8.2"]) > 0, (
        f"stage 8.2 ran and the judge passed its `..` tests, or this proves nothing: {row}"
    )


def test_the_honest_neighbour_keeps_exactly_its_credit(graded: dict[str, dict[str, str]]) -> None:
    row = graded["honest"]
    weight = LAB.stage(HONEST_STAGE).weight
    assert (row["status"], float(row["total"])) == ("graded", weight), row
    assert float(row[f"stage {HONEST_STAGE}"]) == weight, row
    assert float(row["bonus"]) > 0, f"the stage's challenge tests pass too: {row}"
