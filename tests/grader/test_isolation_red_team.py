"""Red team: what a determined student's code tries against other jobs and the grader, run
through the same sandbox as a submission's tests. Each attack must be neutralised (the
attacking test itself reports what it could not do) and checked again from outside.

Run as root (per-job uids and pids cgroups) and as a normal user (a user namespace per job).
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from coursekit.layout import SCAFFOLD, SOLUTIONS
from grader import GradeOptions, grade_submissions
from grader._grade import release
from grader._sandbox import JobUser, Limits, RunOutcome, UserPool, end_every_run, run_tests
from grader._sandbox._users import _controller_root, describe
from tests.grader.graded_class import LAB, result_of, solved_modules

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
LIMITS = Limits(wall_seconds=120, test_seconds=90, processes=64)
# Whole submissions that must finish: a wall no loaded machine meets (other grader modules
# run beside this one).
FINISHING = Limits(wall_seconds=600)


def job(tmp_path: Path, name: str, source: str, **values: object) -> Path:
    """A grading directory whose one test file is ``source`` with ``values`` filled in."""
    workdir = tmp_path / name / "work"
    (workdir / "tests").mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    text = textwrap.dedent(source)
    for key, value in values.items():
        text = text.replace(f"@{key}@", repr(value))
    (workdir / "tests" / "test_attack.py").write_text(text)
    return workdir


def run(workdir: Path, user: JobUser | None, limits: Limits = LIMITS) -> Verdicts:
    scratch = workdir.parent / "scratch"
    scratch.mkdir()
    return Verdicts(run_tests(workdir, scratch, limits, "bwrap", user))


def run_alone(workdir: Path) -> Verdicts:
    """``workdir``'s tests in a job of their own, as a grading run gives each submission."""
    with UserPool(1, LIMITS.processes) as pool, pool.user() as user:
        return run(workdir, user)


class Verdicts(dict[str, bool]):
    """Each test's pass or fail by name; ``output`` says why when an assertion fails."""

    def __init__(self, outcome: RunOutcome) -> None:
        assert outcome.isolation.startswith("bwrap"), outcome.isolation
        super().__init__(
            (r["nodeid"].split("::")[1], r["passed"])
            for r in outcome.records
            if r.get("type") == "test"
        )
        self.output = outcome.output_tail


def survivors(token: str) -> list[psutil.Process]:
    """Processes whose command line carries ``token``, once the dying ones are reaped."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if token in " ".join(process.info["cmdline"] or []):
            found.append(process)
    _, alive = psutil.wait_procs(found, timeout=10)
    return [p for p in alive if _running(p)]


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


DAEMON = """
import os, sys, time

