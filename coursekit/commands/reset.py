"""reset: restore a stage's stub modules, after a confirmation, keeping a backup."""

from __future__ import annotations

import argparse
import sys

from rich.prompt import Confirm

from coursekit.commands._common import add_dir_option, command, console, practice_dir
from coursekit.practice_dir import PracticeDirError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("reset", help="restore a stage's stub (your version is backed up)")
    parser.add_argument("stage", help="e.g. 8.1")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    stage = directory.stage(args.stage)
    if directory.is_pristine(stage):
        console.print(f"Stage {stage.id} is already the stub it started as; nothing to do.")
        return 0
    files = ", ".join(stage.modules)
    if not args.yes:
        if not sys.stdin.isatty():
            raise PracticeDirError(f"reset replaces {files}. Confirm in a terminal, or pass --yes.")
        if not Confirm.ask(f"Replace {files} with the stub? Your version is backed up first"):
            console.print("Nothing changed.")
            return 1
    backup = directory.backup(stage)
    directory.restore_stub(stage)
    console.print(f"Restored the stub of stage {stage.id}. Your version is in {backup}.")
    console.print(f"To bring it back: {command(directory, 'restore', stage.id)}")
    return 0
