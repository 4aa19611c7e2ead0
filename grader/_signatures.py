"""`python -m grader signatures`: run every catalogued mistake once and record the tests
it fails, so that practice.py and the grader can name the mistake a failure set looks like.

Run it after any change of the lab tests, lab.toml, the solution or its mutants.toml; it
rewrites labs/NN-*/mistakes.json (commit it with the release). About a minute per ten
mutants on two cores.
"""

from __future__ import annotations

import argparse
import signal
from types import FrameType

from rich.console import Console

from coursekit.lab import Mutant, load_lab
from coursekit.mistakes import compute_signatures, write_signatures


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "signatures", help="record which tests each catalogued mistake fails (per release)"
    )
    parser.add_argument("--chapter", default="08")
    parser.add_argument("-j", "--jobs", type=int, default=2)


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False, markup=False)
    lab = load_lab(args.chapter)
    # Stopped from outside, end like Ctrl-C: the lab runs under way finish and reap what
    # they started, instead of dying with this process and leaving their tests' children.
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, _stop)

    def progress(mutant: Mutant, failing: list[str]) -> None:
        console.print(f"{mutant.stage} {mutant.name}: fails {len(failing)} test(s)")

    signatures = compute_signatures(lab, jobs=args.jobs, progress=progress)
    survivors = [
        name for stage in signatures.values() for name, tests in stage.items() if not tests
    ]
    path = write_signatures(lab, signatures)
    console.print(f"Wrote {path}.")
    if survivors:
        console.print(f"No test fails for: {', '.join(survivors)} (a missing test).")
        return 1
    return 0


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
