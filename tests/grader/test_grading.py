"""Grading end to end: the samples, credit after a timeout, resuming, the Gradescope bundle
and the HTML report in a real browser."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT, solution_root
from grader import GradeOptions, grade_submissions
from grader._sandbox import Limits
from tests.grader.chromium import chromium, headless_flags

LAB = load_lab("08")
SAMPLES = COURSE_ROOT / "grader" / "examples" / "submissions"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def solved_modules(destination: Path, stages: list[str] | None = None) -> Path:
    """A minimal practice directory holding the reference modules of some stages."""
    for stage in LAB.stages:
        if stages is None or stage.id in stages:
            for module in stage.modules:
                target = destination / module
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(solution_root(LAB.root.name) / module, target)
    (destination / "src/picourse/coding_tools").mkdir(parents=True, exist_ok=True)
    return destination


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))
    return {row["student"]: row for row in rows}


HANGING_SAMPLE = "hang-swallows-exceptions"


@pytest.fixture(scope="module")
def samples_graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("samples") / "out"
    staged = tmp_path_factory.mktemp("staged")
    for sample in SAMPLES.iterdir():
        group = "hanging" if sample.name == HANGING_SAMPLE else "finishing"
        shutil.copytree(sample, staged / group / sample.name, symlinks=True)
    # The wall is generous: on a loaded 2-core machine no run that finishes may be cut
    # short (allocate-without-end fills its 1 GiB address space in each of ~200 tests:
    # 40 s alone on an idle 2-core machine, over 150 s in CI). The hanging sample meets the
    # wall whatever it is, so it gets a wall of its own, graded into the same class.
    limits = Limits(wall_seconds=300, test_seconds=30)
    grade_submissions(staged / "finishing", out, GradeOptions(jobs=2, limits=limits))
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
    "cheat-exit-at-import": ("graded", 0.0),
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


def test_the_partial_solution_earns_part_of_read_and_paths(samples_graded: Path) -> None:
    row = gradebook(samples_graded)["partial"]
    assert row["status"] == "graded"
    assert 0 < float(row["stage 8.1"]) < 20 and 0 < float(row["stage 8.2"]) < 15
    assert float(row["stage 8.3"]) == 0


def test_no_sample_affects_another(samples_graded: Path) -> None:
    result = json.loads((samples_graded / "submissions/full-solution/result.json").read_text())
    assert result["status"] == "graded" and result["score"] == 100
    assert result["bonus"] == result["max_bonus"] > 0, "every challenge test passes too"
    assert result["isolation"].startswith("bwrap")


def test_every_format_is_written_per_submission(samples_graded: Path) -> None:
    folder = samples_graded / "submissions" / "partial"
    assert json.loads((folder / "gradescope/results.json").read_text())["tests"]
    assert json.loads((folder / "exercism/results.json").read_text())["version"] == 3
    assert (folder / "junit.xml").read_text().startswith("<?xml")
    assert "Pass rate per test" in (samples_graded / "report.html").read_text()


HANGING_AGENT = """
import time


def build_system_prompt(cwd, tools):
    while True:  # swallows the per-test timeout too
        try:
            time.sleep(0.1)
        except BaseException:
            pass


async def run_coding_agent(model, cwd, task, **options):
    build_system_prompt(cwd, None)
"""


def test_a_timeout_keeps_the_credit_of_finished_stages(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    student = solved_modules(submissions / "slowpoke", ["8.1", "8.2", "8.3", "8.4", "8.5"])
    (student / LAB.stage("8.6").modules[0]).write_text(HANGING_AGENT)
    out = tmp_path / "out"
    # The wall leaves room for stages 8.1-8.5 on a loaded machine (~15 s alone when idle).
    grade_submissions(submissions, out, GradeOptions(jobs=1, limits=Limits(wall_seconds=90)))
    row = gradebook(out)["slowpoke"]
    assert row["status"] == "timeout"
    assert float(row["total"]) == 95.0, "stages 8.1-8.5 finished before the hang in 8.6"


CRASHING_AGENT = """
import os
import signal


def build_system_prompt(cwd, tools):
    return ""