def test_a_daemon_escapes_its_run():
    ready, signal_ready = os.pipe()
    os.set_inheritable(signal_ready, True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            # environment cleared, new session, reparented: the classic escape
            argv = [sys.executable, "-c", DAEMON, @token@, str(signal_ready)]
            os.execve(sys.executable, argv, {})
        os._exit(0)
    os.close(signal_ready)
    assert os.read(ready, 1) == b"!", "the daemon started"

DAEMON = '''
import os, sys, time
os.write(int(sys.argv[2]), b"!")
while True:
    for target in (@neighbour@, "/tmp/planted.py"):
        try:
            with open(target, "w") as file:
                file.write("raise SystemExit('poisoned')")
        except OSError:
            pass
    time.sleep(0.05)
'''
"""

NEIGHBOUR = """
def test_my_module_is_mine():
    with open(@module@) as file:
        assert file.read() == "honest"
"""


def test_a_daemon_dies_with_its_run_and_never_reaches_the_next_job(tmp_path: Path) -> None:
    token = f"daemon-{secrets.token_hex(6)}"
    neighbour = job(
        tmp_path, "next", NEIGHBOUR, module=str(tmp_path / "next" / "work" / "module.py")
    )
    (neighbour / "module.py").write_text("honest")
    attacker = job(tmp_path, "daemon", DAEMON, token=token, neighbour=str(neighbour / "module.py"))
    with UserPool(1, LIMITS.processes) as pool:
        with pool.user() as user:
            results = run(attacker, user)
        assert results["test_a_daemon_escapes_its_run"] is True, results.output
        assert survivors(token) == [], "the escaped daemon outlived its run"
        with pool.user() as user:  # the same slot, next
            results = run(neighbour, user)
    assert results["test_my_module_is_mine"] is True, results.output
    assert (neighbour / "module.py").read_text() == "honest"


FORK_BOMB = """
import os, signal

def test_fork_until_refused():
    forked = 0
    while forked < 10_000:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.execv("/bin/sleep", ["sleep", @token@])
        forked += 1
    assert 10 < forked < @limit@
    if @hold@:
        while True:
            signal.pause()  # held until the grader ends this run
"""

HONEST_FORKS = """
import os

def test_forty_children_start_and_end():
    children = []
    for _ in range(40):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        children.append(pid)
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)
"""


def test_a_fork_bomb_is_held_to_its_own_limit_while_a_neighbour_runs_whole(
    tmp_path: Path,
) -> None:
    """-j 2: the bomb holds every process its limit allows while the honest job runs."""
    token = f"{600 + secrets.randbelow(10_000) / 10_000:.4f}"
    bomb = job(tmp_path, "bomb", FORK_BOMB, token=token, limit=LIMITS.processes, hold=True)
    honest = job(tmp_path, "honest", HONEST_FORKS)
    outcome: list[RunOutcome] = []
    with UserPool(2, LIMITS.processes) as pool:

        def bomb_run() -> None:
            with pool.user() as user:
                scratch = bomb.parent / "scratch"
                scratch.mkdir()
                outcome.append(run_tests(bomb, scratch, LIMITS, "bwrap", user))

        thread = threading.Thread(target=bomb_run)
        thread.start()
        try:
            _wait_for(
                lambda: len(survivors_now(token)) > 40,
                "the bomb to fill its limit",
                unless=lambda: None if thread.is_alive() else _told(outcome),
            )
            with pool.user() as user:
                results = run(honest, user)
        finally:
            end_every_run()  # the bomb's run never ends on its own
            thread.join(timeout=60)
    assert results["test_forty_children_start_and_end"] is True, results.output
    assert not thread.is_alive() and len(outcome) == 1, "the bomb's run was ended"
    assert survivors(token) == []


def test_the_next_job_in_a_fork_bombs_slot_gets_the_whole_limit(tmp_path: Path) -> None:
    token = f"{600 + secrets.randbelow(10_000) / 10_000:.4f}"
    bomb = job(tmp_path, "bomb", FORK_BOMB, token=token, limit=LIMITS.processes, hold=False)
    honest = job(tmp_path, "honest", HONEST_FORKS)
    with UserPool(1, LIMITS.processes) as pool:
        with pool.user() as user:
            results = run(bomb, user)
        assert results["test_fork_until_refused"] is True, results.output
        assert survivors(token) == []
        with pool.user() as user:
            if user is not None:
                assert not [p for p in psutil.process_iter(["uids"]) if user.uid in p.info["uids"]]
            results = run(honest, user)
    assert results["test_forty_children_start_and_end"] is True, results.output


MEMORY_HOG = """
import os, signal

def _child_status(work):
    pid = os.fork()
    if pid == 0:
        try:
            work()
        except MemoryError:
            os._exit(3)
        except OSError:
            os._exit(4)
        os._exit(0)
    return os.waitpid(pid, 0)[1]

def _allocate():
    hoard = bytearray(700 << 20)  # within the address-space limit of one process

def _fill_tmp():
    ballast = bytearray(100 << 20)  # the largest process of the job: the one to go
    with open("/tmp/fill", "wb") as fill:
        for _ in range(700):
            fill.write(b"x" * (1 << 20))

def test_memory_past_the_jobs_cap_is_refused():
    assert os.WTERMSIG(_child_status(_allocate)) == signal.SIGKILL

def test_tmp_past_the_jobs_cap_is_refused():
    status = _child_status(_fill_tmp)
    written = os.path.getsize("/tmp/fill")
    os.remove("/tmp/fill")  # tmpfs pages outlive their writer
    assert (os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 4) and written < 300 << 20
"""


def test_a_jobs_processes_and_tmp_share_one_memory_cap(tmp_path: Path) -> None:
    """As root: 700 MiB in one process, or in /tmp, is more than a 256 MiB job may hold,
    though each is within the per-process and disk limits."""
    hog = job(tmp_path, "hog", MEMORY_HOG)
    with UserPool(1, LIMITS.processes, 256 << 20) as pool, pool.user() as user:
        if user is None:  # a normal user: no cgroup to cap a job with, and none claimed
            assert os.geteuid() != 0
            return
        if not _cgroup_writable("memory"):  # a container with a read-only cgroup tree
            assert "memory" not in user.limited and "memory" not in describe(user)
            return
        assert "memory" in user.limited, "where a memory cgroup is writable, a job gets one"
        results = run(hog, user)
    assert results == {
        "test_memory_past_the_jobs_cap_is_refused": True,
        "test_tmp_past_the_jobs_cap_is_refused": True,
    }, results.output


CPU_SPINNERS = """
import os, sys

