"""report.html's class insight (five inline SVG views) and the diagnosis in every format."""

from __future__ import annotations

import json
import re
from pathlib import Path

from coursekit import load_lab
from grader.report import exercism, gradescope, html, insight
from tests.grader.chromium import render

from .class_sample import synthetic_class

LAB = load_lab("08")
VIEWS = (
    "Score distribution",
    "Pass rate per stage",
    "Tests the class passes least",
    "Most frequent diagnosed mistakes",
    "Statuses and grading time",
)


def test_the_report_shows_five_views_from_the_results() -> None:
    results = synthetic_class(60)
    page = html.render(LAB, results)
    for view in VIEWS:
        assert view in page
    assert page.count("<svg") == 5, "each view is an inline SVG chart"
    assert "<script" not in page and "http://" not in page.replace(
        "http://www.w3.org/2000/svg", ""
    ), "one self-contained file: no scripts, nothing to fetch"
    histogram = insight.score_histogram(results)
    counts = [int(n) for n in re.findall(r"<title>(\d+) students scored", histogram)]
    assert sum(counts) == len(results), "every student is in one bin of the histogram"
    diagnosed = sum(len(r.diagnoses) for r in results)
    mistakes = insight.frequent_mistakes(LAB, results)
    shown = sum(int(n) for n in re.findall(r">(\d+) student\(s\)<", mistakes))
    assert 0 < shown <= diagnosed
    for stage in LAB.stages:
        assert f">{stage.id}" in insight.stage_pass_rates(LAB, results)


def test_a_class_without_diagnoses_says_so_instead_of_an_empty_chart() -> None:
    results = synthetic_class(5)
    for result in results:
        result.diagnoses = []
    assert "No failure set matched" in insight.frequent_mistakes(LAB, results)


def test_the_diagnosis_reaches_every_format_the_student_or_instructor_reads() -> None:
    result = next(r for r in synthetic_class(40) if r.diagnoses)
    diagnosis = result.diagnoses[0]
    assert diagnosis.text in json.loads(gradescope.render(result))["output"]
    told = [t for t in json.loads(exercism.render(result))["tests"] if t.get("output")]
    assert told and told[0]["output"] == diagnosis.text
    assert told[0]["status"] == "fail"
    assert diagnosis.text.replace("'", "&#x27;") in html.render(LAB, [result])


def test_the_report_renders_in_headless_chromium_with_its_charts(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html.render(LAB, synthetic_class(200)), encoding="utf-8")
    shot = tmp_path / "report.png"
    rendered = render(page, shot, "1200,1400", tmp_path / "profile")
    assert shot.stat().st_size > 20_000, "the screenshot shows a rendered page"
    console = [line for line in rendered.log.splitlines() if "CONSOLE" in line]
    assert not console, f"the page logs to the console: {console}"
    dom = rendered.dom
    assert dom.count("<svg") == 5 and "student-199" in dom
