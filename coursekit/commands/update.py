"""update: refresh tests/ from the installed course release; your modules are not touched.

(`copier update` needs a git-tracked template and practice directory; the kit's template
is a folder inside the course repository, so this command does the one refresh students
need: the tests.)
"""

from __future__ import annotations

import argparse
import shutil
import time

from coursekit.assemble import add_lab_tests
from coursekit.commands._common import add_dir_option, console, practice_dir
from coursekit.practice_dir import STATE_DIR


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("update", help="refresh tests/ from this course release")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    backup = directory.root / STATE_DIR / "backups" / f"tests-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.copytree(directory.root / "tests", backup, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(directory.root / "tests")
    add_lab_tests(directory.lab, directory.root)
    console.print(
        f"Refreshed tests/ from {directory.lab.tests_dir}. The old tests are in "
        f"{backup}; your modules under src/ were not touched."
    )
    return 0
