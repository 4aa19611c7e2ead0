"""break: list a stage's catalogued mutants, or run one against a temporary copy of the
reference solution and show which tests caught it and why (never the solution's code)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from coursekit.assemble import assemble_practice_dir
from coursekit.commands._common import (
    add_dir_option,
    command,
    console,
    failure_text,
    practice_dir,
    styled,
)
from coursekit.layout import solution_root
from coursekit.practice_dir import PracticeDirError
from coursekit.reaping import lab_reaping
from coursekit.runner import run_stage_tests


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("break", help="see the tests catch a broken reference solution")
    parser.add_argument("stage", help="e.g. 8.1")
    parser.add_argument("mutant", nargs="?", help="a mutant's name (omit to list them)")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    stage = directory.stage(args.stage)
    has_solution = solution_root(directory.lab.root.name).is_dir()
    if not args.mutant:
        if has_solution:
            console.print(
                f"Mutants of stage {stage.id} (run one with "
                f"{command(directory, 'break', stage.id, 'NAME')}):"
            )
        else:
            console.print(
                f"Mistakes catalogued for stage {stage.id}. This release of the kit does not "
                "ship the reference solution, so they cannot be run here; read them as a "
                "list of what the tests catch, and try one in your own code:"
            )
        width = max(len(m.name) for m in stage.mutants)
        for mutant in stage.mutants:
            console.print(f"  {mutant.name:<{width}}  {mutant.description}")
        console.print(
            "To break your own code: edit it, then "
            + command(directory, "check", stage.id, "--expect-red")
        )
        return 0
    chosen = next((m for m in stage.mutants if m.name == args.mutant), None)
    if chosen is None:
        names = ", ".join(m.name for m in stage.mutants)
        raise PracticeDirError(f"Stage {stage.id} has no mutant {args.mutant!r}. Mutants: {names}.")
    mutant = chosen
    if not has_solution:
        raise PracticeDirError(
            "break needs the reference solution, which this release of the kit does not ship. "
            "Break your own code instead and run: "
            + command(directory, "check", stage.id, "--expect-red")
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
            outcomes = run_stage_tests(copy, [stage]).outcomes
        finally:
            # A mutant may leave processes running on purpose (kill-only-the-shell): the
            # tests' own fixture reaps after each test; this catches what a crash left.
            reaping.reap(before, Path(scratch))
    caught = [o for o in outcomes if not o.passed]
    if not caught:
        console.print(
            styled(("No test caught it.", "red"), " That is a missing test: tell your instructor.")
        )
        return 1
    console.print(styled(("Caught", "green"), f" by {len(caught)} of {len(outcomes)} tests:"))
    for outcome in caught:
        console.print(styled("  ", ("✗", "red"), f" {outcome.name}"))
        for line in failure_text(outcome, lines=3).splitlines():
            console.print(f"      {line}")
    console.print(f"The invariant it breaks: {mutant.invariant}")
    return 0
