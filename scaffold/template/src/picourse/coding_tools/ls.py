"""Lab 8.7 — list one directory, read-only (optional stage).

``list_directory`` resolves the path with the workspace resolver (Lab 8.2) and lists the
directory: folders first with a ``/`` suffix (a symlink to a folder is a folder too), then
files (a link that leads nowhere, dangling or a loop, among them), each group sorted by
name, one per line; then a count such as ``[3 entries]``.
More entries than ``limit`` (default ``options.DEFAULT_LIST_LIMIT``): show the first
``limit`` and end with ``[Showing {limit} of {total} entries; ...]`` instead. A file, or
a path that does not exist, is a clear error. Report ``ListDetails`` (the total, not
only what was shown). Nothing here may write.
"""

from __future__ import annotations

from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


async def list_directory(
    options: CodingToolOptions, path: str = ".", *, limit: int | None = None
) -> ToolOutput:
    # Lab 8.7: resolve, list folders then files, cap with a notice, report ListDetails.
    raise NotImplementedError("Lab 8.7 ls is not implemented yet")
