"""status: every stage passed, failing or not started, with a progress bar and the next step."""

from __future__ import annotations

import argparse

from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from coursekit.commands._common import (
    add_dir_option,
    command,
    console,
    next_stage,
    practice_dir,
    run_stages,
    show_diagnosis,
    test_counts,
)

STATE_STYLE = {"passed": "green", "failing": "red", "not started": "dim"}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("status", help="show every stage's state and the next step")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    results = directory.results(run_stages(directory))
    table = Table(title=f"Chapter {directory.lab.chapter}: {directory.lab.title}")
    for column in ("stage", "title", "state", "tests"):
        table.add_column(column)
    for result in results:
        kind = " (optional)" if result.stage.optional else ""
        table.add_row(
            result.stage.id,
            result.stage.title + kind,
            Text(result.state, STATE_STYLE[result.state]),
            # An untouched stub has no score yet: counting what its tests happen to do
            # before the student wrote a line would only confuse.
            "" if result.state == "not started" else test_counts(result),
        )
    console.print(table)
    for result in results:
        if result.state == "failing":
            show_diagnosis(directory, result, prefix=f"Stage {result.stage.id}: ")
    core = [r for r in results if not r.stage.optional]
    done = sum(r.state == "passed" for r in core)
    if console.is_terminal:  # piped or redirected, a bar is only noise in the text
        console.print(ProgressBar(total=len(core), completed=done, width=40))
    # A leading space: in a terminal the bar ends without a line break.
    console.print(
        f" {done} of {len(core)} core stages passed."
        if console.is_terminal
        else f"{done} of {len(core)} core stages passed."
    )
    extensions = [r for r in results if r.stage.optional]
    if extensions:
        extra = sum(r.state == "passed" for r in extensions)
        console.print(f"{extra} of {len(extensions)} optional extension stages passed.")
    upcoming = next_stage(results)
    if upcoming is None:
        console.print(f"Every stage is green. Now try: {command(directory, 'break', '8.1')}")
    elif upcoming.stage.optional:
        console.print(
            "The core is done. The optional extensions come next (a bonus when graded): "
            + command(directory, "check", upcoming.stage.id)
        )
    else:
        console.print(f"Next: {command(directory, 'check', upcoming.stage.id)}")
    return 0
