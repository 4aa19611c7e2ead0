"""status: every stage passed, failing or not started, with a progress bar and the next step."""

from __future__ import annotations

import argparse

from rich.progress_bar import ProgressBar
from rich.table import Table

from coursekit.commands._common import PRACTICE, add_dir_option, console, next_stage, practice_dir

STATE_STYLE = {"passed": "green", "failing": "red", "not started": "dim"}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("status", help="show every stage's state and the next step")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    results = directory.results(directory.run())
    table = Table(title=f"Chapter {directory.lab.chapter}: {directory.lab.title}")
    for column in ("stage", "title", "state", "tests"):
        table.add_column(column)
    for result in results:
        passed = sum(o.passed for o in result.required)
        kind = " (optional)" if result.stage.optional else ""
        style = STATE_STYLE[result.state]
        table.add_row(
            result.stage.id,
            result.stage.title + kind,
            f"[{style}]{result.state}[/{style}]",
            f"{passed}/{len(result.required)}",
        )
    console.print(table)
    core = [r for r in results if not r.stage.optional]
    done = sum(r.state == "passed" for r in core)
    console.print(ProgressBar(total=len(core), completed=done, width=40))
    console.print(f"{done} of {len(core)} core stages passed.")
    extensions = [r for r in results if r.stage.optional]
    if extensions:
        extra = sum(r.state == "passed" for r in extensions)
        console.print(f"{extra} of {len(extensions)} optional extension stages passed.")
    upcoming = next_stage(results)
    if upcoming is None:
        console.print("Every stage is green. Now try: " + f"{PRACTICE} break 8.1")
    elif upcoming.stage.optional:
        console.print(
            "The core is done. The optional extensions come next (a bonus when graded): "
            f"{PRACTICE} check {upcoming.stage.id}"
        )
    else:
        console.print(f"Next: {PRACTICE} check {upcoming.stage.id}")
    return 0
