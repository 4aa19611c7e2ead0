"""Helpers the Lab 8 tests share. Keep this file as it is: grading uses its own copy."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from picourse.abort import AbortSignal
from picourse.tool import ToolContext, ToolOutput, ToolRegistry

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T], timeout: float = 20) -> T:
    """Run a coroutine with a deadline, so a hang fails instead of freezing the suite."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def call(
    tools: ToolRegistry, name: str, arguments: dict[str, Any], *, signal: AbortSignal | None = None
) -> ToolOutput:
    """Validate the arguments and call the tool's execute directly, so that a
    NotImplementedError from an unfinished stage shows as itself."""
    tool = tools.get(name)
    assert tool is not None, f"create_coding_tools must register a tool named {name!r}"
    params = tool.schema.validate(arguments)
    output = await tool.execute(params, ToolContext(f"call-{name}", signal, None))
    assert isinstance(output, ToolOutput), f"the {name} tool must return a ToolOutput"
    return output


def call_now(tools: ToolRegistry, name: str, **arguments: Any) -> ToolOutput:
    return run(call(tools, name, arguments))


def text_of(output: ToolOutput) -> str:
    return "".join(part.text for part in output.content)


def utf8_len(value: str) -> int:
    return len(value.encode("utf-8"))


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every entry below a directory with its content (or link target): proof of no change."""
    entries: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        key = str(path.relative_to(directory))
        if path.is_symlink():
            entries[key] = "-> " + os.readlink(path)
        elif path.is_file():
            entries[key] = path.read_bytes()
        else:
            entries[key] = "<dir>"
    return entries


async def wait_for_file(path: Path, call: asyncio.Task[Any], timeout: float = 10) -> str:
    """Synchronise with a child process: it writes this file when it reaches a known point.
    If the tool call ends first, its exception (or its early result) is the failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text().strip()
        if call.done():
            raise_task_failures(call)
            raise AssertionError(
                f"the call returned before its command wrote {path.name}: {call.result()!r}"
            )
        await asyncio.sleep(0.01)
    raise AssertionError(f"the child process never wrote {path.name}; it did not start as expected")


def raise_task_failures(*tasks: asyncio.Task[Any]) -> None:
    """Surface an exception from a finished task (an unfinished stage's NotImplementedError)
    instead of letting a later assertion hide it."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


def fifo_target(workspace: Path, link: str | None) -> tuple[Path, str]:
    """A FIFO in the workspace, and the name to give a tool: the FIFO's own, or that of a
    symlink ``link`` to it."""
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    if link is None:
        return fifo, "pipe"
    os.symlink("pipe", workspace / link)
    return fifo, link
