"""``create_coding_tools``: the four tools, their argument schemas and their wiring.

Given. Each tool's work happens in its lab module; this file only declares what the
model may send and hands validated arguments over.
"""

from __future__ import annotations

import os
from typing import Any

from picourse.coding_tools.bash import run_bash
from picourse.coding_tools.details import Edit
from picourse.coding_tools.edit import edit_file
from picourse.coding_tools.options import CodingToolOptions, Containment
from picourse.coding_tools.read import read_file
from picourse.coding_tools.write import write_file
from picourse.tool import (
    Array,
    Object,
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    object_schema,
    optional_positive_int,
    optional_string,
    string,
)

READ_SCHEMA = object_schema(
    {
        "path": string("File to read, relative to the workspace (or absolute inside it)."),
        "offset": optional_positive_int("1-based line to start at (default 1)."),
        "limit": optional_positive_int("Maximum number of lines to return."),
    }
)
WRITE_SCHEMA = object_schema(
    {
        "path": string("File to create or replace; parent directories are created."),
        "content": string("The complete new content of the file."),
    }
)
EDIT_SCHEMA = object_schema(
    {
        "path": string("File to edit."),
        "edits": Array(
            Object(
                {
                    "old_text": string("Exact text to find; must match once."),
                    "new_text": string("Replacement text."),
                }
            ),
            "Replacements applied in order; all succeed or none is written.",
            optional=True,
        ),
        "old_text": optional_string("Shorthand for a single edit: exact text to find."),
        "new_text": optional_string("Shorthand for a single edit: replacement text."),
    }
)
BASH_SCHEMA = object_schema({"command": string("Shell command, run with bash in the workspace.")})


def create_coding_tools(
    cwd: str | os.PathLike[str],
    containment: Containment = "workspace",
    *,
    max_read_bytes: int = 48_000,
    max_read_lines: int = 240,
    max_bash_output_bytes: int = 96_000,
    bash_timeout_ms: int = 30_000,
) -> ToolRegistry:
    """A registry with ``read``, ``write``, ``edit`` and ``bash``, in that order."""
    options = CodingToolOptions(
        os.fspath(cwd),
        containment,
        max_read_bytes,
        max_read_lines,
        max_bash_output_bytes,
        bash_timeout_ms,
    )
    return ToolRegistry(
        [read_tool(options), write_tool(options), edit_tool(options), bash_tool(options)]
    )


def read_tool(options: CodingToolOptions) -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        return await read_file(
            options, params["path"], offset=params.get("offset", 1), limit=params.get("limit")
        )

    return Tool(
        "read",
        f"Read a text file as numbered lines, at most {options.max_read_lines} lines and "
        f"{options.max_read_bytes} bytes at a time. When more remains, the result ends with "
        "the offset to continue from.",
        READ_SCHEMA,
        execute,
    )


def write_tool(options: CodingToolOptions) -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        return await write_file(options, params["path"], params["content"])

    return Tool(
        "write",
        "Create a file or replace its whole content. Prefer edit for changes to an existing file.",
        WRITE_SCHEMA,
        execute,
    )


def edit_tool(options: CodingToolOptions) -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        single = "old_text" in params or "new_text" in params
        if "edits" in params and single:
            return ToolOutput.error(
                "Give either edits: [{old_text, new_text}, ...] or a single old_text/new_text "
                "pair, not both."
            )
        if "edits" in params:
            edits = [Edit(item["old_text"], item["new_text"]) for item in params["edits"]]
        elif "old_text" in params and "new_text" in params:
            edits = [Edit(params["old_text"], params["new_text"])]
        else:
            return ToolOutput.error(
                "edit needs edits: [{old_text, new_text}, ...] or both old_text and new_text."
            )
        return await edit_file(options, params["path"], edits)

    return Tool(
        "edit",
        "Replace exact text in a file. Each old_text must match exactly once; several edits are "
        "applied in order and written together, or not at all.",
        EDIT_SCHEMA,
        execute,
    )


def bash_tool(options: CodingToolOptions) -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        return await run_bash(options, params["command"], signal=ctx.signal)

    seconds = options.bash_timeout_ms / 1000
    return Tool(
        "bash",
        f"Run a bash command in the workspace (timeout {seconds:g}s; output is capped at "
        f"{options.max_bash_output_bytes} bytes). Processes it starts do not outlive it.",
        BASH_SCHEMA,
        execute,
    )
