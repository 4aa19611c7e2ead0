"""What the subcommands share: the console, finding the directory, showing a failure."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from coursekit.lab import Stage
from coursekit.layout import COURSE_ROOT
from coursekit.mistakes import diagnose, load_signatures
from coursekit.practice_dir import PracticeDir, StageResult
from coursekit.runner import TestOutcome, TestRun

# markup=False: hints, test names and failure messages are printed exactly as written
# ("edits[i]" stays "edits[i]"); colour comes only from Text objects built with `styled`.
console = Console(highlight=False, soft_wrap=True, markup=False)
FAILURE_LINES = 8


def command(directory: PracticeDir, *words: str) -> str:
    """A practice.py command line that works pasted where the student stands: this
    interpreter, the script as reached from here, and ``--dir`` when the current directory
    is not inside the practice directory."""
    here = Path.cwd().resolve()
    script = "practice.py" if here == COURSE_ROOT else str(COURSE_ROOT / "practice.py")
    root = directory.root.resolve()
    place = [] if here.is_relative_to(root) else ["--dir", str(root)]
    return shlex.join([sys.executable, script, *words, *place])


def shown_path(directory: PracticeDir, relative: str) -> str:
    """A practice directory's file as the student can open it from where they stand."""
    here, target = Path.cwd().resolve(), directory.root.resolve() / relative
    if here.is_relative_to(directory.root.resolve()):
        return os.path.relpath(target, here)
    return str(target)


def run_stages(directory: PracticeDir, stages: list[Stage] | None = None) -> TestRun:
    """Run the tests of ``stages``, saying so while they run: a spinner in a terminal, else
    one line on stderr (the results on stdout stay as they were).

    Default: every stage that is no longer the stub it started as. Every test of an
    untouched stub fails with its NotImplementedError (the kit's own tests prove it), and
    such a stage is shown as not started, without them: nothing to run on a new directory."""
    if stages is None:
        stages = [s for s in directory.lab.stages if not directory.is_pristine(s)]
        if not stages:
            return TestRun((), "")
        what = "every stage you have started (" + ", ".join(s.id for s in stages) + ")"
    else:
        what = "stage " + ", ".join(s.id for s in stages)
    if console.is_terminal:
        with console.status(f"Running the tests of {what}..."):
            return directory.run(stages)
    print(f"Running the tests of {what}...", file=sys.stderr, flush=True)
    return directory.run(stages)


def run_stage(directory: PracticeDir, stage: Stage) -> tuple[TestRun, StageResult]:
    """Run one stage's tests: the run and the stage's result in it."""
    ran = run_stages(directory, [stage])
    (result,) = directory.results(ran, [stage])
    return ran, result


def run_to_next_stage(directory: PracticeDir) -> tuple[TestRun, StageResult | None]:
    """Run every stage started: the run and the first stage in it not green (``next_stage``)."""
    ran = run_stages(directory)
    return ran, next_stage(directory.results(ran))


def styled(*parts: str | tuple[str, str]) -> Text:
    """Literal text with some parts coloured: styled(("✗", "red"), " ", name)."""
    return Text.assemble(*parts)


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


def failure_text(outcome: TestOutcome, lines: int = FAILURE_LINES) -> str:
    """The failure's message with pytest's assertion detail (the `where` lines under a bare
    `assert`), at most ``lines`` lines."""
    text = outcome.message.strip() or outcome.details.strip()
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    if kept and kept[0].startswith("assert "):
        # A bare assert: its rewritten message shows values; the source shows what was meant.
        source = _failing_line(outcome.details)
        if source:
            kept.insert(0, source)
    return "\n".join(kept[:lines])


def _failing_line(details: str) -> str:
    """The source line above the final AssertionError of a native traceback."""
    lines = details.splitlines()
    for index in range(len(lines) - 1, 0, -1):
        if lines[index].startswith("AssertionError"):
            above = lines[index - 1].strip()
            return above if above.startswith("assert") else ""
    return ""


def show_failure(outcome: TestOutcome) -> None:
    console.print(styled(("✗", "red"), " ", outcome.name))
    for line in failure_text(outcome).splitlines():
        console.print(f"  {line}")


def test_counts(result: StageResult) -> str:
    """'20/20 core, 2/2 challenge': required tests, and the optional challenge tests apart."""
    required = result.required
    counts = f"{sum(o.passed for o in required)}/{len(required)}"
    challenge = [o for o in result.outcomes if o.challenge]
    if not challenge:
        return counts
    return f"{counts} core, {sum(o.passed for o in challenge)}/{len(challenge)} challenge"


def show_diagnosis(directory: PracticeDir, result: StageResult, prefix: str = "") -> bool:
    """Name the known mistake the stage's failures look like, if one matches well."""
    failures = [(o.nodeid, o.message) for o in result.outcomes if not o.passed]
    found = diagnose(
        result.stage, failures, load_signatures(directory.lab, directory.root / "tests")
    )
    if found is None:
        return False
    console.print(prefix + found.text)
    console.print(f"Try: {command(directory, 'hint', result.stage.id)}")
    return True


def stage_title(stage: Stage) -> str:
    return f"Stage {stage.id} — {stage.title}"
