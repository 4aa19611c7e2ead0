"""Lab 8.4 — a batch of exact replacements, committed all or nothing.

Apply ``edits`` in order to an in-memory copy (a later edit sees an earlier one's
result). Each ``old_text`` must occur exactly once when its turn comes (overlapping
occurrences count). An edit's own error names ``edits[i]``, one of the file (missing, not
UTF-8, read-only, aborted) names the file; every error leaves the file unchanged; success
writes once through ``write.write_atomic`` inside the default mutation queue, and the
file is read inside that same queued operation. ``EditDetails`` counts UTF-8 bytes.

Open the file without blocking and edit only a regular file: ``files.open_existing``
does both (a FIFO or a device is refused instead of hanging). ``signal`` is the call's
abort signal: check it while reading and before writing; an aborted edit
writes nothing and its error says 'aborted'.
"""

from __future__ import annotations

from picourse.abort import AbortSignal
from picourse.coding_tools.details import Edit
from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


async def edit_file(
    options: CodingToolOptions,
    path: str,
    edits: list[Edit],
    *,
    signal: AbortSignal | None = None,
) -> ToolOutput:
    # Lab 8.4: validate the batch, then in one queued operation read, apply, commit once.
    raise NotImplementedError("Lab 8.4 edit is not implemented yet")
