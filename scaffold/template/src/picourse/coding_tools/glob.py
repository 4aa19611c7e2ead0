"""Lab 8.7 — find paths by pattern, read-only (optional stage).

``find_paths`` resolves ``path`` with the workspace resolver (Lab 8.2), walks below it
and returns, one per line and sorted, the paths relative to the workspace whose path
relative to ``path`` matches ``pattern``: ``*`` and ``?`` within one name, ``**`` across
any number of folders (``**/*.py`` also matches ``a.py``); folders end with ``/``.
Unless ``include_hidden``: skip names that start with ``.``, dependency folders
(``options.DEPENDENCY_FOLDERS`` and any folder holding a ``pyvenv.cfg``) and what the
workspace's ``.gitignore`` ignores (use ``pathspec``), without descending into them.
Never follow symlinked folders. More matches than ``limit`` (default
``options.DEFAULT_GLOB_LIMIT``): end with ``[Showing {limit} of {total} matches; use a narrower
pattern ...]``. No match is a successful result that says so. An empty pattern, or one
that is absolute or climbs with ``..``, is an error. Report ``GlobDetails``.
"""

from __future__ import annotations

from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


async def find_paths(
    options: CodingToolOptions,
    pattern: str,
    path: str = ".",
    *,
    include_hidden: bool = False,
    limit: int | None = None,
) -> ToolOutput:
    # Lab 8.7: resolve, walk without following symlinks, prune, match, sort, cap, report.
    raise NotImplementedError("Lab 8.7 glob is not implemented yet")
