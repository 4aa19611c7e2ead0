"""Lab 8.1 — read: a bounded window of numbered lines.

Return lines ``offset`` .. as ``f"{n:>4}│ {line}"`` joined by ``\\n``, bounded at once by
``limit``, ``options.max_read_lines`` and ``options.max_read_bytes`` (UTF-8 bytes of the
whole text, notice included). Show whole lines only. When lines remain, end with a blank
line and ``[Showing lines {a}-{b} of {total}; continue with offset={b+1}]``. See the
handout (Lab 8.1) for the error texts and ``ReadDetails``.
"""

from __future__ import annotations

from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


async def read_file(
    options: CodingToolOptions, path: str, *, offset: int = 1, limit: int | None = None
) -> ToolOutput:
    # Lab 8.1: resolve the path (paths.resolve_path), read the window, report ReadDetails.
    raise NotImplementedError("Lab 8.1 read is not implemented yet")
