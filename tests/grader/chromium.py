"""Headless Chromium for the report tests: the browser and the flags it needs here."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


def chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "headless Chromium is needed for this test (.ci/run installs it)"
    return browser


def headless_flags(profile: Path) -> list[str]:
    """No network of its own (this machine has none), a fresh profile, root allowed."""
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]


@dataclass(frozen=True)
class Rendered:
    dom: str  # the page's DOM once loaded, its scripts run
    log: str  # the browser's own output, the page's console included


def render(page: Path, shot: Path, window: str, profile: Path) -> Rendered:
    """Load ``page`` once (one browser start, seconds of CPU): a screenshot at ``shot`` and
    the DOM."""
    run = subprocess.run(
        [
            chromium(),
            *headless_flags(profile),
            "--enable-logging=stderr",
            f"--screenshot={shot}",
            f"--window-size={window}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Rendered(run.stdout, run.stderr)
