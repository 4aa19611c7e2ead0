"""practice.py end to end: the generator, every subcommand and their error paths."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.assemble import apply_mutant
from coursekit.layout import COURSE_ROOT, SCAFFOLD
from tests.chapter08.labrun import build
from tests.cli.commands import LAB, Watch, copy_of, next_command, practice, solve

ALL_STAGES = [stage.id for stage in LAB.stages]

pytestmark = pytest.mark.slow

# ---------------------------------------------------------------- the generator


def test_a_fresh_directory_has_stubs_tests_guide_and_no_answers(fresh: Path) -> None:
    assert (fresh / "LEARNING.md").read_text().count("lab8_") >= 6
    assert "holds no answers" in (fresh / "LEARNING.md").read_text()
    assert (fresh / ".copier-answers.yml").is_file(), "copier's answers file is kept"
    assert not (fresh / ".git").exists(), "no git history in a practice directory"
    for stage in LAB.stages:
        for module in stage.modules:
            assert (fresh / module).read_bytes() == (SCAFFOLD / "template" / module).read_bytes()
    assert sorted(p.name for p in (fresh / "tests").glob("test_*.py")) == sorted(
        s.tests for s in LAB.stages
    )


def test_pytest_runs_in_it_offline_with_the_stage_marker(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(no_proxy="*", http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "lab8_1", "-q", "-p", "no:cacheprovider"],
        cwd=directory,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert "NotImplementedError: Lab 8.1 read is not implemented yet" in result.stdout
    assert " failed" in result.stdout and "error" not in result.stdout.splitlines()[-1]


def test_an_existing_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "mine.txt").write_text("keep")
    result = practice("08", target)
    assert result.returncode != 0 and "already exists" in result.stderr
    assert [p.name for p in target.iterdir()] == ["mine.txt"]


def test_a_directory_inside_the_course_repository_is_refused() -> None:
    result = practice("08", COURSE_ROOT / "labs" / "my-practice")
    assert result.returncode != 0 and "inside the course repository" in result.stderr
    assert not (COURSE_ROOT / "labs" / "my-practice").exists()


def test_an_unknown_chapter_is_refused(tmp_path: Path) -> None:
    result = practice("99", tmp_path / "x")
    assert result.returncode != 0 and "No lab for chapter '99'" in result.stderr
    assert not (tmp_path / "x").exists()


def test_a_failure_halfway_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coursekit import generate

    real = generate.assemble_practice_dir  # type: ignore[attr-defined]

    def half_then_fail(lab, destination, **kwargs):  # type: ignore[no-untyped-def]
        real(lab, destination, **kwargs)  # everything written, then the disk "fills up"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(generate, "assemble_practice_dir", half_then_fail)
    target = tmp_path / "new" / "deeper" / "lab08"
    with pytest.raises(OSError, match="No space left"):
        generate.create_practice_dir(LAB, target)
    assert list(tmp_path.iterdir()) == [], "no directory, staging copy or parent may remain"


@pytest.mark.timeout(600)  # a new directory, then a run of the whole core suite
def test_solution_flag_gives_the_directory_the_lab_suite_proves_passes(
    practice_base: Path, tmp_path: Path
) -> None:
    target = tmp_path / "solved"
    assert practice("08", target, "--solution").returncode == 0
    # tests/chapter08/test_lab_suite.py runs every lab test on the solved directory it
    # builds, and passes: these are its files, so this directory passes the same run (a
    # second run of the whole suite here cost about 10 CPU-seconds). Only the guide and
    # copier's record of where the template came from may differ; pytest reads neither.
    proven = build(LAB, practice_base, tmp_path / "proven", ALL_STAGES)
    made, built = files_of(target), files_of(proven)
    assert made.keys() == built.keys(), sorted(made.keys() ^ built.keys())
    assert [name for name in made if made[name] != built[name]] == []


def files_of(directory: Path) -> dict[str, bytes]:
    """What a lab run can read: every file but the compiled code, the guide and copier's
    answers."""
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in directory.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.name not in ("LEARNING.md", ".copier-answers.yml")
    }


# ---------------------------------------------------------------- the student loop


def test_status_reports_each_stage_and_the_next_step(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, "8.1")
    (directory / LAB.stage("8.2").modules[0]).write_text(
        "def ensure_inside_workspace(workspace: str, target: str) -> None:\n    return None\n"
    )
    result = practice("status", cwd=directory)
    assert result.returncode == 0, result.stderr
    rows = {
        line.split("│")[1].strip(): line
        for line in result.stdout.splitlines()
        if line.startswith("│") and line.split("│")[1].strip()
    }
    assert "passed" in rows["8.1"] and "failing" in rows["8.2"] and "not started" in rows["8.3"]
    assert "1 of 6 core stages passed" in result.stdout
    assert "check 8.2" in next_command(result.stdout)


# Three runs of the core suite (status, then check's run and its 8.7): a hang guard that a
# loaded machine does not trip.
@pytest.mark.timeout(600)
def test_a_finished_core_offers_the_optional_extensions_next(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, *[s.id for s in LAB.stages if not s.optional])
    result = practice("status", cwd=directory)
    assert result.returncode == 0, result.stderr
    assert "6 of 6 core stages passed" in result.stdout
    assert "0 of 3 optional extension stages passed" in result.stdout
    assert "The core is done" in result.stdout and "check 8.7" in result.stdout
    checked = practice("check", cwd=directory)
    assert "8.7" in checked.stdout and "Lab 8.7" in checked.stdout, (
        "check with no stage runs the first optional stage once the core is green"
    )


def test_check_shows_the_first_failure_the_file_and_the_hint(fresh: Path) -> None:
    result = practice("check", cwd=fresh)
    assert result.returncode == 1
    assert "Stage 8.1" in result.stdout
    assert "NotImplementedError: Lab 8.1 read is not implemented yet" in result.stdout
    assert "Edit: src/picourse/coding_tools/read.py" in result.stdout
    assert "hint 8.1" in result.stdout
    assert "Traceback" not in result.stdout, "no wall of tracebacks without -v"
    assert result.stderr.count("Running the tests") == 1, (
        f"one run finds the stage and shows its failure, not two: {result.stderr}"
    )
    verbose = practice("check", "8.1", "-v", cwd=fresh)
    assert "Traceback" in verbose.stdout


def test_check_expect_red_tells_which_invariant_caught_a_deliberate_bug(
    fresh: Path, tmp_path: Path
) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, "8.1", "8.2", "8.3", "8.4")
    assert practice("check", "8.4", cwd=directory).returncode == 0
    # A deliberate bug from the catalogue, so the test follows the solution as it changes.
    bug = next(m for m in LAB.stage("8.4").mutants if m.name == "replace-first-of-several")
    apply_mutant(directory, bug)
    result = practice("check", "8.4", "--expect-red", cwd=directory)
    assert result.returncode == 0 and "Caught" in result.stdout
    caught = result.stdout.split("Caught", 1)[1].splitlines()
    assert len(caught) > 1 and caught[1].strip(), (
        "the first red test's message, naming the invariant the change broke, is shown"
    )
    solve(directory, "8.4")
    green = practice("check", "8.4", "--expect-red", cwd=directory)
    assert green.returncode == 1 and "Not caught" in green.stdout


def test_hint_shows_one_more_each_time_and_all_on_request(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    hints = LAB.stage("8.2").hints
    first = practice("hint", "8.2", cwd=directory)
    second = practice("hint", "8.2", cwd=directory)
    assert hints[0] in first.stdout and hints[1] not in first.stdout
    assert hints[1] in second.stdout and "Hint 2 of" in second.stdout
    every = practice("hint", "8.2", "--all", cwd=directory)
    assert all(hint in every.stdout for hint in hints)
    assert "DON'T EDIT" in (directory / ".practice" / "state.txt").read_text()


def test_reset_backs_up_and_restores_the_stub_only_when_confirmed(
    fresh: Path, tmp_path: Path
) -> None:
    directory = copy_of(fresh, tmp_path)
    module = directory / LAB.stage("8.1").modules[0]
    module.write_text("# my precious work\n")
    refused = practice("reset", "8.1", cwd=directory, stdin="")
    assert refused.returncode != 0 and "--yes" in refused.stderr
    assert module.read_text() == "# my precious work\n", "no confirmation, no change"
    done = practice("reset", "8.1", "--yes", cwd=directory)
    assert done.returncode == 0
    assert module.read_bytes() == (SCAFFOLD / "template" / LAB.stage("8.1").modules[0]).read_bytes()
    backups = list((directory / ".practice" / "backups").rglob("read.py"))
    assert [b.read_text() for b in backups] == ["# my precious work\n"]


@pytest.mark.timeout(600)
def test_watch_reruns_on_save_until_every_core_stage_is_green(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    solve(directory, "8.1", "8.2", "8.3", "8.4", "8.5")
    with Watch(directory) as watch:
        assert watch.waiting.wait(240), "watch never started waiting: " + watch.output
        assert any("Stage 8.6" in line for line in watch.seen)
        # A save that leaves the stage red runs that stage's tests alone (a quick answer).
        saved = len(watch.seen)
        watch.waiting.clear()
        module = directory / LAB.stage("8.6").modules[0]
        module.write_text(module.read_text() + "# started\n")
        assert watch.waiting.wait(240), "watch never waited again after a save: " + watch.output
        rerun = "".join(watch.seen[saved:])
        assert "Running the tests of stage 8.6" in rerun and "every stage" not in rerun, rerun
        saved = len(watch.seen)
        solve(directory, "8.6")
        assert watch.process.wait(timeout=240) == 0
    output = watch.output
    # Once it is green, every stage started runs again before the watch moves on.
    last = "".join(watch.seen[saved:])
    assert last.index("Running the tests of every stage") < last.index("Every core stage"), last
    assert "Every core stage is green" in output
    assert "watch 8.7" in output, "a green core points at watching the optional stages"
    celebrated = output.index("✓ Stage 8.6 is green")
    assert "run" in output[celebrated:] and celebrated < output.index("Every core stage"), (
        "watch must say that the stage it watched turned green before it moves on"
    )


def test_break_lists_mutants_and_shows_what_caught_one_without_code(fresh: Path) -> None:
    listing = practice("break", "8.4", cwd=fresh)
    assert all(m.name in listing.stdout for m in LAB.stage("8.4").mutants)
    mutant = LAB.stage("8.4").mutants[0]
    result = practice("break", "8.4", mutant.name, cwd=fresh)
    assert result.returncode == 0 and "Caught" in result.stdout
    assert mutant.invariant in result.stdout
    assert "def " not in result.stdout and "_count_from" not in result.stdout


def test_update_tests_only_refreshes_the_tests_and_keeps_the_students_code(
    fresh: Path, tmp_path: Path
) -> None:
    directory = copy_of(fresh, tmp_path)
    module = directory / LAB.stage("8.1").modules[0]
    module.write_text("# my work\n")
    (directory / "tests" / "test_lab8_1_read.py").write_text("# an old release\n")
    result = practice("update", "--tests-only", cwd=directory)
    assert result.returncode == 0, result.stderr
    assert (directory / "tests" / "test_lab8_1_read.py").read_bytes() == (
        LAB.tests_dir / "test_lab8_1_read.py"
    ).read_bytes()
    assert module.read_text() == "# my work\n"
    (old,) = (directory / ".practice" / "backups").glob("tests-*/test_lab8_1_read.py")
    assert old.read_text() == "# an old release\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("hint", "8.42"), "Unknown stage '8.42'"),
        (("check", "9.1"), "Unknown stage"),
        (("reset", "8.0", "--yes"), "Unknown stage"),
        (("break", "8.1", "nope"), "no mutant 'nope'"),
    ],
)
def test_bad_input_is_a_clear_error(fresh: Path, args: tuple[str, ...], message: str) -> None:
    result = practice(*args, cwd=fresh)
    assert result.returncode == 2 and message in result.stderr


def test_outside_a_practice_directory_every_subcommand_says_so(tmp_path: Path) -> None:
    for args in (
        ("status",),
        ("check",),
        ("hint", "8.1"),
        ("reset", "8.1", "--yes"),
        ("watch",),
        ("break", "8.1"),
    ):
        result = practice(*args, cwd=tmp_path)
        assert result.returncode == 2 and "not inside a practice directory" in result.stderr


def test_missing_tests_are_a_clear_error(fresh: Path, tmp_path: Path) -> None:
    directory = copy_of(fresh, tmp_path)
    shutil.rmtree(directory / "tests")
    result = practice("status", cwd=directory)
    assert result.returncode == 2 and "tests" in result.stderr and "missing" in result.stderr
