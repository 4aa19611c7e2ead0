"""check: run one stage and show the first failing test, its message and where to work."""

from __future__ import annotations

import argparse

from coursekit.commands._common import (
    add_dir_option,
    command,
    console,
    failure_text,
    practice_dir,
    run_stage,
    run_to_next_stage,
    show_diagnosis,
    show_failure,
    shown_path,
    stage_title,
    styled,
    test_counts,
)
from coursekit.practice_dir import PracticeDir, StageResult
from coursekit.runner import TestRun


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("check", help="run a stage (default: the first not green)")
    parser.add_argument("stage", nargs="?", help="e.g. 8.1")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's full output")
    parser.add_argument(
        "--expect-red",
        action="store_true",
        help="you broke your code on purpose: confirm the tests catch it",
    )
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    if args.stage:
        result = check_stage(directory, args.stage, verbose=args.verbose)
    else:
        # One run of every stage started finds the first one not green and already holds its
        # results (a stage not started yet runs on its own).
        every_stage, upcoming = run_to_next_stage(directory)
        if upcoming is None:
            console.print(
                f"Every stage is green. Try breaking one: {command(directory, 'break', '8.1')}"
            )
            return 0
        result = check_stage(directory, upcoming.stage.id, verbose=args.verbose, ran=every_stage)
    if args.expect_red:
        return _expect_red(result)
    return 0 if result.state == "passed" else 1


def check_stage(
    directory: PracticeDir, stage_id: str, *, verbose: bool = False, ran: TestRun | None = None
) -> StageResult:
    """Show the stage's result: from ``ran`` when it holds the stage's tests, else a new run."""
    stage = directory.stage(stage_id)
    if ran is None or not ran.in_file(stage.tests):
        ran, result = run_stage(directory, stage)
    else:
        (result,) = directory.results(ran, [stage])
    if verbose:
        console.print(ran.output, markup=False)
    console.print(f"{stage_title(stage)}: {test_counts(result)} tests pass.")
    failure = result.first_failure
    if failure is None:
        console.print(styled((f"✓ Stage {stage.id} is green.", "green")))
        return result
    show_failure(failure)
    show_diagnosis(directory, result)
    console.print(f"Edit: {', '.join(shown_path(directory, m) for m in stage.modules)}")
    console.print(
        f"Next: {command(directory, 'hint', stage.id)}"
        + ("" if verbose else f"   (full output: {command(directory, 'check', stage.id, '-v')})")
    )
    return result


def _expect_red(result: StageResult) -> int:
    failures = [o for o in result.required if not o.passed]
    if failures and all(o.not_implemented for o in failures):
        console.print(
            f"Stage {result.stage.id} is still on its stub: its tests fail because nothing is "
            "implemented yet, not because of a change. Make the stage green first, then break it."
        )
        return 1
    if failures:
        console.print(
            styled(
                ("Caught.", "green"),
                f" {len(failures)} test(s) went red; the first names the invariant your "
                "change broke:",
            )
        )
        for line in failure_text(failures[0], lines=3).splitlines():
            console.print(f"  {line}")
        return 0
    console.print(
        styled(
            ("Not caught:", "red"),
            f" stage {result.stage.id} is still green. Either your change keeps every "
            "promise the tests check, or you found a missing test: tell your instructor.",
        )
    )
    return 1
