"""Compiled once, run many times: what a copy of a compiled practice directory runs is what
its files say, never what they said when it was compiled (coursekit.bytecode)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from coursekit.bytecode import CopiedFiles, compile_in_place
from coursekit.runner import run_lab_tests

PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["src"]\ntestpaths = ["tests"]\n'
TEST = """
from shop.price import price


def test_the_price():
    assert price() == 10, "the price is 10"


def test_where_am_i():
    raise AssertionError("failing here")
"""


def practice_dir(root: Path, answer: int = 10) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "src/shop").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests/test_shop.py").write_text(TEST)
    (root / "src/shop/__init__.py").write_text("")
    (root / "src/shop/price.py").write_text(f"def price():\n    return {answer}\n")
    return root


def collection_trace(directory: Path, tmp_path: Path) -> str:
    """pytest's own account of how it imported the test module, in a run that writes no
    bytecode (as every lab run)."""
    log = tmp_path / "debug.log"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-p",
            "no:cacheprovider",
            f"--debug={log}",
        ],
        cwd=directory,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        check=False,
    )
    return log.read_text()


def test_a_copy_runs_the_tests_compiled_once_where_it_now_is(tmp_path: Path) -> None:
    base = practice_dir(tmp_path / "base")
    compile_in_place(base)
    copy = Path(shutil.copytree(base, tmp_path / "copy"))
    trace = collection_trace(copy, tmp_path)
    assert f"found cached rewritten pyc for {copy / 'tests/test_shop.py'}" in trace, (
        "a copy of a compiled directory must not rewrite its tests again"
    )
    failed = {o.name: o for o in run_lab_tests(copy).outcomes}["test_where_am_i"]
    assert str(copy / "tests/test_shop.py") in failed.details, (
        "a failure in a copy names the copy's file, where its source is"
    )
    assert str(base) not in failed.details


def test_a_module_replaced_after_compiling_runs_as_it_is_now(tmp_path: Path) -> None:
    base = practice_dir(tmp_path / "base")
    compile_in_place(base)
    copy = Path(shutil.copytree(base, tmp_path / "copy"))
    module = copy / "src/shop/price.py"
    before = module.stat()
    # A mutant or a student's module: the same size and the same mtime as the one compiled.
    module.write_text("def price():\n    return 11\n")
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert module.stat().st_size == before.st_size
    outcomes = {o.name: o for o in run_lab_tests(copy).outcomes}
    assert not outcomes["test_the_price"].passed, (
        "the replaced module must run, not the bytecode of the one it replaced"
    )


def test_compiled_code_installed_in_a_new_copy_of_the_same_files_is_used(
    tmp_path: Path,
) -> None:
    first = practice_dir(tmp_path / "first")
    compile_in_place(first)
    compiled = CopiedFiles.of(first)
    later = practice_dir(tmp_path / "later")
    compiled.install(later)
    trace = collection_trace(later, tmp_path)
    assert f"found cached rewritten pyc for {later / 'tests/test_shop.py'}" in trace
    failed = {o.name: o for o in run_lab_tests(later).outcomes}["test_where_am_i"]
    assert str(later / "tests/test_shop.py") in failed.details
