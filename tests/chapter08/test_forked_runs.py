"""A forked lab run (forked.py) is a lab run: the same outcomes, output, directory and
environment as ``python -m pytest`` in a process of its own, and a run past its timeout is
ended without taking the next one with it."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
    assert "printed by a test" in runs[0].output and "1 failed, 2 passed" in runs[0].output


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
