"""What the subcommands share: the console, finding the directory, showing a failure."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from coursekit.lab import Stage
from coursekit.practice_dir import PracticeDir, StageResult
from coursekit.runner import TestOutcome

console = Console(highlight=False, soft_wrap=True)
PRACTICE = "python practice.py"


def add_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir", type=Path, default=None, help="the practice directory (default: the current one)"
    )


def practice_dir(args: argparse.Namespace) -> PracticeDir:
    return PracticeDir.find(args.dir)


def next_stage(results: list[StageResult]) -> StageResult | None:
    """The first core stage that is not green, else the first optional one."""
    for optional in (False, True):
        for result in results:
            if result.stage.optional == optional and result.state != "passed":
                return result
    return None


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def show_failure(outcome: TestOutcome) -> None:
    console.print(f"[red]✗[/red] {outcome.name}")
    console.print(f"  {first_line(outcome.message) or first_line(outcome.details)}")


def stage_title(stage: Stage) -> str:
    return f"Stage {stage.id} — {stage.title}"
