"""What a newcomer reads: commands that paste, text printed literally, output that fits a
pipe and a terminal, and ways back from every step (reset -> restore, no git -> update --init)."""

from __future__ import annotations

import os
import pty
import select
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit import load_lab
from coursekit.assemble import apply_mutant
from coursekit.layout import COURSE_ROOT, solution_root

from .commands import Watch, add_lab_test, copy_of, next_command, practice, solve

LAB = load_lab("08")
pytestmark = pytest.mark.slow


def in_a_terminal(args: list[str], cwd: Path) -> str:
    """Run practice.py with a pty as its stdout, as in a student's terminal."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(COURSE_ROOT / "practice.py"), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"},
    )
    os.close(terminal)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], 300)
            if not ready:
                raise AssertionError("practice.py printed nothing for 300 s in a terminal")
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        process.kill()
        process.wait()
        os.close(controller)
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_next_command_runs_as_printed_from_the_practice_directory(
    fresh: Path, tmp_path: Path
) -> None:
    directory = copy_of(fresh, tmp_path)
    status = practice("status", cwd=directory)
    command = next_command(status.stdout)
    ran = subprocess.run(
        shlex.split(command), cwd=directory, capture_output=True, text=True, timeout=600
    )
    assert "Stage 8.1" in ran.stdout, (
        f"`Next: {command}` must work when pasted where the student stands: {ran.stderr}"
    )
    hint = next_command(ran.stdout)
    assert subprocess.run(shlex.split(hint), cwd=directory, capture_output=True, timeout=600)


@pytest.mark.parametrize("where", ["course", "elsewhere"])
def test_the_next_command_runs_as_printed_with_dir_from_outside(
    fresh: Path, tmp_path: Path, where: str
) -> None:
    directory = copy_of(fresh, tmp_path)
    outside = COURSE_ROOT if where == "course" else tmp_path / "elsewhere"
    outside.mkdir(exist_ok=True)
    status = practice("status", "--dir", directory, cwd=outside)
    command = next_command(status.stdout)
    assert f"--dir {directory.resolve()}" in command, command
    ran = subprocess.run(
        shlex.split(command), cwd=outside, capture_output=True, text=True, timeout=600
    )
    assert "Stage 8.1" in ran.stdout, f"`{command}` must work pasted in {outside}: {ran.stderr}"
    edit = next(line for line in ran.stdout.splitlines() if line.startswith("Edit: "))
    assert (outside / edit.removeprefix("Edit: ")).is_file(), f"{edit} opens from {outside}"
    hint = subprocess.run(
        shlex.split(next_command(ran.stdout)), cwd=outside, capture_output=True, text=True
    )
    assert hint.returncode == 0 and "Hint 1 of" in hint.stdout, hint.stderr
    again = hint.stdout.split("(Run `")[1].split("`")[0]
    assert (
        "Hint 2 of"
        in subprocess.run(shlex.split(again), cwd=outside, capture_output=True, text=True).stdout
    )
    in_terminal = in_a_terminal(["hint", "8.2", "--dir", str(directory)], outside)
    assert f"--dir {directory.resolve()}" in in_terminal.replace("\r\n", " ")


def test_hints_and_messages_are_printed_literally(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    hints = LAB.stage("8.4").hints
    bracketed = [h for h in hints if "[" in h]
    assert bracketed, "stage 8.4's hints name edits[i]"
    shown = practice("hint", "8.4", "--all", cwd=directory)
    for hint in bracketed:
        assert hint in shown.stdout, "a hint must be printed exactly as lab.toml writes it"
    shown_tty = in_a_terminal(["hint", "8.4", "--all"], directory)
    assert "edits[i]" in shown_tty


def test_piped_status_is_plain_and_a_terminal_gets_the_bar(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    (directory / LAB.stage("8.2").modules[0]).write_text(
        "def ensure_inside_workspace(workspace: str, target: str) -> None:\n    return None\n"
    )
    piped = practice("status", cwd=directory)
    assert "━" not in piped.stdout.split("┘")[-1], "no progress bar in piped output"
    assert "\x1b[" not in piped.stdout, "no colour codes in piped output"
    rows = [line for line in piped.stdout.splitlines() if "not started" in line]
    assert rows and all("/" not in line.split("not started")[1] for line in rows), (
        "a stage nobody touched shows no test counts"
    )
    assert "Running the tests of every stage you have started (8.2)" in piped.stderr, (
        "piped: one line while it runs"
    )
    assert "Running the tests" not in piped.stdout, "the results on stdout stay as they were"
    terminal = in_a_terminal(["status"], directory)
    assert "Running the tests of every stage" in terminal, "a terminal: a spinner while it runs"
    assert " 0 of 6 core stages passed" in terminal, "the bar and the count stay apart"
    assert "━" in terminal.split("└")[-1], "a terminal shows the progress bar"


def test_status_of_a_new_directory_runs_no_test(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    status = practice("status", cwd=directory)
    assert status.returncode == 0 and "Running the tests" not in status.stderr, (
        "every test of an untouched stub fails: a new directory has nothing to run"
    )
    rows = [line for line in status.stdout.splitlines() if line.startswith("│ 8.")]
    assert len(rows) == len(LAB.stages) and all("not started" in row for row in rows)
    assert "0 of 6 core stages passed" in status.stdout and "check 8.1" in status.stdout
    checked = practice("check", cwd=directory)
    assert checked.stderr.count("Running the tests of stage 8.1") == 1, checked.stderr
    assert "NotImplementedError: Lab 8.1" in checked.stdout


def test_check_shows_the_assertion_detail_and_challenge_tests_apart(
    fresh: Path, tmp_path: Path
) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, "8.1")
    add_lab_test(
        directory,
        "8.1",
        "def test_aaa_bare_assert():\n    assert _twice(2) == 5\n\n\n"
        "def _twice(x):\n    return 2 * x\n",
    )
    checked = practice("check", "8.1", cwd=directory)
    assert "assert _twice(2) == 5" in checked.stdout
    assert "where 4 = _twice(2)" in checked.stdout, "pytest's assertion detail is shown"
    assert "core," in checked.stdout and "challenge" in checked.stdout
    status = practice("status", cwd=directory)
    row = next(line for line in status.stdout.splitlines() if line.startswith("│ 8.1"))
    assert "challenge" in row, "challenge tests are counted apart in status"


def test_a_long_failure_message_shows_no_notes_meant_for_xml_readers(
    fresh: Path, tmp_path: Path
) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, "8.1")
    add_lab_test(
        directory,
        "8.1",
        "def test_aaa_long_message():\n"
        '    assert False, "\\n".join(f"line {i}" for i in range(100))\n',
    )
    for shown in (
        practice("check", "8.1", cwd=directory).stdout,
        in_a_terminal(["check", "8.1"], directory),
    ):
        assert "line 0" in shown and "line 1" in shown, shown
        assert "element text" not in shown, "pytest's note for XML readers is not the student's"


def test_watch_follows_an_optional_stage_until_it_is_green(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, "8.1", "8.2", "8.3", "8.4", "8.5", "8.6")
    with Watch(directory, "8.8") as watch:
        assert watch.waiting.wait(240), "watch 8.8 never started waiting: " + watch.output
        assert "Stage 8.8" in watch.output, "watch 8.8 checks stage 8.8, not the core"
        solve(directory, "8.8")
        assert watch.process.wait(timeout=240) == 0, watch.output
    output = watch.output
    assert "✓ Stage 8.8 is green" in output and "Every core stage" not in output


def test_restore_brings_back_what_reset_replaced(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    module = directory / LAB.stage("8.2").modules[0]
    module.write_text("# my work, version 1\n")
    reset = practice("reset", "8.2", "--yes", cwd=directory)
    assert "restore 8.2" in reset.stdout, "reset says how to get the work back"
    assert "# my work" not in module.read_text()
    restored = practice("restore", "8.2", cwd=directory)
    assert restored.returncode == 0, restored.stderr
    assert module.read_text() == "# my work, version 1\n"
    backups = sorted((directory / ".practice" / "backups").iterdir())
    twice = practice("restore", "8.2", cwd=directory)
    assert twice.returncode == 0 and "nothing changed" in twice.stdout, twice.stdout
    assert "nothing changed" in in_a_terminal(["restore", "8.2"], directory)
    assert "reset 8.2" in twice.stdout, "a second restore says how the stub comes back"
    assert sorted((directory / ".practice" / "backups").iterdir()) == backups, (
        "a restore that changes nothing makes no backup"
    )
    module.write_text("# version 2\n")
    practice("restore", "8.2", cwd=directory)
    assert module.read_text() == "# my work, version 1\n"
    back = practice("restore", "8.2", cwd=directory)
    assert back.returncode == 0 and module.read_text() == "# version 2\n", (
        "restore keeps what it replaced, so it can be undone"
    )
    none = practice("restore", "8.3", cwd=directory)
    assert none.returncode == 2 and "no backup" in none.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_update_init_commits_even_without_a_git_identity(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "XDG_CONFIG_HOME": str(home / ".config"),
    }
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "EMAIL"):
        env.pop(name, None)
    env.pop("GIT_COMMITTER_EMAIL", None)
    command = [sys.executable, str(COURSE_ROOT / "practice.py")]
    refused = subprocess.run(
        [*command, "update"], cwd=directory, env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "update --init" in refused.stderr
    init = subprocess.run(
        [*command, "update", "--init"], cwd=directory, env=env, capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    assert "git had no identity" in init.stdout, "say which identity the directory now uses"
    log = subprocess.run(
        ["git", "log", "--format=%an <%ae>"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
    )
    assert log.returncode == 0 and log.stdout.strip(), "the first commit exists"
    assert "practice.py" not in log.stdout, "the student's work is committed as the student"
    module = directory / LAB.stage("8.1").modules[0]
    module.write_text(module.read_text() + "# my change\n")
    own = subprocess.run(
        ["git", "commit", "-qam", "my change"], cwd=directory, env=env, capture_output=True
    )
    assert own.returncode == 0, f"the student's own next commit works: {own.stderr!r}"
    clean = subprocess.run(
        ["git", "status", "--porcelain"], cwd=directory, env=env, capture_output=True, text=True
    )
    assert clean.stdout == ""
    again = subprocess.run(
        [*command, "update"], cwd=directory, env=env, capture_output=True, text=True
    )
    assert again.returncode == 0 and "Already at" in again.stdout


def test_help_describes_each_command_once() -> None:
    shown = practice("--help")
    described = set()
    for line in shown.stdout.splitlines():
        words = line.split()
        # "update  <help>" in the command list, "python practice.py update  <help>" above it
        for at in (0, 2):
            if words[at : at + 1] == ["update"] and (at == 0 or words[1] == "practice.py"):
                described.add(" ".join(words[at + 1 :]))
    assert len(described) == 1, f"update is described differently in two places: {described}"


def test_without_solutions_break_says_what_this_release_offers(
    fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A student release: the course checkout without solutions/.
    course = tmp_path / "course"
    shutil.copytree(
        COURSE_ROOT,
        course,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "solutions", ".practice-releases", "__pycache__", ".*_cache"
        ),
    )
    assert not (course / solution_root(LAB.root.name).relative_to(COURSE_ROOT)).exists()
    listing = subprocess.run(
        [sys.executable, str(course / "practice.py"), "break", "8.4", "--dir", str(fresh)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(course)},
    )
    assert "does not ship the reference solution" in listing.stdout, listing.stdout + listing.stderr
    assert "break 8.4 NAME" not in listing.stdout, "never offer a command that cannot work"


def test_check_names_the_known_mistake_the_failures_look_like(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, "8.1")
    mutant = next(m for m in LAB.stage("8.1").mutants if m.name == "final-newline-adds-a-line")
    apply_mutant(directory, mutant)
    checked = practice("check", "8.1", cwd=directory)
    assert "Your failures look like a known mistake" in checked.stdout, checked.stdout
    assert mutant.invariant in checked.stdout and "hint 8.1" in checked.stdout
    solve(directory, "8.1")
    (directory / LAB.stage("8.1").modules[0]).write_text(
        (directory / LAB.stage("8.1").modules[0])
        .read_text()
        .replace("def read_file(", "def _gone(", 1)
    )
    broken = practice("check", "8.1", cwd=directory)
    assert "known mistake" not in broken.stdout, "an unrelated failure gets no diagnosis"
