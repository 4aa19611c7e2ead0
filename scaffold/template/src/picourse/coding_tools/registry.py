"""``create_coding_tools``: the tools, their argument schemas and their wiring.

Given. Each tool's work happens in its lab module; this file only declares what the
model may send and hands validated arguments over. The extension stages are switched on
here: ``navigation`` (8.7), ``confirm`` (8.8) and ``careful_edits`` (8.9).
"""

from __future__ import annotations

import os
from typing import Any

from picourse.coding_tools.approval import Confirm
from picourse.coding_tools.bash import run_bash
from picourse.coding_tools.careful_edit import ReadLedger
from picourse.coding_tools.details import Edit, ReadDetails
from picourse.coding_tools.edit import edit_file
from picourse.coding_tools.errors import PathError
from picourse.coding_tools.files import file_stamp
from picourse.coding_tools.glob import find_paths
from picourse.coding_tools.ls import list_directory
from picourse.coding_tools.mutation_queue import canonical_key
from picourse.coding_tools.options import CodingToolOptions, Containment
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.read import read_file
from picourse.coding_tools.threads import in_thread
from picourse.coding_tools.write import write_file
from picourse.tool import (
    Array,
    Boolean,
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


def _edit_schema(careful: bool) -> Object:
    replace_all = (
        {"replace_all": Boolean("Replace every occurrence instead of exactly one.", optional=True)}
        if careful
        else {}
    )
    return object_schema(
        {
            "path": string("File to edit."),
            "edits": Array(
                Object(
                    {
                        "old_text": string("Exact text to find; must match once."),
                        "new_text": string("Replacement text."),
                        **replace_all,
                    }
                ),
                "Replacements applied in order; all succeed or none is written.",
                optional=True,
            ),
            "old_text": optional_string("Shorthand for a single edit: exact text to find."),
            "new_text": optional_string("Shorthand for a single edit: replacement text."),
            **replace_all,
        }
    )


BASH_SCHEMA = object_schema({"command": string("Shell command, run with bash in the workspace.")})
LS_SCHEMA = object_schema(
    {
        "path": optional_string("Directory to list (default: the workspace)."),
        "limit": optional_positive_int("Maximum number of entries to show."),
    }
)
GLOB_SCHEMA = object_schema(
    {
        "pattern": string("Glob relative to path: * and ? within a name, ** across folders."),
        "path": optional_string("Directory to search from (default: the workspace)."),
        "include_hidden": Boolean(
            "Also search hidden paths, dependency folders and .gitignored files.", optional=True
        ),
        "limit": optional_positive_int("Maximum number of paths to return."),
    }
)


def create_coding_tools(
    cwd: str | os.PathLike[str],
    containment: Containment = "workspace",
    *,
    max_read_bytes: int = 48_000,
    max_read_lines: int = 240,
    max_bash_output_bytes: int = 96_000,
    bash_timeout_ms: int = 30_000,
    navigation: bool = False,
    confirm: Confirm | None = None,
    careful_edits: bool = False,
) -> ToolRegistry:
    """A registry with ``read``, ``write``, ``edit`` and ``bash``, in that order.

    ``navigation=True`` adds the read-only ``ls`` and ``glob`` after them (Lab 8.7);
    ``confirm`` asks an approver before write, edit and bash change anything (Lab 8.8);
    ``careful_edits=True`` makes edit and write careful (Lab 8.9): read before editing,
    ``replace_all``, kept line endings and BOM, hints, and the edited region in the result.
    """
    options = CodingToolOptions(
        os.fspath(cwd),
        containment,
        max_read_bytes,
        max_read_lines,
        max_bash_output_bytes,
        bash_timeout_ms,
        confirm=confirm,
        careful_edits=careful_edits,
        ledger=ReadLedger() if careful_edits else None,
    )
    tools = [read_tool(options), write_tool(options), edit_tool(options), bash_tool(options)]
    if navigation:
        tools += [ls_tool(options), glob_tool(options)]
    return ToolRegistry(tools)


def read_tool(options: CodingToolOptions) -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        before = _identity(options, params["path"]) if options.ledger is not None else None
        output = await read_file(
            options,
            params["path"],
            offset=params.get("offset", 1),
            limit=params.get("limit"),
            signal=ctx.signal,
        )
        if options.ledger is not None and isinstance(output.details, ReadDetails):
            # Careful edits (8.9): remember what the model has seen of this file.
            await in_thread(_remember, options.ledger, output.details.path, before)
        return output

    return Tool(
        "read",
        f"Read a text file as numbered lines, at most {options.max_read_lines} lines and "
        f"{options.max_read_bytes} bytes at a time. When more remains, the result ends with "
        "the offset to continue from.",
        READ_SCHEMA,
        execute,
        read_only=True,
    )


# What no file holds: remembered for a file that changed while it was read, so that the
# next write or edit of it is refused as changed since read (what the model saw is gone).
_CHANGED_WHILE_READ = b"\0changed while read\0" + os.urandom(16)


def _identity(options: CodingToolOptions, path: str) -> tuple[int, ...] | None:
    try:
        return _identity_of(resolve_path(options, path))
    except PathError:
        return None


def _identity_of(absolute: str) -> tuple[int, ...] | None:
    """Which file this is and its last change: equal before and after a read when no other
    program wrote it meanwhile (the read shows one file; the ledger hashes it after)."""
    try:
        status = os.stat(absolute)
    except (OSError, ValueError):
        return None
    return file_stamp(status)


def _remember(ledger: ReadLedger, path: str, before: tuple[int, ...] | None) -> None:
    try:
        key = canonical_key(path)
    except OSError:  # a symlink in it swapped meanwhile: which file was read is not known
        return
    ledger.record_file(key)
    if before is None or _identity_of(key) != before:
        ledger.record(key, _CHANGED_WHILE_READ)


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
            edits = [
                Edit(item["old_text"], item["new_text"], item.get("replace_all", False))
                for item in params["edits"]
            ]
        elif "old_text" in params and "new_text" in params:
            edits = [Edit(params["old_text"], params["new_text"], params.get("replace_all", False))]
        else:
            return ToolOutput.error(
                "edit needs edits: [{old_text, new_text}, ...] or both old_text and new_text."
            )
        return await edit_file(options, params["path"], edits, signal=ctx.signal)

    return Tool(
        "edit",
        "Replace exact text in a file. Each old_text must match exactly once; several edits are "
        "applied in order and written together, or not at all."
        + (" Read a file before editing it." if options.careful_edits else ""),
        _edit_schema(options.careful_edits),
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


def ls_tool(options: CodingToolOptions) -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        return await list_directory(options, params.get("path", "."), limit=params.get("limit"))

    return Tool(
        "ls",
        "List a directory: folders first (with a / suffix), then files. Read-only.",
        LS_SCHEMA,
        execute,
        read_only=True,
    )


def glob_tool(options: CodingToolOptions) -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        return await find_paths(
            options,
            params["pattern"],
            params.get("path", "."),
            include_hidden=params.get("include_hidden", False),
            limit=params.get("limit"),
        )

    return Tool(
        "glob",
        "Find files by pattern, as sorted paths relative to the workspace. Skips hidden "
        "paths, dependency folders and .gitignored files unless include_hidden is true. "
        "Read-only.",
        GLOB_SCHEMA,
        execute,
        read_only=True,
    )