async def run_coding_agent(model, cwd, task, **options):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_crash_keeps_the_credit_earned_before_it(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    student = solved_modules(submissions / "crasher", ["8.1", "8.2", "8.3", "8.4", "8.5"])
    (student / LAB.stage("8.6").modules[0]).write_text(CRASHING_AGENT)
    out = tmp_path / "out"
    grade_submissions(submissions, out, GradeOptions(jobs=1))
    row = gradebook(out)["crasher"]
    assert row["status"] == "crashed" and "ended early" in row["reason"]
    assert float(row["total"]) == 95.0, "stages 8.1-8.5 passed before the crash"


def test_archives_and_bad_archives(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    submissions.mkdir()
    solved_modules(tmp_path / "zipped" / "lab08")
    shutil.make_archive(str(submissions / "zoe"), "zip", tmp_path / "zipped")
    (submissions / "broken.zip").write_bytes(b"PK\x03\x04 no")
    with zipfile.ZipFile(submissions / "sneaky.zip", "w") as bundle:
        bundle.writestr("../../escape.py", "x")
    out = tmp_path / "out"
    grade_submissions(submissions, out, GradeOptions(jobs=2))
    book = gradebook(out)
    assert (book["zoe"]["status"], float(book["zoe"]["total"])) == ("graded", 100.0)
    assert book["broken"]["status"] == "invalid" and book["sneaky"]["status"] == "invalid"
    assert not (tmp_path / "escape.py").exists()


def test_a_rerun_skips_graded_input_and_survives_a_kill(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    for name in ("ann", "ben", "cy"):
        solved_modules(submissions / name, ["8.1", "8.2"])
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "grader",
        "grade",
        str(submissions),
        "--out",
        str(out),
        "-j",
        "1",
    ]
    grader = subprocess.Popen(
        command,
        cwd=COURSE_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not (out / "submissions" / "ann" / "result.json").exists():
        assert time.monotonic() < deadline and grader.poll() is None, "no first result"
        time.sleep(0.05)
    os.killpg(grader.pid, signal.SIGKILL)  # mid-run, while ben is being graded
    grader.wait()
    result = out / "submissions/ann/result.json"
    first = result.stat().st_ino
    rerun = subprocess.run(command, cwd=COURSE_ROOT, capture_output=True, text=True, check=True)
    assert "ann" in rerun.stdout
    assert result.stat().st_ino == first, "ann's unchanged input was not graded again"
    assert sorted(p.name for p in (out / "submissions").iterdir()) == ["ann", "ben", "cy"]
    students = [
        r["student"] for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))
    ]
    assert students == ["ann", "ben", "cy"], "nothing lost, nothing duplicated"
    subprocess.run([*command, "--regrade"], cwd=COURSE_ROOT, capture_output=True, check=True)
    assert result.stat().st_ino != first, "--regrade grades again"


def test_the_gradescope_bundle_grades_one_submission(tmp_path: Path) -> None:
    bundle = tmp_path / "autograder.zip"
    subprocess.run(
        [sys.executable, "-m", "grader", "export", "gradescope", "--out", str(bundle)],
        cwd=COURSE_ROOT,
        check=True,
        capture_output=True,
    )
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)
        assert not any(name.startswith("source/solutions") for name in names)
        archive.extractall(root)
    solved_modules(root / "submission")
    (root / "run_autograder").chmod(0o755)
    env = {**os.environ, "GRADER_AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(root / "run_autograder")],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    results = json.loads((root / "results" / "results.json").read_text())
    assert "score" not in results, "a top-level score would drop the extra credit"
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(100)
    optional = sum(s.weight for s in LAB.stages if s.optional)
    challenges = sum(1 for t in results["tests"] if "challenge]" in t["name"])
    assert challenges > 0
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(
        100 + optional + challenges
    ), "every core test, every optional stage and every challenge test: the bonus on top"
    assert len(results["tests"]) > 90
    assert all(
        t["status"] in ("passed", "failed") and t["visibility"] == "visible"
        for t in results["tests"]
    )


def test_the_html_report_renders_in_headless_chromium(samples_graded: Path, tmp_path: Path) -> None:
    browser = chromium()
    flags = headless_flags(tmp_path / "profile")
    page = (samples_graded / "report.html").as_uri()
    shot = tmp_path / "report.png"
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1280,1600", page],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.stat().st_size > 20_000, "the screenshot shows a rendered page"
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    assert "full-solution" in dom and "Class overview" in dom and "cheat-patch-pytest" in dom
    assert dom.count("<svg") == 5, "the class insight shows its five views for the demo class"
