"""python -m grader: grade a folder of submissions, or export a Gradescope autograder.

python -m grader grade SUBMISSIONS [--out DIR] [-j N] [--regrade] [--sandbox MODE]
python -m grader release NAME --out DIR       (a flagged submission, after review)
python -m grader export gradescope --out autograder.zip
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from grader import _export, _sandbox, _signatures, _similarity
from grader._grade import GradeOptions, OutputBusy, grade_submissions, release
from grader._intake import InvalidSubmission, survey
from grader.model import SubmissionResult, printable

console = Console(highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    grade = commands.add_parser("grade", help="grade every submission in a folder")
    grade.add_argument(
        "submissions", type=Path, help="one practice directory, .zip or .tar.gz per student"
    )
    grade.add_argument(
        "--out",
        type=Path,
        default=Path("grader-output"),
        help="where reports go (default: ./grader-output)",
    )
    grade.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    grade.add_argument(
        "--regrade",
        action="store_true",
        help="grade again even submissions already graded from the same input",
    )
    grade.add_argument(
        "--sandbox",
        choices=["auto", "bwrap", "unsafe-none"],
        default="auto",
        help="auto and bwrap: refuse to grade without a working bubblewrap sandbox; "
        "unsafe-none: run student code unconfined (every result records it)",
    )
    defaults = _sandbox.Limits()
    grade.add_argument(
        "--wall",
        type=float,
        default=defaults.wall_seconds,
        help=f"seconds per submission (default {defaults.wall_seconds:g})",
    )
    grade.add_argument(
        "--test-timeout",
        type=float,
        default=defaults.test_seconds,
        help=f"seconds per test (default {defaults.test_seconds:g})",
    )
    grade.add_argument(
        "--memory-mib",
        type=int,
        default=defaults.memory_bytes >> 20,
        help=f"address-space limit in MiB (default {defaults.memory_bytes >> 20})",
    )
    grade.add_argument(
        "--job-memory-mib",
        type=int,
        default=defaults.job_memory_bytes >> 20,
        help="memory of all of a job's processes and its /tmp together, where a memory "
        f"cgroup is writable (as root on Linux; default {defaults.job_memory_bytes >> 20})",
    )
    grade.add_argument(
        "--disk-mib",
        type=int,
        default=defaults.disk_bytes >> 20,
        help=f"size of each run's private /tmp in MiB (default {defaults.disk_bytes >> 20})",
    )
    released = commands.add_parser(
        "release", help="give a flagged submission its credit after you reviewed it"
    )
    released.add_argument("name", help="the student's name, as in the gradebook")
    released.add_argument("--out", type=Path, default=Path("grader-output"))
    export = commands.add_parser("export", help="build an autograder for a course platform")
    export.add_argument("platform", choices=["gradescope"])
    export.add_argument("--out", type=Path, default=Path("autograder.zip"))
    commands.add_parser("gradescope-run", help=argparse.SUPPRESS)
    _signatures.add_parser(commands)
    _similarity.add_parser(commands)
    args = parser.parse_args(argv)
    try:
        if args.command == "grade":
            return _grade(args)
        if args.command == "signatures":
            return _signatures.run(args)
        if args.command == "similarity":
            return _similarity.run(args)
        if args.command == "release":
            result = release(args.out, args.name)
            console.print(
                f"{result.student}: {result.score:g} / {result.max_score:g}, bonus "
                f"{result.bonus:g}, released; class reports in {args.out} rebuilt"
            )
            return 0
        if args.command == "export":
            path = _export.build_gradescope_bundle(args.out)
            console.print(
                f"Wrote {path}. Upload it as the autograder of a Gradescope programming assignment."
            )
            return 0
        return _export.run_inside_gradescope()
    except (InvalidSubmission, _sandbox.SandboxError, OutputBusy) as error:
        # Literal (a path may hold brackets) and unwrapped (a path stays one piece to copy).
        errors = Console(stderr=True, highlight=False, soft_wrap=True)
        errors.print(Text.assemble(("error:", "red"), f" {error}"))
        return 2


def _end_runs_and_exit(signum: int, frame: FrameType | None) -> None:
    """A grader stopped from outside takes every run it started with it."""
    _sandbox.end_every_run()
    os._exit(128 + signum)


def _grade(args: argparse.Namespace) -> int:
    for stop in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(stop, _end_runs_and_exit)
    limits = _sandbox.Limits(
        wall_seconds=args.wall,
        test_seconds=args.test_timeout,
        memory_bytes=args.memory_mib << 20,
        job_memory_bytes=args.job_memory_mib << 20,
        disk_bytes=args.disk_mib << 20,
    )
    options = GradeOptions(
        jobs=args.jobs, regrade=args.regrade, sandbox=args.sandbox, limits=limits
    )
    found, skipped = survey(args.submissions)
    total = len(found)
    with Progress(
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=console,
    ) as progress:
        task = progress.add_task("", total=total)

        def done(result: SubmissionResult) -> None:
            # Names and reasons are the students' text: never rich markup.
            progress.update(
                task, advance=1, description=escape(f"{result.student}: {result.status}")
            )

        results = grade_submissions(args.submissions, args.out, options, on_done=done)
    for result in results:
        console.print(
            f"{result.student:<28} {result.score:6.1f} / {result.max_score:g}  "
            f"bonus {result.bonus:g}  {result.status}"
            + (f"  ({printable(result.reason[:100])})" if result.reason else ""),
            markup=False,
        )
    for entry in skipped:
        console.print(f"not graded: {entry.entry} ({printable(entry.reason)})", markup=False)
    console.print(
        f"Reports: {args.out / 'gradebook.csv'}, {args.out / 'report.html'}, "
        f"and per student under {args.out / 'submissions'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
