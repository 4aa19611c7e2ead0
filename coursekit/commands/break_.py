"""break: list a stage's catalogued mutants, or run one against a temporary copy of the
reference solution and show which tests caught it and why (never the solution's code)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from coursekit.assemble import assemble_practice_dir
from coursekit.commands._common import (
    PRACTICE,
    add_dir_option,
    console,
    first_line,
    practice_dir,
)
from coursekit.layout import solution_root
from coursekit.practice_dir import PracticeDirError
from coursekit.reaping import lab_reaping
from coursekit.runner import run_lab_tests


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("break", help="see the tests catch a broken reference solution")
    parser.add_argument("stage", help="e.g. 8.1")
    parser.add_argument("mutant", nargs="?", help="a mutant's name (omit to list them)")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    stage = directory.stage(args.stage)
    if not args.mutant:
        console.print(
            f"Mutants of stage {stage.id} (run one with {PRACTICE} break {stage.id} NAME):"
        )
        for mutant in stage.mutants:
            console.print(f"  {mutant.name:<28} {mutant.description}")
        console.print(
            f"To break your own code instead: edit it, then {PRACTICE} check "
            f"{stage.id} --expect-red"
        )
        return 0
    chosen = next((m for m in stage.mutants if m.name == args.mutant), None)
    if chosen is None:
        names = ", ".join(m.name for m in stage.mutants)
        raise PracticeDirError(f"Stage {stage.id} has no mutant {args.mutant!r}. Mutants: {names}.")
    mutant = chosen
    if not solution_root(directory.lab.root.name).is_dir():
        raise PracticeDirError(
            "break needs the reference solution, which this release of the kit does not ship. "
            f"Break your own code instead and run: {PRACTICE} check {stage.id} --expect-red"
        )
    console.print(f"Breaking the reference solution: {mutant.description}")
    reaping = lab_reaping(directory.lab)
    before = reaping.snapshot()
    with tempfile.TemporaryDirectory(prefix="break-") as scratch:
        try:
            copy = assemble_practice_dir(
                directory.lab,
                Path(scratch) / "mutant",
                solved_stages=[s.id for s in directory.lab.stages],
                mutant=mutant,
            )
            outcomes = run_lab_tests(copy, stage.marker).outcomes
        finally:
            # A mutant may leave processes running on purpose (kill-only-the-shell): the
            # tests' own fixture reaps after each test; this catches what a crash left.
            reaping.reap(before, Path(scratch))
    caught = [o for o in outcomes if not o.passed]
    if not caught:
        console.print("[red]No test caught it.[/red] That is a missing test: tell your instructor.")
        return 1
    console.print(f"[green]Caught[/green] by {len(caught)} of {len(outcomes)} tests:")
    for outcome in caught:
        console.print(f"  [red]✗[/red] {outcome.name}")
        console.print(f"      {first_line(outcome.message)}")
    console.print(f"The invariant it breaks: {mutant.invariant}")
    return 0
