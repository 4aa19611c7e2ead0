"""watch: re-run the current stage whenever a file is saved, until every core stage is green
(or, given a stage, until that stage is green)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from watchfiles import watch as watch_changes

from coursekit.commands._common import (
    add_dir_option,
    command,
    console,
    practice_dir,
    run_stage,
    run_to_next_stage,
    styled,
)
from coursekit.commands.check import check_stage
from coursekit.practice_dir import PracticeDir, StageResult
from coursekit.runner import TestRun


@dataclass
class _StageClock:
    """How long and how many runs a stage took in this watch session."""

    started: float = field(default_factory=time.monotonic)
    runs: int = 0

    def summary(self) -> str:
        minutes, seconds = divmod(int(time.monotonic() - self.started), 60)
        runs = "run" if self.runs == 1 else "runs"
        return f"{self.runs} {runs}, {minutes}:{seconds:02d} in this watch"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("watch", help="re-run the current stage on every save")
    parser.add_argument(
        "stage", nargs="?", help="watch this stage, e.g. 8.8 (default: the core stages in turn)"
    )
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    chosen = directory.stage(args.stage) if args.stage else None
    sources = directory.root / "src"
    # One watcher for the whole session, started before the first check: a save made
    # while tests run, or right after "Waiting", is never missed.
    changes = watch_changes(sources, recursive=True, yield_on_timeout=True, rust_timeout=500)
    clocks: dict[str, _StageClock] = {}
    current: str | None = None
    try:
        next(changes)  # the watcher is live once it has yielded (an empty set on timeout)
        while True:
            upcoming: StageResult | None
            if chosen is not None:
                ran, watched = run_stage(directory, chosen)
                upcoming = None if watched.state == "passed" else watched
            else:
                ran, upcoming = _next_stage_after_a_save(directory, current)
            upcoming_id = None if upcoming is None else upcoming.stage.id
            if current is not None and upcoming_id != current:
                # The stage being worked on is green now: say so before moving on.
                clocks[current].runs += 1
                console.print(
                    styled(
                        (f"✓ Stage {current} is green", "green"), f" ({clocks[current].summary()})."
                    )
                )
            if upcoming is None or (upcoming.stage.optional and not args.stage):
                _say_done(directory, args.stage, upcoming)
                return 0
            current = upcoming.stage.id
            clock = clocks.setdefault(current, _StageClock())
            clock.runs += 1
            check_stage(directory, current, ran=ran)
            console.print(f"Waiting for changes in {sources} (Ctrl-C to stop)...")
            while not next(changes):
                pass
    except KeyboardInterrupt:
        return 130
    finally:
        changes.close()


def _next_stage_after_a_save(
    directory: PracticeDir, current: str | None
) -> tuple[TestRun, StageResult | None]:
    """The run to show and the first stage not green. While a stage is red, a save runs its
    tests alone (seconds, where every stage started takes half a minute once Lab 8.5 is
    among them); once it is green, every stage started runs again, so a save that broke an
    earlier stage is caught before the watch moves on."""
    if current is not None:
        ran, watched = run_stage(directory, directory.stage(current))
        if watched.state != "passed":
            return ran, watched
    return run_to_next_stage(directory)


def _say_done(directory: PracticeDir, stage_id: str | None, optional: StageResult | None) -> None:
    if stage_id:
        console.print(styled((f"Stage {stage_id} is green.", "green"), " Stopping the watch."))
        return
    console.print(styled(("Every core stage is green.", "green"), " Stopping the watch."))
    if optional is not None:
        console.print(
            "The optional extensions come next (a bonus when graded): "
            + command(directory, "watch", optional.stage.id)
        )
