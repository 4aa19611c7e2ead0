"""A forked lab run (forked.py) is a lab run: the same outcomes, output, directory and
environment as ``python -m pytest`` in a process of its own, and a run past its timeout is
ended without taking the next one with it."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from coursekit.runner import run_lab_tests

from .forked import ForkedPytest

TESTS = """
import os, sys
from shop.price import price


def test_the_price():
    assert price() == 10


def test_the_place():
    assert os.getcwd() == os.environ["EXPECTED_CWD"]
    assert os.getcwd() in sys.path, "the practice directory is on the path, as with -m pytest"
    print("printed by a test")
    raise AssertionError(f"bytecode written: {not sys.dont_write_bytecode}")


def test_hangs():
    if os.path.exists("HANG"):
        import time
        time.sleep(600)


def test_waits_with_a_child():
    if os.path.exists("HANG_WITH_A_CHILD"):
        import subprocess, time
        child = subprocess.Popen(["sleep", "600"])
        with open("child.pid.tmp", "w") as pid:
            pid.write(str(child.pid))
        os.rename("child.pid.tmp", "child.pid")
        time.sleep(600)
"""


def practice_dir(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "src/shop").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["src"]\n')
    (root / "tests/test_shop.py").write_text(TESTS)
    (root / "src/shop/__init__.py").write_text("")
    (root / "src/shop/price.py").write_text("def price():\n    return 10\n")
    return root


def test_a_forked_run_has_the_outcomes_and_output_of_a_run_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = practice_dir(tmp_path / "practice")
    monkeypatch.setenv("EXPECTED_CWD", str(directory))
    forked = ForkedPytest()
    try:
        runs = [run_lab_tests(directory, launch=launch) for launch in (forked, None)]
    finally:
        forked.close()
    (forked_run, own_run) = [{o.name: (o.passed, o.message) for o in run.outcomes} for run in runs]
    assert forked_run == own_run
    assert forked_run["test_the_price"] == (True, "")
    assert forked_run["test_the_place"] == (False, "AssertionError: bytecode written: False")
    assert "printed by a test" in runs[0].output and "1 failed, 3 passed" in runs[0].output


def test_a_forked_run_past_its_timeout_is_ended_and_the_next_run_goes_on(tmp_path: Path) -> None:
    directory = practice_dir(tmp_path / "practice")
    (directory / "HANG").touch()
    forked = ForkedPytest()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            run_lab_tests(directory, extra=("-k", "hangs"), timeout=2, launch=forked)
        (directory / "HANG").unlink()
        run = run_lab_tests(directory, extra=("-k", "price or hangs"), launch=forked)
    finally:
        forked.close()
    assert [(o.name, o.passed) for o in run.outcomes] == [
        ("test_the_price", True),
        ("test_hangs", True),
    ]


class _Interrupted(BaseException):
    """What pytest-timeout's Failed is to the code it interrupts: not an Exception."""


def test_a_forked_run_interrupted_mid_run_leaves_nothing_and_the_next_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest-timeout ending the project test while its forked run went on left that run's
    # answers to be read as the next run's: every later lab run on the worker failed.
    directory = practice_dir(tmp_path / "practice")
    (directory / "HANG_WITH_A_CHILD").touch()
    forked = ForkedPytest()
    real_line = ForkedPytest._line

    def interrupted_while_waiting(self: ForkedPytest, timeout: float) -> str:
        if timeout <= 60:  # the run's pid: answered at once
            return real_line(self, timeout)
        deadline = time.monotonic() + 60
        while not (directory / "child.pid").exists():  # the test's own child has started
            assert time.monotonic() < deadline, "the hanging test never started its child"
            time.sleep(0.05)
        raise _Interrupted

    ours = psutil.Process()
    before = {child.pid for child in ours.children(recursive=True)}
    try:
        with monkeypatch.context() as patch:
            patch.setattr(ForkedPytest, "_line", interrupted_while_waiting)
            with pytest.raises(_Interrupted):
                run_lab_tests(directory, extra=("-k", "waits_with"), launch=forked)
        try:
            grandchild = psutil.Process(int((directory / "child.pid").read_text()))
            left = grandchild.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            left = False
        (directory / "HANG_WITH_A_CHILD").unlink()
        run = run_lab_tests(directory, extra=("-k", "price"), launch=forked)
    finally:
        # Whatever a wrong ForkedPytest left (its server, the run, the run's child) ends here.
        stray = [c for c in ours.children(recursive=True) if c.pid not in before]
        for process in stray:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(stray, timeout=30)
        forked.close()
    assert not left, "the interrupted run's child was still running"
    assert [(o.name, o.passed) for o in run.outcomes] == [("test_the_price", True)]
