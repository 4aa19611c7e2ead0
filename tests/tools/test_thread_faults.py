"""The reference tools when no thread can be started (the user's process limit counts
threads): each still does its job or says why not, and nothing it started runs on.

The limit is simulated in a child process by refusing ``threading``'s thread starts, so
that root (whom ``ulimit -u`` does not hold) sees the same as a normal user.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.tools.own_session import communicate_in_own_session

pytestmark = pytest.mark.slow

# Phase "none": no thread at all. Phase "watcher-only": only asyncio's own child-watcher
# threads (Python 3.11 and macOS need one per child to spawn at all), none for the tool.
CALLS = """
import asyncio, json, sys, threading
import psutil
from picourse.coding_tools import create_coding_tools
from picourse.tool import ToolContext

workspace, phase, sleeper = sys.argv[1], sys.argv[2], sys.argv[3]
# Where Thread.start starts its thread: _start_joinable_thread from Python 3.13 on.
HOOK = next(h for h in ("_start_joinable_thread", "_start_new_thread") if hasattr(threading, h))
real_start = getattr(threading, HOOK)

def refuse(function, *rest, **keywords):
    name = getattr(getattr(function, "__self__", None), "name", "")
    if phase == "watcher-only" and "waitpid-" in name:
        return real_start(function, *rest, **keywords)
    raise RuntimeError("can't start new thread")

CALLS = {
    "none": [
        ("write", {"path": "notes.txt", "content": "one\\ntwo\\n"}),
        ("edit", {"path": "notes.txt", "edits": [{"old_text": "two", "new_text": "three"}]}),
        ("read", {"path": "notes.txt"}),
        ("ls", {"path": "."}),
        ("glob", {"pattern": "*.txt"}),
        ("bash", {"command": f"echo hello; exec {sleeper}"}),
    ],
    "watcher-only": [
        ("bash", {"command": "echo hello"}),
        ("bash", {"command": "yes x | head -c 3000000"}),
        ("bash", {"command": f"echo started; exec {sleeper}"}),
    ],
}

async def main():
    tools = create_coding_tools(
        workspace, navigation=True, max_bash_output_bytes=1000, bash_timeout_ms=3000
    )
    results = []
    setattr(threading, HOOK, refuse)
    try:
        for name, arguments in CALLS[phase]:
            tool = tools.get(name)
            try:
                out = await asyncio.wait_for(
                    tool.execute(tool.schema.validate(arguments), ToolContext(name, None, None)),
                    60,
                )
                result = {"error": out.is_error, "text": out.content[0].text,
                          "details": getattr(out.details, "__dict__", {})}
            except BaseException as raised:
                result = {"raised": f"{type(raised).__name__}: {raised}"}
            alive = [p.pid for p in psutil.Process().children(recursive=True)
                     if p.status() != psutil.STATUS_ZOMBIE]
            results.append({"call": [name, arguments], "alive": alive, **result})
    finally:
        setattr(threading, HOOK, real_start)
    print(json.dumps(results, default=str))

asyncio.run(main())
"""


def calls(solved_src: Path, workspace: Path, phase: str) -> list[dict[str, Any]]:
    # A command of its own, so that what a wrong tool leaves running is found and ended.
    sleeper = ["sleep", f"600.{secrets.randbelow(10**8)}"]
    try:
        out, err = communicate_in_own_session(
            [sys.executable, "-c", CALLS, str(workspace), phase, " ".join(sleeper)],
            timeout=240,
            env={**os.environ, "PYTHONPATH": str(solved_src)},
        )
    finally:  # a command the tools let out of the group ends too
        for process in psutil.process_iter(["cmdline"]):
            if process.info["cmdline"] == sleeper:
                with contextlib.suppress(psutil.Error):
                    process.kill()
    assert out.strip(), f"the calls printed no result: {err[-3000:]}"
    results: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    for result in results:
        assert "raised" not in result, (
            f"an exception escaped a tool when no thread could be started: {result}"
        )
        assert not result["alive"], f"a process of the call runs on: {result}"
    return results


def test_every_tool_does_its_job_or_says_why_without_a_thread(
    solved_src: Path, tmp_path: Path
) -> None:
    write, edit, read, ls, glob, bash = calls(solved_src, tmp_path, "none")
    for done in (write, edit, read, ls, glob):
        assert not done["error"], f"the call is run here when no thread can be: {done}"
    assert (tmp_path / "notes.txt").read_text() == "one\nthree\n"
    assert "three" in read["text"] and "notes.txt" in ls["text"] and "notes.txt" in glob["text"]
    # Python 3.11 needs a thread to watch each child, so bash says why it cannot start;
    # later versions on Linux do not: the command runs, prints, and meets its timeout (it
    # never ends by itself), with nothing of it left running.
    ran = bash["details"].get("timed_out") and "hello" in bash["text"]
    assert ran or (bash["error"] and "can't start new thread" in bash["text"]), bash


def test_bash_ends_floods_and_timeouts_without_a_thread_of_its_own(
    solved_src: Path, tmp_path: Path
) -> None:
    echo, flood, stuck = calls(solved_src, tmp_path, "watcher-only")
    assert not echo["error"] and echo["text"].startswith("hello"), echo
    assert not flood["error"] and flood["details"].get("truncated"), (
        f"past its budget the output is dropped as it comes, also without the thread that "
        f"discards it, and the command ends by itself: {flood}"
    )
    assert stuck["error"] and stuck["details"].get("timed_out"), stuck
