"""practice.py: make a practice directory and work through its stages.

python practice.py 08 DIR [--solution]     create a practice directory
python practice.py status|check|hint|reset|watch|break ...   (see --help)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from coursekit.generate import GenerateError, create_practice_dir
from coursekit.lab import load_lab
from coursekit.layout import LayoutError

console = Console(stderr=False, highlight=False)
errors = Console(stderr=True, highlight=False)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0].isdigit():
        return _new(args)
    parser = argparse.ArgumentParser(
        prog="practice.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(args)
    parser.print_help()
    return 2


def _new(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="practice.py CHAPTER", description="Create a fresh practice directory."
    )
    parser.add_argument("chapter", help="chapter number, e.g. 08")
    parser.add_argument("directory", type=Path, help="a new directory outside the course repo")
    parser.add_argument(
        "--solution", action="store_true", help="instructors: include the reference solution"
    )
    options = parser.parse_args(args)
    try:
        lab = load_lab(options.chapter)
        target = create_practice_dir(lab, options.directory, solution=options.solution)
    except (GenerateError, LayoutError) as error:
        errors.print(f"[red]error:[/red] {error}")
        return 1
    console.print(f"Created [bold]{target}[/bold]. Start with its LEARNING.md, then run:")
    console.print(f"  cd {target} && {sys.executable} -m pytest -m lab8_1")
    return 0
