"""Template releases: the practice template under git, so that `copier update` works.

copier updates a project only from a template kept in git, tagged with versions: it
renders the version a directory was made from and the newest one, and merges the
difference into the directory. The course keeps its template in a folder (``scaffold/``)
and the lab tests elsewhere (``labs/NN-*/tests``), so practice.py keeps, per chapter, a
small local git repository of the template as students receive it: ``scaffold/`` with the
chapter's tests under ``template/tests``, and the lab modules listed in copier's
``_skip_if_exists`` (an update never touches a student's own code). Each time the course
content changes, the next generation or update commits it and tags a new version. The
repository lives in the course checkout (``.practice-releases/``, ignored by git), so it
works offline, from a working tree with uncommitted changes, and without the course's
own git history.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from coursekit.lab import Lab
from coursekit.layout import COURSE_ROOT, SCAFFOLD

RELEASES = COURSE_ROOT / ".practice-releases"
# No signing and no hooks for the commits the kit makes.
_GIT_CONFIG = (
    "-c", "commit.gpgsign=false",
    "-c", "tag.gpgsign=false",
    "-c", "core.hooksPath=/dev/null",
)  # fmt: skip
# The releases are committed by the kit, not by the student: a fixed identity.
_KIT_IDENTITY = ("-c", "user.name=practice.py", "-c", "user.email=practice.py@localhost")


class ReleaseError(Exception):
    """No versioned template can be made here; the message says why."""


@dataclass(frozen=True)
class Release:
    repository: Path  # copier's _src_path
    version: str  # copier's _commit: a tag in that repository


def current_release(lab: Lab) -> Release:
    """The release holding the course's current template and tests, made if needed."""
    if shutil.which("git") is None:
        raise ReleaseError("git is not installed, and copier keeps template versions in git")
    repository = RELEASES / lab.chapter
    try:
        repository.mkdir(parents=True, exist_ok=True)
        with _locked(RELEASES / f"{lab.chapter}.lock"):
            if not (repository / ".git").is_dir():
                git(repository, "init", "--quiet")
            _stage_template(lab, repository)
            git(repository, "add", "--all")
            releases = _commit_count(repository)
            if releases and not git(repository, "status", "--porcelain"):
                return Release(repository, git(repository, "describe", "--tags", "--exact-match"))
            version = f"{_course_version()}.{releases + 1}"
            git(repository, "commit", "--quiet", "--message", f"Course release {version}")
            git(repository, "tag", version)
            return Release(repository, version)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", None) or error
        raise ReleaseError(f"cannot keep template releases in {RELEASES}: {detail}") from None


def _stage_template(lab: Lab, repository: Path) -> None:
    """Make the repository's files exactly the template a student receives."""
    for entry in repository.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(SCAFFOLD, repository, dirs_exist_ok=True, ignore=ignore)
    template = repository / _subdirectory(repository)
    shutil.copytree(lab.tests_dir, template / "tests", ignore=ignore)
    with open(repository / "copier.yml", "a", encoding="utf-8") as config:
        config.write(
            "\n# Added by practice.py: an update never touches a student's own modules.\n"
            + yaml.safe_dump({"_skip_if_exists": list(lab.lab_modules)}, sort_keys=False)
        )


def _subdirectory(repository: Path) -> str:
    config = yaml.safe_load((repository / "copier.yml").read_text(encoding="utf-8"))
    return str(config.get("_subdirectory", "."))


def _course_version() -> str:
    with open(COURSE_ROOT / "pyproject.toml", "rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def _commit_count(repository: Path) -> int:
    try:
        return int(git(repository, "rev-list", "--count", "HEAD"))
    except subprocess.CalledProcessError:
        return 0  # a new repository: HEAD does not exist yet


def git(repository: Path, *arguments: str, as_kit: bool = True) -> str:
    """Run git in ``repository``; its output, stripped. Raises CalledProcessError.
    ``as_kit=False``: with the identity git is configured with (the student's own)."""
    identity = _KIT_IDENTITY if as_kit else ()
    result = subprocess.run(
        ["git", *_GIT_CONFIG, *identity, *arguments],
        cwd=repository,
        capture_output=True,
        text=True,
        check=True,
        # A git hook or a caller's GIT_DIR must not point git at another repository.
        env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    )
    return result.stdout.strip()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One practice.py at a time may change a chapter's release repository."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
