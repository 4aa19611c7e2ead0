"""The reference glob with a root .gitignore that git itself would partly skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

GLOB = """
import asyncio, json, sys
from picourse.coding_tools import create_coding_tools
from picourse.tool import ToolContext

tool = create_coding_tools(sys.argv[1], navigation=True).get("glob")
arguments = tool.schema.validate({"pattern": "**/*"})
out = asyncio.run(tool.execute(arguments, ToolContext("glob", None, None)))
print(json.dumps({"error": out.is_error, "text": out.content[0].text}))
"""


@pytest.mark.parametrize(
    "bad", ["!", "foo\\", "[z-a]"], ids=["bang", "trailing-backslash", "range"]
)
def test_a_gitignore_pattern_git_cannot_read_is_skipped(
    solved_src: Path, tmp_path: Path, bad: str
) -> None:
    (tmp_path / "keep.txt").write_text("")
    (tmp_path / "debug.log").write_text("")
    (tmp_path / ".gitignore").write_text(f"*.log\n{bad}\n")
    done = subprocess.run(
        [sys.executable, "-c", GLOB, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(solved_src)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert not result["error"] and result["text"].splitlines()[0] == "keep.txt", (
        f"the other patterns still apply and the search answers: {result}"
    )
