"""The sample class graded end to end, and its HTML report in a real browser."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from coursekit.layout import COURSE_ROOT
from grader import GradeOptions, grade_submissions
from grader._sandbox import Limits
from tests.grader.chromium import render
from tests.grader.graded_class import gradebook, result_of

SAMPLES = COURSE_ROOT / "grader" / "examples" / "submissions"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


HANGING_SAMPLE = "hang-swallows-exceptions"
# Fails tests over a time limit (its open of a FIFO blocks): beside another job, without a cpu
# cgroup per job (a normal user's grader), it would be graded twice, the second time alone.
TIMED_OUT_TESTS_SAMPLE = "partial"


@pytest.fixture(scope="module")
def samples_graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("samples") / "out"
    staged = tmp_path_factory.mktemp("staged")
    groups = {HANGING_SAMPLE: "hanging", TIMED_OUT_TESTS_SAMPLE: "alone"}
    for sample in SAMPLES.iterdir():
        group = groups.get(sample.name, "finishing")
        shutil.copytree(sample, staged / group / sample.name, symlinks=True)
    # The wall is generous: on a loaded 2-core machine (other grader modules run beside
    # this one) no run that finishes may be cut short; allocate-without-end meets its
    # 1 GiB address-space limit in each of its 52 read tests. The hanging sample meets the
    # wall whatever it is, so it gets a wall of its own; each group is graded into the same
    # class.
    limits = Limits(wall_seconds=600, test_seconds=30)
    grade_submissions(staged / "finishing", out, GradeOptions(jobs=2, limits=limits))
    grade_submissions(staged / "alone", out, GradeOptions(jobs=1, limits=limits))
    hang_limits = Limits(wall_seconds=20, test_seconds=5)
    grade_submissions(staged / "hanging", out, GradeOptions(jobs=1, limits=hang_limits))
    return out


EXPECTED = {
    "full-solution": ("graded", 100.0),
    "untouched-scaffold": ("graded", 0.0),
    "hang-swallows-exceptions": ("timeout", 0.0),
    "flood-output": ("graded", 0.0),
    "fork-without-end": ("graded", 0.0),  # held to its own process limit
    "allocate-without-end": ("graded", 0.0),
    "cheat-conftest": ("graded", 0.0),
    "cheat-edited-tests": ("graded", 0.0),
    # Its in-host pytest ends at collection (pytest's internal error), started again too.
    "cheat-exit-at-import": ("crashed", 0.0),
    "cheat-os-exit-at-import": ("crashed", 0.0),
    "cheat-exit-zero-at-exit": ("graded", 0.0),
    "cheat-forged-report": ("flagged", 0.0),
    "cheat-patch-pytest": ("flagged", 0.0),
    "cheat-patch-grader-plugin": ("flagged", 0.0),
    "cheat-read-the-solution": ("graded", 0.0),  # nothing to find in the sandbox's view
}


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_sample_gets_exactly_its_credit(samples_graded: Path, student: str) -> None:
    row = gradebook(samples_graded)[student]
    status, total = EXPECTED[student]
    assert (row["status"], float(row["total"])) == (status, total), row["reason"]
    if status == "flagged":
        assert row["reason"], "a flagged submission says why"


@pytest.mark.parametrize("student", ["cheat-conftest", "cheat-edited-tests"])
def test_a_students_own_tests_never_reach_the_run_that_grades_them(
    samples_graded: Path, student: str
) -> None:
    result = result_of(samples_graded, student)
    assert result["isolation"].startswith("bwrap"), "the sample's stage 8.1 ran, sandboxed"
    read_tests = [t for t in result["tests"] if t["stage"] == "8.1"]
    assert read_tests and all(
        t["status"] == "failed" and "not run" not in t["message"] for t in read_tests
    ), "the pristine tests ran on the stub and failed, whatever the student's tests say"


def test_the_partial_solution_earns_part_of_read_and_paths(samples_graded: Path) -> None:
    row = gradebook(samples_graded)["partial"]
    assert row["status"] == "graded"
    assert 0 < float(row["stage 8.1"]) < 20 and 0 < float(row["stage 8.2"]) < 15
    assert float(row["stage 8.3"]) == 0


def test_no_sample_affects_another(samples_graded: Path) -> None:
    result = result_of(samples_graded, "full-solution")
    assert result["status"] == "graded" and result["score"] == 100
    assert result["bonus"] == result["max_bonus"] > 0, "every challenge test passes too"
    assert result["isolation"].startswith("bwrap")


def test_every_format_is_written_per_submission(samples_graded: Path) -> None:
    folder = samples_graded / "submissions" / "partial"
    assert json.loads((folder / "gradescope/results.json").read_text())["tests"]
    assert json.loads((folder / "exercism/results.json").read_text())["version"] == 3
    assert (folder / "junit.xml").read_text().startswith("<?xml")
    assert "Pass rate per test" in (samples_graded / "report.html").read_text()


def test_the_html_report_renders_in_headless_chromium(samples_graded: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    dom = render(samples_graded / "report.html", shot, "1280,1600", tmp_path / "profile").dom
    assert shot.stat().st_size > 20_000, "the screenshot shows a rendered page"
    assert "full-solution" in dom and "Class overview" in dom and "cheat-patch-pytest" in dom
    assert dom.count("<svg") == 5, "the class insight shows its five views for the demo class"
