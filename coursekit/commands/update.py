"""update: bring a practice directory to the course's current release with `copier update`.

copier renders the release the directory was made from and the current one, and merges
the difference into the directory: new and changed tests and runtime files arrive, while
the lab modules (listed in the release's `_skip_if_exists`) are never touched. copier
insists on a git-tracked, committed directory, so that everything it changed can be
reviewed with `git diff` and undone. `--tests-only` replaces tests/ alone (the old tests
are backed up) for a directory copier cannot update.
"""

from __future__ import annotations

import argparse
import getpass
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from coursekit.assemble import add_lab_tests
from coursekit.commands._common import add_dir_option, command, console, practice_dir
from coursekit.practice_dir import STATE_DIR, PracticeDir, PracticeDirError
from coursekit.release import ReleaseError, current_release, git

ANSWERS = ".copier-answers.yml"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "update", help="update to the course's current release (copier update)"
    )
    add_dir_option(parser)
    parser.add_argument(
        "--init",
        action="store_true",
        help="put this directory under git and make its first commit (once, before updating)",
    )
    parser.add_argument(
        "--tests-only",
        action="store_true",
        help="only replace tests/ (the old ones are backed up); needs no git",
    )


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    if args.tests_only:
        return _replace_tests(directory)
    if args.init:
        return _init_git(directory.root)
    root = directory.root
    answers = _answers(root)
    made_from = answers.get("_commit")
    template = answers.get("_src_path")
    if not made_from or not template:
        raise PracticeDirError(
            f"{root} was made without a template release, so copier cannot update it. "
            f"Run `{command(directory, 'update', '--tests-only')}` to refresh tests/."
        )
    if not Path(str(template)).is_dir():
        raise PracticeDirError(
            f"The template releases this directory was made from are gone ({template}); was "
            "the course repository moved or cloned again? Run "
            f"`{command(directory, 'update', '--tests-only')}` to refresh tests/."
        )
    if _git(root, "rev-parse", "--is-inside-work-tree") != "true":
        raise PracticeDirError(
            "copier update works on a directory under git, so that you can review and undo "
            f"what it changes. Run once: {command(directory, 'update', '--init')} "
            "(or: git init && git add -A && git commit -m 'my work') — then run update again."
        )
    if _git(root, "status", "--porcelain", "--", "."):
        raise PracticeDirError(
            "Commit your work first (git add -A && git commit -m 'before update'): copier "
            "merges the new release into a clean tree, so that git diff shows exactly what "
            "it changed. If git asks who you are: git config user.name 'Your Name' && "
            "git config user.email you@example.org"
        )
    try:
        release = current_release(directory.lab)
    except ReleaseError as error:
        raise PracticeDirError(
            f"{error}. Run `{command(directory, 'update', '--tests-only')}` to refresh tests/."
        ) from None
    if release.version == str(made_from):
        console.print(f"Already at the course's current release ({release.version}).")
        return 0
    import copier  # only an update needs it; its import costs every command ~0.5 s of CPU

    copier.run_update(str(root), defaults=True, overwrite=True, quiet=True)
    conflicts = _git(root, "diff", "--name-only", "--diff-filter=U").split()
    console.print(
        f"Updated from release {made_from} to {release.version}. Your lab modules were not "
        "touched; review everything else with `git diff`, then commit."
    )
    if conflicts:
        console.print(
            "These files had your changes and the release's changes in the same place; "
            "resolve the <<<<<<< markers in them: " + ", ".join(conflicts)
        )
    return 0


def _init_git(root: Path) -> int:
    """git init and a first commit; with no identity configured, a local one for this
    directory only (git refuses to commit without one)."""
    if _git(root, "rev-parse", "--is-inside-work-tree") == "true":
        console.print(f"{root} is already under git; commit your work and run update.")
        return 0
    try:
        git(root, "init", "--quiet")
        # The student's own identity (the kit's is only for its releases); git refuses to
        # commit without one, so a new account gets a local one.
        if not _git(root, "config", "user.email", as_kit=False):
            user = getpass.getuser()
            git(root, "config", "user.name", user, as_kit=False)
            git(root, "config", "user.email", f"{user}@localhost", as_kit=False)
            console.print(
                f"git had no identity; this directory now commits as {user} <{user}@localhost> "
                "(change it with: git config user.name 'Your Name' && git config user.email "
                "you@example.org)."
            )
        git(root, "add", "-A", as_kit=False)
        git(root, "commit", "--quiet", "--message", "My work before the first update", as_kit=False)
    except (OSError, subprocess.CalledProcessError) as error:
        raise PracticeDirError(
            f"git could not make the first commit ({error}). Is git installed? Run `git init`, "
            "`git add -A` and `git commit` yourself to see git's own message."
        ) from None
    console.print(
        f"{root} is under git now, with your work committed. Run update when the "
        "course publishes a new release."
    )
    return 0


def _replace_tests(directory: PracticeDir) -> int:
    backup = directory.root / STATE_DIR / "backups" / f"tests-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.copytree(directory.root / "tests", backup, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(directory.root / "tests")
    add_lab_tests(directory.lab, directory.root)
    console.print(
        f"Refreshed tests/ from {directory.lab.tests_dir}. The old tests are in "
        f"{backup}; your modules under src/ were not touched."
    )
    return 0


def _answers(root: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load((root / ANSWERS).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _git(root: Path, *arguments: str, as_kit: bool = True) -> str:
    """git's output, or '' when git fails or is missing (then the checks above refuse)."""
    try:
        return git(root, *arguments, as_kit=as_kit)
    except (OSError, subprocess.CalledProcessError):
        return ""
