"""Run a practice directory's lab tests in a subprocess and read each test's outcome."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from coursekit.lab import Stage

NOT_IMPLEMENTED = "NotImplementedError"  # what every stub raises

# How a failure that a bound on wall-clock time decided shows: pytest-timeout's message ends
# with the first, and the lab tests begin such a failure with the second (``OVER_TIME_LIMIT``
# in lab_helpers.py). On a busy machine it may be the machine's doing, not the code's.
_TIME_LIMIT_MARKS = ("from pytest-timeout", "Over a time limit")


def over_a_time_limit(message: str) -> bool:
    """Whether a failure's message says that a bound on wall-clock time decided it."""
    return any(mark in message for mark in _TIME_LIMIT_MARKS)


# The lab tests need one plugin, pytest-timeout. Every run of them (check, the catalogue, the
# grader's) loads that one and nothing else the environment happens to have installed:
# hypothesis alone adds ~0.8 s of CPU to each start, and no other plugin belongs in a run
# that judges a student's code.
LAB_PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_PLUGINS": "pytest_timeout"}


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False  # not a pytest test class, despite the name

    nodeid: str  # tests/test_lab8_1_read.py::test_name[param]
    passed: bool
    message: str  # the failure's one-line message ('' when passed)
    details: str  # the failure's full text
    markers: frozenset[str] = frozenset()

    @property
    def challenge(self) -> bool:
        return "challenge" in self.markers

    @property
    def not_implemented(self) -> bool:
        """Failed on a stub: the code it tests is not written yet."""
        return not self.passed and NOT_IMPLEMENTED in self.message + self.details

    @property
    def test_file(self) -> str:
        return self.nodeid.split("::")[0]

    @property
    def name(self) -> str:
        return self.nodeid.split("::", 1)[-1]


@dataclass(frozen=True)
class TestRun:
    __test__ = False

    outcomes: tuple[TestOutcome, ...]
    output: str  # pytest's own terminal output

    def in_file(self, test_file: str) -> list[TestOutcome]:
        return [o for o in self.outcomes if o.test_file.endswith(test_file)]


Launch = Callable[[list[str], Path, dict[str, str], float], str]
"""How a lab run starts pytest: (pytest's arguments, directory, environment, timeout) ->
its output. The default starts ``python -m pytest`` in a process of its own."""


def run_lab_tests(
    directory: Path,
    marker: str | None = None,
    *,
    timeout: float = 900,
    extra: tuple[str, ...] = (),
    launch: Launch | None = None,
) -> TestRun:
    """Run pytest in ``directory`` (optionally ``-m marker``) and collect every outcome."""
    with tempfile.TemporaryDirectory(prefix="labrun-") as scratch:
        report = Path(scratch) / "report.xml"
        # --tb=native: the report needs messages, not pytest's source excerpts (faster).
        arguments = [
            "-p",
            "no:cacheprovider",
            "--tb=native",
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit2",
            *extra,
        ]
        if marker:
            arguments += ["-m", marker]
        env = {**os.environ, **LAB_PYTEST_ENV, "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTEST_ADDOPTS", None)
        output = (launch or _in_a_process)(arguments, directory, env, timeout)
        if not report.exists():
            raise RuntimeError(f"pytest did not run in {directory}:\n{output[-2000:]}")
        return TestRun(_outcomes(report), output)


def run_stage_tests(
    directory: Path,
    stages: Sequence[Stage],
    *,
    extra: tuple[str, ...] = (),
    launch: Launch | None = None,
) -> TestRun:
    """Run the tests of whole stages in ``directory``: ``-m`` their markers, and pytest
    collects only their test files (collecting every lab test to select one stage's costs
    nearly half of a short run's CPU). A file the directory no longer has is left out
    (pytest refuses a missing path); with none left, the markers alone select, as before."""
    marker = " or ".join(stage.marker for stage in stages)
    files = tuple(
        f"tests/{stage.tests}" for stage in stages if (directory / "tests" / stage.tests).is_file()
    )
    return run_lab_tests(directory, marker, extra=(*extra, *files), launch=launch)


def _in_a_process(
    arguments: list[str], directory: Path, env: dict[str, str], timeout: float
) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", *arguments],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    return completed.stdout + completed.stderr


# pytest shortens a long message in the XML and says so in words meant for XML readers; the
# student sees at most a few lines of it anyway (the details keep the whole text).
_JUNIT_NOTE = re.compile(r"\n\[(?:\+\d+ more lines?|truncated); full report in element text\]\Z")


def _outcomes(report: Path) -> tuple[TestOutcome, ...]:
    outcomes = []
    for case in ET.parse(report).getroot().iter("testcase"):
        module = (case.get("classname") or "").replace(".", "/")
        problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
        message = " ".join(_JUNIT_NOTE.sub("", (p.get("message") or "").strip()) for p in problems)
        details = "\n".join(p.text or "" for p in problems)
        markers = frozenset(
            word
            for prop in case.iter("property")
            if prop.get("name") == "markers"
            for word in (prop.get("value") or "").split()
        )
        outcomes.append(
            TestOutcome(f"{module}.py::{case.get('name')}", not problems, message, details, markers)
        )
    return tuple(outcomes)
