"""Lab 8.4 — a batch of exact replacements, committed all or nothing.

Apply ``edits`` in order to an in-memory copy (a later edit sees an earlier one's
result). Each ``old_text`` must occur exactly once when its turn comes (overlapping
occurrences count). Any error names ``edits[i]`` and leaves the file unchanged; success
writes once through ``write.write_atomic`` inside the default mutation queue.
"""

from __future__ import annotations

from picourse.coding_tools.details import Edit
from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


async def edit_file(options: CodingToolOptions, path: str, edits: list[Edit]) -> ToolOutput:
    # Lab 8.4: validate the batch, apply it in memory, commit once.
    raise NotImplementedError("Lab 8.4 edit is not implemented yet")
