"""What the subcommands share: the console, finding the directory, showing a failure."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from coursekit.lab import Stage
from coursekit.layout import COURSE_ROOT
from coursekit.mistakes import diagnose, load_signatures
from coursekit.practice_dir import PracticeDir, StageResult
from coursekit.runner import TestOutcome

# markup=False: hints, test names and failure messages are printed exactly as written
# ("edits[i]" stays "edits[i]"); colour comes only from Text objects built with `styled`.
console = Console(highlight=False, soft_wrap=True, markup=False)
FAILURE_LINES = 8


def practice_command() -> str:
    """The practice.py command as it works from where the student stands, ready to paste:
    this interpreter and, outside the course root, the script's absolute path."""
    script = COURSE_ROOT / "practice.py"
    shown = "practice.py" if Path.cwd().resolve() == COURSE_ROOT else str(script)
    return f"{shlex.quote(sys.executable)} {shlex.quote(shown)}"


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
    console.print(f"Try: {practice_command()} hint {result.stage.id}")
    return True


def stage_title(stage: Stage) -> str:
    return f"Stage {stage.id} — {stage.title}"
