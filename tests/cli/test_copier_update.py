"""`copier update` end to end: a practice directory made from one course release is
brought to the next one, and the student's own modules are never touched.

The course is copied to a temporary folder, so that a new release can be made there by
changing its files, as an instructor would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT, solution_root

LAB = load_lab("08")
READ_MODULE = LAB.stage("8.1").modules[0]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="copier keeps releases in git"),
]


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, check=False, timeout=300
    )


def git(directory: Path, *args: str) -> str:
    identity = ["-c", "user.name=Student", "-c", "user.email=student@example.org"]
    result = run("git", *identity, *args, cwd=directory)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A private copy of the course (its working tree, without any release made yet)."""
    return Path(
        shutil.copytree(
            COURSE_ROOT,
            tmp_path / "course",
            ignore=shutil.ignore_patterns(
                ".git", ".venv", ".practice-releases", "__pycache__", "*_cache", "grader-output"
            ),
        )
    )


def practice(course: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, course / "practice.py", *args, cwd=cwd)


def answers(directory: Path) -> dict[str, str]:
    loaded = yaml.safe_load((directory / ".copier-answers.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_a_new_release_reaches_the_directory_and_the_students_code_stays(
    course: Path, tmp_path: Path
) -> None:
    lab = tmp_path / "lab08"
    assert practice(course, "08", lab, cwd=tmp_path).returncode == 0
    made_from = answers(lab)
    assert made_from["_src_path"] == str(course / ".practice-releases" / "08")
    assert not (lab / ".git").exists(), "a new practice directory has no git history"

    # The student solves stage 8.1 and commits, as the handout says.
    mine = (solution_root(LAB.root.name) / READ_MODULE).read_text() + "# my own comment\n"
    (lab / READ_MODULE).write_text(mine)
    git(lab, "init", "--quiet")
    git(lab, "add", "-A")
    git(lab, "commit", "--quiet", "-m", "my work")
    same = practice(course, "update", cwd=lab)
    assert same.returncode == 0 and "Already at" in same.stdout

    # The course publishes a release: a new test, a runtime fix and a changed stub.
    tests = course / "labs" / LAB.root.name / "tests"
    (tests / "test_lab8_1_read.py").write_text(
        (tests / "test_lab8_1_read.py").read_text() + "\n\ndef test_added_later() -> None:\n"
        "    assert True\n"
    )
    runtime = course / "scaffold" / "template" / "src" / "picourse" / "messages.py"
    runtime.write_text(runtime.read_text() + "# fixed in the next release\n")
    stub = course / "scaffold" / "template" / READ_MODULE
    stub.write_text(stub.read_text() + "# a clearer stub\n")

    (lab / "scratch.txt").write_text("not committed")
    dirty = practice(course, "update", cwd=lab)
    assert dirty.returncode == 2 and "Commit your work first" in dirty.stderr
    assert answers(lab)["_commit"] == made_from["_commit"], "a refused update changes nothing"
    (lab / "scratch.txt").unlink()

    updated = practice(course, "update", cwd=lab)
    assert updated.returncode == 0, updated.stderr
    assert "test_added_later" in (lab / "tests" / "test_lab8_1_read.py").read_text()
    assert (
        (lab / "src" / "picourse" / "messages.py")
        .read_text()
        .endswith("# fixed in the next release\n")
    ), "given runtime files come with the release"
    assert (lab / READ_MODULE).read_text() == mine, "the student's module is never touched"
    assert answers(lab)["_commit"] != made_from["_commit"]
    changed = git(lab, "status", "--porcelain").split("\n")
    assert not any(READ_MODULE in line for line in changed)
    assert "<<<<<<<" not in git(lab, "diff"), "no conflicts: the student's files were skipped"
    passed = run(
        sys.executable, "-m", "pytest", "-q", "-m", "lab8_1", "-p", "no:cacheprovider", cwd=lab
    )
    assert " passed" in passed.stdout and "failed" not in passed.stdout, passed.stdout[-2000:]


def test_without_git_update_says_what_to_do_and_tests_only_still_works(
    course: Path, tmp_path: Path
) -> None:
    lab = tmp_path / "lab08"
    assert practice(course, "08", lab, cwd=tmp_path).returncode == 0
    refused = practice(course, "update", cwd=lab)
    assert refused.returncode == 2 and "git init" in refused.stderr
    tests_only = practice(course, "update", "--tests-only", cwd=lab)
    assert tests_only.returncode == 0 and "Refreshed tests/" in tests_only.stdout


def test_a_directory_made_without_a_release_is_told_to_refresh_tests_only(
    course: Path, tmp_path: Path
) -> None:
    lab = tmp_path / "lab08"
    assert practice(course, "08", lab, cwd=tmp_path).returncode == 0
    shutil.rmtree(course / ".practice-releases")
    git(lab, "init", "--quiet")
    git(lab, "add", "-A")
    git(lab, "commit", "--quiet", "-m", "my work")
    gone = practice(course, "update", cwd=lab)
    assert gone.returncode == 2 and "--tests-only" in gone.stderr
    assert os.listdir(course).count(".practice-releases") == 0, "nothing is re-created blindly"
