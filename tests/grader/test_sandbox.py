"""The bubblewrap sandbox, checked from inside: tests that pass only when the isolation
holds, run through the same path as a submission's tests."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader._sandbox import (
    JobUser,
    Limits,
    SandboxError,
    UserPool,
    _check,
    _run,
    _seccomp,
    bwrap_available,
    require_sandbox,
    run_tests,
)
from grader._sandbox._seccomp import FilterUnavailable
from grader._sandbox._users import closed_ancestors, interpreter_paths

INSIDE = """
import contextlib, os, socket, sys, pytest

def test_no_network():
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", {port}), timeout=2)

def test_writes_outside_the_private_tmp_fail_or_stay_in_it():
    for system in (sys.prefix, "/usr", "/etc", "/", "/dev"):
        with pytest.raises(OSError):
            open(os.path.join(system, "escape.txt"), "w")
    with contextlib.suppress(OSError):  # under /tmp: lands in the private tmpfs, if at all
        open({outside!r}, "w").close()

def test_paths_outside_the_allowlist_do_not_exist():
    assert not os.path.exists({secret!r})

def test_the_tests_and_the_workdir_are_read_only():
    for place in ("written.txt", __file__):
        with pytest.raises(OSError):
            open(place, "a")

def test_only_the_private_tmp_is_writable_and_home_is_there():
    assert os.environ["HOME"] == os.environ["TMPDIR"] == "/tmp"
    with open("/tmp/written.txt", "w") as f:
        f.write("ok")
"""


def test_bubblewrap_isolates_the_run(tmp_path: Path) -> None:
    assert bwrap_available(), "bubblewrap and setpriv are needed (.ci/run installs them)"
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "secret.txt").write_text("answers")
    workdir = tmp_path / "work"
    (workdir / "tests").mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "tests" / "test_inside.py").write_text(
        textwrap.dedent(INSIDE).format(
            port=port, outside=str(tmp_path / "escape.txt"), secret=str(hidden / "secret.txt")
        )
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    try:
        with UserPool(1) as pool, pool.user() as user:
            outcome = run_tests(workdir, scratch, Limits(wall_seconds=120), "bwrap", user)
    finally:
        listener.close()
    results = {
        r["nodeid"].split("::")[1]: r["passed"] for r in outcome.records if r.get("type") == "test"
    }
    assert outcome.isolation.startswith("bwrap (") and outcome.ended, outcome.output_tail
    assert results == {
        "test_no_network": True,
        "test_writes_outside_the_private_tmp_fail_or_stay_in_it": True,
        "test_paths_outside_the_allowlist_do_not_exist": True,
        "test_the_tests_and_the_workdir_are_read_only": True,
        "test_only_the_private_tmp_is_writable_and_home_is_there": True,
    }, outcome.output_tail
    assert not (tmp_path / "escape.txt").exists()
    assert not (workdir / "written.txt").exists()


def _one_passing_test(tmp_path: Path) -> tuple[Path, Path]:
    workdir = tmp_path / "work"
    (workdir / "tests").mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "tests" / "test_one.py").write_text("def test_one():\n    assert True\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return workdir, scratch


@pytest.fixture
def staging() -> Iterator[Path]:
    """A job's place as the grader makes it: in the system's temp folder, traversable by a
    pool user. (pytest's tmp_path, below a 0700 /tmp/pytest-of-root, is not: as root with
    an interpreter the pool users can reach, the job could not even look for its config.)"""
    with tempfile.TemporaryDirectory(prefix="grader-staging-") as directory:
        path = Path(directory)
        path.chmod(0o711)
        yield path


def test_without_bubblewrap_the_result_says_so(staging: Path) -> None:
    workdir, scratch = _one_passing_test(staging)
    with UserPool(1) as pool, pool.user() as user:
        if user is not None and closed_ancestors(interpreter_paths()):
            # Root, with an interpreter its pool users cannot reach (under /root): refused.
            with pytest.raises(SandboxError, match="never runs as root"):
                run_tests(workdir, scratch, Limits(wall_seconds=120), "unsafe-none", user)
            return
        outcome = run_tests(workdir, scratch, Limits(wall_seconds=120), "unsafe-none", user)
    assert outcome.isolation.startswith("unsafe") and outcome.ended
    assert [r["passed"] for r in outcome.records if r.get("type") == "test"] == [True]


def test_without_bubblewrap_student_code_never_runs_as_the_grader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root without bubblewrap the job runs as a pool user; one that cannot reach the
    interpreter must not make the job run as root instead (the Gradescope fallback)."""
    monkeypatch.setattr(_run, "closed_ancestors", lambda paths: [Path("/root")])
    user = JobUser(65_000, 65_000)
    with pytest.raises(SandboxError, match=r"/root is closed to others.*never runs as root"):
        require_sandbox("unsafe-none", Limits(), user)
    workdir, scratch = _one_passing_test(tmp_path)
    with pytest.raises(SandboxError, match="never runs as root"):
        run_tests(workdir, scratch, Limits(wall_seconds=120), "unsafe-none", user)


