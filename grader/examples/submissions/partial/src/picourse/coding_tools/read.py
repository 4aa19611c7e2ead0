"""A student's first read: whole file in memory, but whole lines and a correct notice."""

from __future__ import annotations

from picourse.abort import AbortSignal
from picourse.coding_tools.details import ReadDetails
from picourse.coding_tools.errors import PathError
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.tool import ToolOutput


async def read_file(
    options: CodingToolOptions,
    path: str,
    *,
    offset: int = 1,
    limit: int | None = None,
    signal: AbortSignal | None = None,
) -> ToolOutput:
    try:
        absolute = resolve_path(options, path)
        with open(absolute, "rb") as file:
            data = file.read()
    except (PathError, OSError) as error:
        return ToolOutput.error(f"Cannot read {path}: {error} (not found or a directory?)")
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if text == "":
        lines = []
    total = len(lines)
    if offset > max(total, 1):
        return ToolOutput.error(f"offset={offset} is beyond the end of the file ({total} lines)")
    most = min(limit or options.max_read_lines, options.max_read_lines)
    window = lines[offset - 1 : offset - 1 + most]
    shown = [f"{offset + i:>4}│ {line}" for i, line in enumerate(window)]
    sizes = [len(line.encode()) + 1 for line in shown]  # each with the newline after it
    size = sum(sizes)
    while True:
        end = offset + len(shown) - 1
        notice = ""
        if end < total:
            notice = f"\n\n[Showing lines {offset}-{end} of {total}; continue with offset={end + 1}]"
        if max(size - 1, 0) + len(notice.encode()) <= options.max_read_bytes:
            break
        if not shown:
            return ToolOutput.error(
                f"too small to return a complete line starting at line {offset}"
            )
        shown.pop()
        size -= sizes.pop()
    body = "\n".join(shown) + notice
    return ToolOutput.of_text(
        body, ReadDetails(absolute, len(data), total, offset, end, end < total)
    )
