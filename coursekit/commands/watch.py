"""watch: re-run the current stage whenever a file is saved, until every core stage is green."""

from __future__ import annotations

import argparse

from watchfiles import watch as watch_changes

from coursekit.commands._common import add_dir_option, console, next_stage, practice_dir
from coursekit.commands.check import check_stage


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("watch", help="re-run the current stage on every save")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    sources = directory.root / "src"
    # One watcher for the whole session, started before the first check: a save made
    # while tests run, or right after "Waiting", is never missed.
    changes = watch_changes(sources, recursive=True, yield_on_timeout=True, rust_timeout=500)
    try:
        next(changes)  # the watcher is live once it has yielded (an empty set on timeout)
        while True:
            upcoming = next_stage(directory.results(directory.run()))
            if upcoming is None or upcoming.stage.optional:
                console.print("[green]Every core stage is green.[/green] Stopping the watch.")
                return 0
            check_stage(directory, upcoming.stage.id)
            console.print(f"Waiting for changes in {sources} (Ctrl-C to stop)...")
            while not next(changes):
                pass
    except KeyboardInterrupt:
        return 130
    finally:
        changes.close()
