"""hint: a stage's hints from lab.toml, one more each time (--all for every hint)."""

from __future__ import annotations

import argparse

from coursekit.commands._common import add_dir_option, command, console, practice_dir


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("hint", help="show the next hint of a stage")
    parser.add_argument("stage", help="e.g. 8.1")
    parser.add_argument("--all", action="store_true", help="show every hint of the stage")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    stage = directory.stage(args.stage)
    hints = stage.hints
    if not hints:
        console.print(f"Stage {stage.id} has no hints.")
        return 0
    shown = len(hints) if args.all else min(directory.hints_seen(stage) + 1, len(hints))
    for number in range(1, shown + 1) if args.all else [shown]:
        console.print(f"Hint {number} of {len(hints)} for stage {stage.id}: {hints[number - 1]}")
    directory.set_hints_seen(stage, max(shown, directory.hints_seen(stage)))
    if shown < len(hints):
        console.print(f"(Run `{command(directory, 'hint', stage.id)}` again for the next one.)")
    elif not args.all:
        console.print(
            f"(That is the last hint for stage {stage.id}; "
            f"`{command(directory, 'hint', stage.id, '--all')}` shows them all again.)"
        )
    return 0