def _cpu_group(pid="self"):
    with open(f"/proc/{pid}/cgroup") as groups:
        lines = groups.read().splitlines()
    # cgroup v1: "N:cpu,cpuacct:/path" or "N:cpu:/path"; v2: "0::/path"
    return next(line.split(":", 2)[2] for line in lines if "cpu" in line.split(":")[1].split(",")
                or line.startswith("0::"))

def test_spinning_daemons_stay_in_the_jobs_cpu_group():
    ready, signal_ready = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # a busy daemon in a session of its own, as a hog would start
            os.close(ready)
            os.write(signal_ready, str(os.getpid()).encode())
            while True:
                pass
        os._exit(0)
    os.close(signal_ready)
    daemon = int(os.read(ready, 32))
    try:
        mine = _cpu_group()
        assert mine.endswith(f"/grader-{os.getuid()}"), mine
        assert _cpu_group(daemon) == mine
    finally:
        os.kill(daemon, 9)
"""


def test_a_jobs_processes_share_one_cpu_weight(tmp_path: Path) -> None:
    """As root: every process of a job, a busy daemon in a new session too, is in the job's
    cpu cgroup, whose weight is every job's: the scheduler then shares the cores between
    jobs, so a hundred spinning processes take no more than one job's share from a
    neighbour (before, such a job starved an honest neighbour into its wall limit)."""
    spinners = job(tmp_path, "spinners", CPU_SPINNERS)
    with UserPool(1, LIMITS.processes) as pool, pool.user() as user:
        if user is None:  # a normal user: no cgroup to share with, and none claimed
            assert os.geteuid() != 0 and not pool.isolates_cpu  # its timeouts graded again
            return
        if not _cgroup_writable("cpu"):  # a container with a read-only cgroup tree
            assert "cpu" not in user.limited and "cpu" not in describe(user)
            assert not pool.isolates_cpu
            return
        assert "cpu" in user.limited and "cpu" in describe(user) and pool.isolates_cpu
        weights = {(group / "cpu.shares", "1024") for group in user.cgroups}
        weights |= {(group / "cpu.weight", "100") for group in user.cgroups}
        found = {(f, w) for f, w in weights if f.exists() and f.read_text().strip() == w}
        assert found, f"no default cpu weight in {user.cgroups}"
        results = run(spinners, user)
    assert results == {"test_spinning_daemons_stay_in_the_jobs_cpu_group": True}, results.output


KEYRINGS = """
import ctypes, errno, platform

# add_key, request_key and keyctl by number: Python has no binding for them.
CALLS = {"x86_64": (248, 250, 249), "aarch64": (217, 219, 218)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def _failed_with(*args):
    ctypes.set_errno(0)
    result = libc.syscall(*args)
    return None if result >= 0 else ctypes.get_errno()

def test_a_key_planted_for_the_next_job_is_refused():
    add_key = CALLS[0]
    user_keyring = ctypes.c_int(-4)
    assert _failed_with(add_key, b"user", b"planted", b"x", 1, user_keyring) == errno.EPERM

def test_the_graders_session_keyring_is_out_of_reach():
    keyctl, get_keyring_id, session_keyring = CALLS[1], 0, ctypes.c_int(-3)
    assert _failed_with(keyctl, get_keyring_id, session_keyring, 0) == errno.EPERM
    request_key = CALLS[2]
    assert _failed_with(request_key, b"user", b"any", None, session_keyring) == errno.EPERM

def test_no_key_of_before_is_listed():
    try:
        with open("/proc/keys") as keys:
            listed = keys.read()
    except PermissionError:
        listed = ""
    assert @token@ not in listed
"""

KEY_CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}
_KEYCTL_UNLINK, _USER_KEYRING = 9, -4


def _key_call(*args: object) -> int:
    import ctypes
    import platform

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    converted = [ctypes.c_int(a) if isinstance(a, int) and a < 0 else a for a in args]
    result: int = libc.syscall(*converted)
    assert result >= 0, (platform.machine(), args, ctypes.get_errno())
    return result


def _as(uid: int | None, action: Callable[[], None]) -> None:
    """``action`` as the job's uid (root's pool user) or as this process (a normal user,
    whose jobs run as its own uid in a user namespace)."""
    if uid is None:
        action()
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            action()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _plant(token: str) -> None:
    """A key such as a job of before the filter could have left in the uid's keyring."""
    add_key = KEY_CALLS[os.uname().machine][0]
    _key_call(add_key, b"user", token.encode(), b"x", 1, _USER_KEYRING)


