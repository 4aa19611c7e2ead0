"""practice.py: make a practice directory and work through its stages.

    python practice.py 08 DIR [--solution]   create a practice directory
    python practice.py status                every stage's state and the next step
    python practice.py check [8.x] [-v]      run a stage, show the first failure
    python practice.py hint 8.x [--all]      the next hint of a stage
    python practice.py reset 8.x [--yes]     restore a stage's stub (backed up first)
    python practice.py watch                 re-run the current stage on every save
    python practice.py break 8.x [MUTANT]    watch the tests catch a broken solution
    python practice.py restore 8.x           bring back what reset (or restore) replaced
    python practice.py update                update to the course's current release (copier update)
    python practice.py agent --model NAME    drive your own tools with a real model

Subcommands act on the practice directory you are in, or on --dir DIR.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from coursekit.commands import (
    agent,
    break_,
    check,
    hint,
    reset,
    restore,
    status,
    update,
    watch,
)
from coursekit.generate import GenerateError, create_practice_dir
from coursekit.lab import load_lab
from coursekit.layout import LayoutError
from coursekit.practice_dir import PracticeDirError

COMMANDS = {
    "status": status,
    "check": check,
    "hint": hint,
    "reset": reset,
    "restore": restore,
    "watch": watch,
    "break": break_,
    "update": update,
    "agent": agent,
}
errors = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0].isdigit():
            return _new(args)
        parser = argparse.ArgumentParser(
            prog="practice.py",
            description=__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        commands = parser.add_subparsers(dest="command", metavar="COMMAND")
        for module in COMMANDS.values():
            module.add_parser(commands)
        options = parser.parse_args(args)
        if options.command is None:
            parser.print_help()
            return 2
        return int(COMMANDS[options.command].run(options))
    except (GenerateError, LayoutError, PracticeDirError) as error:
        errors.print(Text.assemble(("error:", "red"), f" {error}"))
        return 2


def _new(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="practice.py CHAPTER", description="Create a fresh practice directory."
    )
    parser.add_argument("chapter", help="chapter number, e.g. 08")
    parser.add_argument("directory", type=Path, help="a new directory outside the course repo")
    parser.add_argument(
        "--solution", action="store_true", help="instructors: include the reference solution"
    )
    options = parser.parse_args(args)
    target = create_practice_dir(
        load_lab(options.chapter), options.directory, solution=options.solution
    )
    out = Console(highlight=False, soft_wrap=True, markup=False)
    out.print(f"Created {target}. Start with its LEARNING.md, then run:")
    out.print(
        f"  cd {shlex.quote(str(target))} && {shlex.quote(sys.executable)} -m pytest -m lab8_1"
    )
    return 0
