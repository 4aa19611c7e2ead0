"""Run a practice directory's lab tests in a subprocess and read the outcome per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from coursekit import Lab
from coursekit.assemble import add_lab_tests, apply_mutant, overlay_solution, render_scaffold
from coursekit.lab import Mutant


@dataclass(frozen=True)
class Outcome:
    passed: bool
    message: str


def build(
    lab: Lab, base: Path, destination: Path, solved: list[str], mutant: Mutant | None = None
) -> Path:
    """Copy a rendered base directory and overlay solutions (and a mutant) on it."""
    shutil.copytree(base, destination)
    overlay_solution(lab, destination, solved)
    if mutant is not None:
        apply_mutant(destination, mutant)
    return destination


def render_base(lab: Lab, destination: Path) -> Path:
    render_scaffold(lab, destination)
    add_lab_tests(lab, destination)
    return destination


def run_lab_tests(
    directory: Path, marker: str | None = None, timeout: float = 600
) -> dict[str, Outcome]:
    report = directory / ".report.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={report}",
        "-o",
        "junit_family=xunit2",
    ]
    if marker:
        command += ["-m", marker]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    completed = subprocess.run(
        command,
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if not report.exists():
        raise AssertionError(f"pytest wrote no report:\n{completed.stdout}\n{completed.stderr}")
    outcomes: dict[str, Outcome] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
        message = " ".join(f"{p.get('message', '')} {p.text or ''}" for p in problems)
        outcomes[name] = Outcome(not problems, message)
    return outcomes
