"""`practice.py 08 <dir>`: create a fresh practice directory, or nothing at all.

The directory is assembled in a hidden sibling and renamed into place only when complete,
so a failure halfway leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from coursekit.assemble import assemble_practice_dir
from coursekit.lab import Lab
from coursekit.layout import COURSE_ROOT, solution_root
from coursekit.release import Release, ReleaseError, current_release


class GenerateError(Exception):
    """The practice directory cannot be created; the message says why and what to do."""


def create_practice_dir(lab: Lab, destination: Path, *, solution: bool = False) -> Path:
    target = Path(os.path.abspath(destination.expanduser()))
    if target.exists() or target.is_symlink():
        raise GenerateError(
            f"{target} already exists. Choose a new directory; nothing was changed."
        )
    if target.resolve().is_relative_to(COURSE_ROOT):
        raise GenerateError(
            f"{target} lies inside the course repository. Practise outside it, e.g. ../lab08."
        )
    if solution and not solution_root(lab.root.name).is_dir():
        raise GenerateError("--solution needs solutions/, which a student release does not ship.")
    created_parents = _missing_parents(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        built = assemble_practice_dir(
            lab,
            staging / "practice",
            solved_stages=[s.id for s in lab.stages] if solution else (),
            release=_release_or_none(lab),
        )
        (built / "LEARNING.md").write_text(learning_guide(lab, target, solution), encoding="utf-8")
        built.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for parent in created_parents:
            shutil.rmtree(parent, ignore_errors=True)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return target


def _release_or_none(lab: Lab) -> Release | None:
    """A versioned template when one can be kept; without it only `copier update` is lost
    (practice.py update then refreshes the tests alone), so say why and go on."""
    try:
        return current_release(lab)
    except ReleaseError as error:
        print(f"note: {error}; `practice.py update` will refresh tests/ only.", file=sys.stderr)
        return None


def _missing_parents(target: Path) -> list[Path]:
    missing = []
    for parent in target.parents:
        if parent.exists():
            break
        missing.append(parent)
    return list(reversed(missing))[:1]  # removing the topmost removes the rest


def learning_guide(lab: Lab, directory: Path, solution: bool) -> str:
    python = sys.executable
    practice = COURSE_ROOT / "practice.py"
    handout = lab.root / "README.md"
    rows = "\n".join(
        f"| {s.id} | {s.title}{' (optional)' if s.optional else ''} | "
        f"{', '.join(f'`{m}`' for m in s.modules)} | "
        f"`pytest -m {s.marker}` |"
        for s in lab.stages
    )
    answers = (
        "This directory was made with `--solution`: it holds the reference answers. It is "
        "meant for instructors."
        if solution
        else "This directory holds no answers: each module you write is a stub that raises "
        '`NotImplementedError("Lab 8.x ... is not implemented yet")`.'
    )
    return LEARNING_TEMPLATE.format(
        chapter=lab.chapter,
        title=lab.title,
        answers=answers,
        rows=rows,
        python=python,
        practice=practice,
        directory=directory,
        handout=handout,
        handout_zh=handout.with_name("README.zh-CN.md"),
    )


LEARNING_TEMPLATE = """\
# Chapter {chapter}: {title} — your practice directory

{answers}

The chapter's handout explains every stage: {handout}
(中文版: {handout_zh}).

## Where to start

The runtime of chapters 06 and 07 (`src/picourse/`: messages, tools, the agent loop, a
scripted model) already works. Your work is the modules below, one stage at a time, in
order. Start with stage 8.1: open its module, read the docstring, and run its tests.
Stages marked optional are extensions for after the core: each is switched on by an
argument of `create_coding_tools`, and graded as a bonus.

| Stage | What | Your files | Its tests |
|---|---|---|---|
{rows}

## Commands

Run these in this directory. `pytest` here is the course's interpreter:

    {python} -m pytest -m lab8_1          # one stage
    {python} -m pytest                    # everything
    {python} {practice} status            # where you are
    {python} {practice} check             # the first stage that is not green, explained
    {python} {practice} hint 8.1          # one hint at a time (--all for all of them)
    {python} {practice} reset 8.1         # restore a stage's stub (your version is backed up)
    {python} {practice} restore 8.1       # bring back what reset replaced
    {python} {practice} watch             # re-run the current stage on every save
    {python} {practice} watch 8.8         # ... or one stage you choose (the optional ones)
    {python} {practice} break 8.1         # watch the tests catch a broken solution
    {python} {practice} agent --model M   # a real model drives your tools (see the handout)

Tests marked `challenge` prove more than the chapter asks; they are optional.

## Later course releases

Put this directory under git once: `{python} {practice} update --init` (it runs `git init`
and makes the first commit; when git has no identity yet it sets one for this directory
only, which `git config user.name` and `git config user.email` change).
When the course publishes a new release, commit your work and run
`{python} {practice} update` here: it runs `copier update` from the release this
directory was made from (see `.copier-answers.yml`) to the current one. New tests and
runtime fixes arrive; your modules are never touched. Review the result with `git diff`.
"""
