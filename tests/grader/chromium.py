"""Headless Chromium for the report tests: the browser and the flags it needs here."""

from __future__ import annotations

import shutil
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