def _unlink(token: str) -> None:
    keyctl, search = KEY_CALLS[os.uname().machine][1], 10
    key = _key_call(keyctl, search, _USER_KEYRING, b"user", token.encode(), 0)
    _key_call(keyctl, _KEYCTL_UNLINK, key, _USER_KEYRING)


def test_a_job_can_use_no_kernel_keyring(tmp_path: Path) -> None:
    """Keyrings are not namespaced: a key a job adds to its uid's keyring would be there for
    the next job of that pool uid, and the session keyring a job inherits is the grader's
    (the instructor's, after a login that made one). No test needs one: the sandbox's
    seccomp filter refuses the calls."""
    token = f"planted-{secrets.token_hex(6)}"
    keyrings = job(tmp_path, "keyrings", KEYRINGS, token=token)
    with UserPool(1, LIMITS.processes) as pool, pool.user() as user:
        uid = user.uid if user is not None else None
        _as(uid, lambda: _plant(token))
        try:
            results = run(keyrings, user)
        finally:
            _as(uid, lambda: _unlink(token))
    assert results == {
        "test_a_key_planted_for_the_next_job_is_refused": True,
        "test_the_graders_session_keyring_is_out_of_reach": True,
        "test_no_key_of_before_is_listed": True,
    }, results.output


SHARED_STALLS = """
import ctypes, errno, fcntl, os, threading

import pytest

F_SETLEASE, CLONE_NEWUSER = 1024, 0x10000000
IO_URING_SETUP = 425  # on x86_64 and arm64 alike
libc = ctypes.CDLL(None, use_errno=True)

def test_no_lease_can_stall_whoever_opens_a_file_next():
    with open("/tmp/leased", "w") as file:
        with pytest.raises(OSError) as refused:
            fcntl.fcntl(file, F_SETLEASE, fcntl.F_WRLCK)
    assert refused.value.errno == errno.EPERM

def test_no_user_namespace_can_be_made():
    ctypes.set_errno(0)
    assert libc.unshare(CLONE_NEWUSER) == -1 and ctypes.get_errno() == errno.EPERM
    pid = os.fork()  # the same call as unshare, without CLONE_NEWUSER, still works
    if pid == 0:
        os._exit(7)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
    ran = []
    worker = threading.Thread(target=lambda: ran.append(1))  # clone3 refused: clone instead
    worker.start()
    worker.join()
    assert ran == [1]

def test_no_inotify_instance_can_be_made():
    ctypes.set_errno(0)
    assert libc.inotify_init1(0) == -1 and ctypes.get_errno() == errno.EPERM

def test_no_io_uring_can_be_set_up():
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    ctypes.set_errno(0)
    assert libc.syscall(IO_URING_SETUP, 1, params) == -1 and ctypes.get_errno() == errno.EPERM

def test_a_process_holds_at_most_1024_descriptors():
    held = []
    try:
        with pytest.raises(OSError) as refused:
            for _ in range(100_000):
                held.append(os.open("/dev/null", os.O_RDONLY))
        assert refused.value.errno == errno.EMFILE and len(held) < 1024
    finally:
        for fd in held:
            os.close(fd)
"""


def test_a_job_cannot_stall_or_shut_out_the_jobs_beside_it(tmp_path: Path) -> None:
    """As a normal user every job runs as the grader's own uid: a write lease on a file that
    uid shares with the others (the venv, the pristine tests) made every neighbour that
    opened it wait 45 s, again and again, into a timeout; nested user namespaces used up the
    uid's max_user_namespaces, so no neighbour's sandbox could start; a job could take every
    inotify instance of the uid from the grader's user. io_uring is a way into the kernel no
    job needs. The seccomp filter refuses them; the descriptor limit keeps a job's share of
    the machine's open files (fs.file-max) small. Refused as root too, where the job's own
    files would allow them."""
    stalls = job(tmp_path, "stalls", SHARED_STALLS)
    results = run_alone(stalls)
    assert results == {
        "test_no_lease_can_stall_whoever_opens_a_file_next": True,
        "test_no_user_namespace_can_be_made": True,
        "test_no_inotify_instance_can_be_made": True,
        "test_no_io_uring_can_be_set_up": True,
        "test_a_process_holds_at_most_1024_descriptors": True,
    }, results.output


