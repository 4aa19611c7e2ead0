"""Every report format is rendered from the same result model and reads as its platform
expects."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

from coursekit import load_lab
from grader.model import StageScore, SubmissionResult, TestResult, truncate
from grader.report import exercism, gradebook, gradescope, html, junit

LAB = load_lab("08")


def sample() -> SubmissionResult:
    tests = [
        TestResult("tests/test_lab8_1_read.py::test_a", "8.1", False, "passed", "", 10, 10),
        TestResult(
            "tests/test_lab8_1_read.py::test_b",
            "8.1",
            False,
            "failed",
            "AssertionError: <b>no</b> line may be cut",
            0,
            10,
        ),
        TestResult("tests/test_lab8_1_read.py::test_huge", "8.1", True, "passed", "", 1, 1),
        TestResult(
            "tests/test_lab8_2_paths.py::test_c",
            "8.2",
            False,
            "not run",
            "the test did not run",
            0,
            15,
        ),
    ]
    stages = [StageScore("8.1", "Read", 10, 20, False), StageScore("8.2", "Paths", 0, 15, False)]
    return SubmissionResult(
        "<ada>",
        "timeout",
        "stopped after the wall limit",
        "bwrap",
        stages,
        tests,
        1,
        1,
        "digest",
        "key",
        3.5,
    )


def test_own_json_round_trips() -> None:
    result = sample()
    assert SubmissionResult.from_json(result.to_json()) == result
    assert json.loads(result.to_json())["score"] == 10


def test_gradescope_results_json() -> None:
    data = json.loads(gradescope.render(sample()))
    assert "score" not in data, "Gradescope totals the tests; a top-level score would override it"
    assert sum(t["score"] for t in data["tests"]) == 11, "10 points and 1 of extra credit"
    assert sum(t["max_score"] for t in data["tests"]) == 35
    assert [t["status"] for t in data["tests"]] == ["passed", "failed", "passed", "failed"]
    assert all(
        {"name", "number", "score", "max_score", "status", "output", "visibility"} <= set(t)
        for t in data["tests"]
    )
    assert data["tests"][2]["max_score"] == 0, "challenge tests are extra credit"
    assert "timeout" in data["output"]


def test_exercism_v3_results_json() -> None:
    data = json.loads(exercism.render(sample()))
    assert data["version"] == 3 and data["status"] == "fail"
    assert [t["task_id"] for t in data["tests"]] == [1, 1, 1, 2]
    assert [t["status"] for t in data["tests"]] == ["pass", "fail", "pass", "fail"]


def test_junit_xml_counts() -> None:
    root = ET.fromstring(junit.render(sample()))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    failure = root.find(".//testcase[@name='test_b']/failure")
    assert failure is not None and "line may be cut" in (failure.text or "")


def test_gradebook_csv() -> None:
    rows = list(csv.reader(io.StringIO(gradebook.render(LAB, [sample()]))))
    assert rows[0][:3] == ["student", "stage 8.1", "stage 8.2"]
    assert rows[0][-5:] == ["bonus", "total", "max", "status", "reason"]
    row = dict(zip(rows[0], rows[1], strict=True))
    assert (row["student"], row["stage 8.1"], row["bonus"], row["total"], row["status"]) == (
        "<ada>",
        "10",
        "1",
        "10",
        "timeout",
    )


def test_html_escapes_and_shows_failures() -> None:
    page = html.render(LAB, [sample()])
    assert "&lt;ada&gt;" in page and "<ada>" not in page
    assert "&lt;b&gt;no&lt;/b&gt; line may be cut" in page
    assert "Pass rate per test" in page and "1/1" in page


def test_long_outputs_are_truncated_with_a_visible_mark() -> None:
    text = truncate("x" * 10_000, 100)
    assert text.startswith("x" * 100) and text.endswith("[truncated 9900 characters]")


def test_optional_stages_are_bonus_in_every_total() -> None:
    result = sample()
    result.stages.append(StageScore("8.7", "Look around", 10, 10, True))
    result.tests.append(
        TestResult("tests/test_lab8_7_navigation.py::test_ls", "8.7", False, "passed", "", 10, 10)
    )
    result.bonus, result.max_bonus = 11, 11
    assert (result.score, result.max_score) == (10, 35), "optional stages stay out of the score"
    data = json.loads(gradescope.render(result))
    assert sum(t["score"] for t in data["tests"]) == result.score + result.bonus == 21
    assert sum(t["max_score"] for t in data["tests"]) == 35
    extension = data["tests"][-1]
    assert extension["max_score"] == 0 and extension["score"] == 10, "extra credit on Gradescope"
    assert "optional" in extension["name"] and "11 of 11" in data["output"]
    header = next(csv.reader(io.StringIO(gradebook.render(LAB, [result]))))
    assert "stage 8.7 (bonus)" in header and "stage 8.6" in header
    assert "8.7 (bonus)" in html.render(LAB, [result])
