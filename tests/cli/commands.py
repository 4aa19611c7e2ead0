"""What the students' commands' tests share: practice.py run as a student runs it, and
changes made to a practice directory the way a student would make them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT
from tests.chapter08 import labrun

PRACTICE = COURSE_ROOT / "practice.py"
LAB = load_lab("08")


def practice(
    *args: str | Path,
    cwd: Path | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PRACTICE), *map(str, args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def next_command(stdout: str) -> str:
    """The command after 'Next: ' in practice.py's output."""
    line = next(line for line in stdout.splitlines() if line.startswith("Next: "))
    return line.removeprefix("Next: ").split("   (")[0]


class Watch:
    """`practice.py watch ARGS` running in ``directory``, its output read line by line;
    ``waiting`` is set once it waits for a save. Leaving the block ends and reaps it."""

    def __init__(self, directory: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PRACTICE), "watch", *args],
            cwd=directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.seen: list[str] = []
        self.waiting = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.seen.append(line)
            if "Waiting for changes" in line:
                self.waiting.set()

    @property
    def output(self) -> str:
        return "".join(self.seen)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.process.kill()
        self.process.wait()
        self._reader.join(5)


def add_lab_test(directory: Path, stage_id: str, source: str) -> None:
    """Append a test marked for ``stage_id`` to that stage's test file in ``directory``."""
    test_file = directory / "tests" / LAB.stage(stage_id).tests
    marker = LAB.stage(stage_id).marker
    test_file.write_text(f"{test_file.read_text()}\n\n@pytest.mark.{marker}\n{source}")


def copy_of(directory: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(directory, tmp_path / "copy", symlinks=True))


def solve(directory: Path, *stage_ids: str) -> None:
    # As a student's saved files, plus their compiled code (hash-checked: a student's later
    # change is compiled afresh), so that every run does not compile the solution again.
    labrun.solve(LAB, directory, stage_ids)
