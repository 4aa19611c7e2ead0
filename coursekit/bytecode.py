"""Compiled code for a copy of the lab that many test runs share.

Every lab run starts pytest, and pytest rewrites the asserts of each test module it
imports: about 0.8 s of CPU for the whole suite, paid again by every run of the same tests.
A copy that many runs share (the grader's pristine copy, the catalogue's base directory) is
compiled once, in place; its copies, and later copies of the same files, run that code.

What is written is never served stale beside a changed source, wherever the copy moves:
- pytest's rewritten test modules, which pytest (>= 9.2) checks against the source's hash
  and points at the file it loads them for;
- every other module as hash-checked bytecode: a module replaced later (a student's, a
  mutant) is compiled afresh whatever its size and mtime, where timestamp bytecode could
  be served stale for a module replaced within the same second by one of the same size.

Runs of the lab tests never write bytecode (``coursekit.runner``): they only read this.
"""

from __future__ import annotations

import compileall
import os
import py_compile
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_IMODE

from coursekit.runner import LAB_PYTEST_ENV

# What pytest rewrites and compiles itself (test modules and conftest.py).
_PYTEST_OWN = re.compile(r"(^|[/\\])(test_[^/\\]*|conftest)\.py$")


def writing_env() -> dict[str, str]:
    """The environment of a pytest run that writes bytecode and loads only the plugin a lab
    run loads."""
    env = {**os.environ, **LAB_PYTEST_ENV}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def compile_in_place(directory: Path) -> None:
    """Compile a practice directory: its tests the way pytest rewrites them (a collection
    that writes its bytecode), every other module hash-checked."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=directory,
        env=writing_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if collected.returncode not in (0, 5):  # 5: no tests collected
        raise RuntimeError(
            f"cannot collect the tests in {directory}:\n{collected.stdout}{collected.stderr}"
        )
    hash_checked(directory)


def hash_checked(directory: Path) -> None:
    """Every module but pytest's own compiled hash-checked, replacing the timestamp bytecode
    that a collection wrote."""
    compileall.compile_dir(
        directory,
        rx=_PYTEST_OWN,
        force=True,
        quiet=1,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )


@dataclass(frozen=True)
class CopiedFiles:
    """Files of one directory with their permission bits, to be written into another copy of
    it: the bytecode of a compiled directory (by default), or every file of a rendered one."""

    files: Mapping[str, tuple[bytes, int]]  # by path relative to the directory

    @classmethod
    def of(cls, root: Path, pattern: str = "__pycache__/*.pyc") -> CopiedFiles:
        return cls(
            {
                path.relative_to(root).as_posix(): (path.read_bytes(), S_IMODE(path.stat().st_mode))
                for path in sorted(root.rglob(pattern))
                if path.is_file()
            }
        )

    def install(self, root: Path) -> None:
        for name, (data, mode) in self.files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(mode)
