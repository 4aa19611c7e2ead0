"""Lab 8.3 — replace a whole file atomically.

``write_file`` resolves the path, then runs ``write_atomic`` inside the default mutation
queue. ``write_atomic`` creates parent directories, writes a temp file in the target's
directory, and renames it over the target; no temp file survives any path. A directory
target is an error. Report ``WriteDetails`` (UTF-8 bytes).
"""

from __future__ import annotations

from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


async def write_file(options: CodingToolOptions, path: str, content: str) -> ToolOutput:
    # Lab 8.3: resolve, queue under the canonical key, write atomically, report.
    raise NotImplementedError("Lab 8.3 write is not implemented yet")


def write_atomic(path: str, data: bytes) -> None:
    # Lab 8.3: temp file in the same directory, then rename over the target.
    raise NotImplementedError("Lab 8.3 write_atomic is not implemented yet")