def _cgroup_writable(controller: str) -> bool:
    """Whether this machine lets this process make a cgroup where ``controller`` can be set."""
    found = _controller_root(controller)
    if found is None:
        return False
    probe = found[0] / f"grader-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


def survivors_now(token: str) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if p.info["cmdline"] == ["sleep", token] and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def _wait_for(
    condition: Callable[[], bool],
    what: str,
    unless: Callable[[], str | None] = lambda: None,
) -> None:
    """Until ``condition()`` holds, bounded: the event is observed, not assumed. ``unless``
    tells why it never will (say, the run that was to cause it ended)."""
    deadline = time.monotonic() + 90
    while not condition():
        never = unless()
        assert never is None, f"waiting for {what}, but {never}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _told(outcome: list[RunOutcome]) -> str:
    """What an ended run said, for a failure message."""
    if not outcome:
        return "its run ended without an outcome"
    ended = outcome[0]
    return (
        f"its run ended (exit {ended.exit_code}, timed out: {ended.timed_out}, "
        f"records {ended.records}):\n{ended.output_tail}"
    )


REACH_THE_GRADER = """
import os, signal, pytest

def test_the_grader_is_not_in_sight():
    seen = " ".join(
        open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        for pid in os.listdir("/proc") if pid.isdigit()
    )
    assert @out@ not in seen and @grader_argv@ not in seen

def test_the_grader_cannot_be_killed():
    with pytest.raises(OSError):
        os.kill(@grader@, signal.SIGKILL)

def test_the_output_folder_does_not_exist():
    assert not os.path.exists(@out@)
    with pytest.raises(OSError):
        open(@out@ + "/result.json", "w")

def test_the_job_is_neither_root_nor_the_graders_user():
    if @root@:
        assert os.getuid() not in (0, @uid@) and os.geteuid() not in (0, @uid@)
    else:
        with open("/proc/self/uid_map") as mapping:
            inside, outside, count = mapping.read().split()
        assert count == "1", "a user namespace mapping one uid only"
"""


def test_a_job_can_neither_see_nor_touch_the_grader_or_its_output(tmp_path: Path) -> None:
    """Also the private-interpreter case where it applies (pyenv as root: /root is 0700):
    the job runs the interpreter, never as root."""
    out = tmp_path / "out"
    out.mkdir()
    workdir = job(
        tmp_path,
        "reach",
        REACH_THE_GRADER,
        out=str(out),
        grader=os.getpid(),
        grader_argv=" ".join(psutil.Process().cmdline()[1:]),
        root=os.geteuid() == 0,
        uid=os.geteuid(),
    )
    results = run_alone(workdir)
    assert results == {
        "test_the_grader_is_not_in_sight": True,
        "test_the_grader_cannot_be_killed": True,
        "test_the_output_folder_does_not_exist": True,
        "test_the_job_is_neither_root_nor_the_graders_user": True,
    }, results.output
    assert list(out.iterdir()) == []


SEARCH = """
import os

def test_search_the_whole_filesystem():
    found, seen = [], 0
    for root, dirs, files in os.walk("/"):
        if root in ("/proc", "/sys", "/dev"):
            dirs[:] = []
            continue
        seen += len(files)
        found += [os.path.join(root, f) for f in files if f == "read.py" and "solutions" in root]
        found += [os.path.join(root, f) for f in files if f == @marker@]
    assert seen > 1000, "the walk saw the system"
    assert found == []
"""


def test_no_checkout_or_solution_is_visible_anywhere(tmp_path: Path) -> None:
    """A second checkout (found by os.walk before) and the running one's solutions."""
    marker = f"marker-{secrets.token_hex(4)}.txt"
    second = tmp_path / "second-checkout" / "solutions" / "08-coding-tools"
    (second / "src/picourse/coding_tools").mkdir(parents=True)
    (second / "src/picourse/coding_tools/read.py").write_text("# the answers")
    (second / marker).write_text("found")
    if os.access(Path.home(), os.W_OK):
        (Path.home() / marker).write_text("found")
    assert (SOLUTIONS / "08-coding-tools/src/picourse/coding_tools/read.py").exists()
    workdir = job(tmp_path, "search", SEARCH, marker=marker)
    try:
        results = run_alone(workdir)
    finally:
        (Path.home() / marker).unlink(missing_ok=True)
    assert results["test_search_the_whole_filesystem"] is True, results.output


# End to end: the grader's own view of results and submissions.

READ = "src/picourse/coding_tools/read.py"


