"""restore: bring back a stage's modules from a backup that reset (or restore) made."""

from __future__ import annotations

import argparse
from pathlib import Path

from coursekit.commands._common import add_dir_option, command, console, practice_dir
from coursekit.practice_dir import PracticeDirError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "restore", help="bring back what reset (or restore) replaced, from its backup"
    )
    parser.add_argument("stage", help="e.g. 8.1")
    parser.add_argument(
        "backup", nargs="?", help="a backup's folder name (default: the newest; --list shows all)"
    )
    parser.add_argument("--list", action="store_true", help="list the stage's backups")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    stage = directory.stage(args.stage)
    backups = directory.backups(stage)
    if args.list:
        if not backups:
            console.print(f"Stage {stage.id} has no backups yet.")
        for backup in backups:
            console.print(f"  {backup.name}")
        return 0
    if not backups:
        raise PracticeDirError(
            f"Stage {stage.id} has no backup to restore: backups are made by "
            f"`{command(directory, 'reset', stage.id)}` and by restore itself."
        )
    if args.backup is not None:
        chosen = _named(backups, args.backup, stage.id)
    else:  # the newest backup that would change something
        changes = [b for b in backups if not directory.holds(stage, b)]
        if not changes:
            console.print(
                f"Stage {stage.id} already holds what its backups keep; nothing changed. "
                f"The stub comes back with `{command(directory, 'reset', stage.id)}`."
            )
            return 0
        chosen = changes[-1]
    # Restoring is undoable too: what it replaces becomes the newest backup.
    saved = None if directory.is_pristine(stage) else directory.backup(stage)
    directory.restore_backup(stage, chosen)
    console.print(f"Restored stage {stage.id} from {chosen}.")
    if saved is not None:
        console.print(
            f"What it replaced is in {saved} (run `{command(directory, 'restore', stage.id)}` "
            "again to switch back)."
        )
    return 0


def _named(backups: list[Path], name: str, stage_id: str) -> Path:
    for backup in backups:
        if backup.name == name:
            return backup
    names = ", ".join(b.name for b in backups)
    raise PracticeDirError(f"No backup {name!r} for stage {stage_id}. Backups: {names}.")