def test_a_failing_setup_is_reported_once_as_failed(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    (workdir / "tests").mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "tests" / "test_setup.py").write_text(
        textwrap.dedent("""
        import pytest

        @pytest.fixture
        def broken():
            raise MemoryError("no room")

        def test_needs_it(broken):
            pass

        def test_fine():
            pass
    """)
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with UserPool(1) as pool, pool.user() as user:
        outcome = run_tests(workdir, scratch, Limits(wall_seconds=120), "auto", user)
    records = [
        (r["nodeid"].split("::")[1], r["passed"])
        for r in outcome.records
        if r.get("type") == "test"
    ]
    assert records == [("test_needs_it", False), ("test_fine", True)], records


@pytest.mark.parametrize(
    ("place", "name", "error"),
    [
        (_run, "denied_calls_filter", FilterUnavailable("libseccomp.so.2: cannot open")),
        (_run, "bwrap_prefix", OSError(errno.ENOENT, "No such file or directory")),
        (subprocess, "Popen", OSError(errno.EAGAIN, "Resource temporarily unavailable")),
    ],
    ids=["seccomp-filter", "bwrap-arguments", "fork"],
)
def test_a_run_that_never_starts_leaves_no_descriptor_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, place: object, name: str, error: Exception
) -> None:
    """The channel and key pipes are made before the command is built and the process
    forked; either can fail, and a grader that lost descriptors on each such job would
    run out of them in a large class."""
    assert bwrap_available(), "bubblewrap and setpriv are needed (.ci/run installs them)"
    workdir, scratch = _one_passing_test(tmp_path)

    def fail(*args: object, **kwargs: object) -> None:
        raise error

    with UserPool(1) as pool, pool.user() as user:
        before = set(os.listdir("/proc/self/fd"))
        with monkeypatch.context() as patched:
            patched.setattr(place, name, fail)
            with pytest.raises(type(error)):
                run_tests(workdir, scratch, Limits(wall_seconds=120), "bwrap", user)
        left = set(os.listdir("/proc/self/fd")) - before
    assert not left, f"descriptors left open by a run that never started: {sorted(left)}"


def test_without_a_working_sandbox_grading_is_refused_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_check, "bwrap_available", lambda: False)
    with pytest.raises(SandboxError, match=r"apt-get install bubblewrap.*--sandbox unsafe-none"):
        require_sandbox("auto", Limits(), None)
    require_sandbox("unsafe-none", Limits(), None)  # asked for by name: allowed


def test_a_libseccomp_that_cannot_refuse_a_call_refuses_grading_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An older libseccomp knows fewer calls: the filter without one of them would let jobs
    make it, so no job runs at all."""
    assert bwrap_available(), "bubblewrap and setpriv are needed (.ci/run installs them)"
    monkeypatch.setattr(_seccomp, "DENIED", (*_seccomp.DENIED, "no_such_call"))
    _seccomp._compiled.cache_clear()
    try:
        with pytest.raises(SandboxError, match=r"system call no_such_call.*install libseccomp"):
            require_sandbox("bwrap", Limits(), None)
    finally:
        _seccomp._compiled.cache_clear()


def test_a_sandbox_that_fails_to_start_is_refused_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing = ["sh", "-c", "echo 'bwrap: No permissions to create new namespace' >&2; exit 1"]
    monkeypatch.setattr(_check, "bwrap_prefix", lambda *args: [*failing, "--"])
    with pytest.raises(SandboxError, match=r"No permissions to create new namespace.*user namesp"):
        require_sandbox("bwrap", Limits(), None)


def test_a_checkout_inside_what_jobs_see_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A course checkout under /usr, or a Python whose prefix holds the checkout."""
    monkeypatch.setattr(_check, "SOLUTIONS", tmp_path / "course" / "solutions")
    monkeypatch.setattr(_check, "visible_roots", lambda: [Path("/usr"), tmp_path / "course"])
    with pytest.raises(SandboxError, match="every job would see the solutions"):
        require_sandbox("bwrap", Limits(), None)