# What is checked here is how the scan's notes and flags treat credit, not how much there is:
# stages 8.1 and 8.2 solved (35 points) earn the same as the whole lab would, at a third of
# the grading's cost.
SOLVED = ["8.1", "8.2"]
WORTH = sum(LAB.stage(s).weight for s in SOLVED)


def solution_with(destination: Path, extra: str) -> Path:
    """The reference modules of ``SOLVED``, with ``extra`` at the end of read.py."""
    solved_modules(destination, SOLVED)
    read = destination / READ
    read.write_text(read.read_text() + "\n" + extra)
    return destination


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("red-team")
    subs = root / "subs"
    subs.mkdir()
    # Honest code that reaches for inspect, gc, importlib, setattr and names conftest.py.
    solution_with(
        subs / "honest-variant",
        "import gc, importlib, inspect\n"
        "setattr(inspect, '_unused_by_the_lab', gc.collect())\n"
        "_SKIP = ('conftest.py', 'results.json')\n"
        "_json = importlib.import_module('json')\n",
    )
    solution_with(subs / "reaches-into-pytest", "import _pytest.runner  # noqa: F401\n")
    (subs / "untouched").mkdir()
    shutil.copytree(SCAFFOLD / "template/src", subs / "untouched/src", dirs_exist_ok=True)
    linked = subs / "linked-src"
    linked.mkdir()
    (linked / "src").symlink_to(SOLUTIONS / "08-coding-tools/src")
    out = root / "out"
    grade_submissions(subs, out, GradeOptions(jobs=2, limits=FINISHING))
    return subs, out


def test_honest_variants_of_the_scan_signals_get_full_credit(graded: tuple[Path, Path]) -> None:
    result = result_of(graded[1], "honest-variant")
    assert (result["status"], result["score"]) == ("graded", WORTH), result["reason"]
    assert "no effect on the score" in result["reason"], "the reviewer still sees the notes"


def test_a_symlinked_src_is_refused_before_it_is_read(graded: tuple[Path, Path]) -> None:
    result = result_of(graded[1], "linked-src")
    assert (result["status"], result["score"]) == ("invalid", 0)
    assert "symbolic link" in result["reason"]


def test_a_forged_result_is_graded_again_and_a_released_flag_keeps_its_credit(
    graded: tuple[Path, Path],
) -> None:
    subs, out = graded
    flagged = result_of(out, "reaches-into-pytest")
    assert (flagged["status"], flagged["score"]) == ("flagged", 0)
    assert f"passed tests worth {WORTH:g} points" in flagged["reason"]
    forged = result_of(out, "untouched")
    assert forged["score"] == 0
    forged["stages"] = [dict(s, score=s["max_score"]) for s in forged["stages"]]
    (out / "submissions/untouched/result.json").write_text(json.dumps(forged))
    honest = (out / "submissions/honest-variant/result.json").read_bytes()

    released = release(out, "reaches-into-pytest")
    assert (released.status, released.score) == ("graded", WORTH)
    grade_submissions(subs, out, GradeOptions(jobs=2, limits=FINISHING))

    assert result_of(out, "untouched")["score"] == 0, "the forgery was graded again"
    assert result_of(out, "reaches-into-pytest")["score"] == WORTH, "a release survives a rerun"
    assert (out / "submissions/honest-variant/result.json").read_bytes() == honest
    rows = {
        r["student"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))
    }
    assert (rows["untouched"]["total"], rows["reaches-into-pytest"]["total"]) == ("0", f"{WORTH:g}")


HANGS_WITH_A_DAEMON = """
import signal, subprocess

subprocess.Popen(["sleep", {token!r}], start_new_session=True)
while True:
    signal.pause()
"""


def test_a_grader_killed_from_outside_takes_its_jobs_with_it(tmp_path: Path) -> None:
    token = f"{700 + secrets.randbelow(10_000) / 10_000:.4f}"
    subs = tmp_path / "subs"
    (subs / "stuck" / "src/picourse/coding_tools").mkdir(parents=True)
    (subs / "stuck" / READ).write_text(HANGS_WITH_A_DAEMON.format(token=token))
    grader = subprocess.Popen(
        [sys.executable, "-m", "grader", "grade", str(subs), "--out", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(
            lambda: bool(survivors_now(token)),
            "the job's daemon to start",
            unless=lambda: None if grader.poll() is None else "the grader finished on its own",
        )
    finally:
        grader.kill()
        grader.wait()
    assert survivors(token) == [], "the job outlived the grader"
