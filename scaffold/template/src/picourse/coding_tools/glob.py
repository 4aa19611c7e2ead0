"""Lab 8.7 — find paths by pattern, read-only (optional stage).

``find_paths`` resolves ``path`` with the workspace resolver (Lab 8.2), walks below it and
returns, one per line and sorted, the paths relative to the workspace whose path relative to
``path`` matches ``pattern``: ``*`` any characters within one name, ``?`` one character
other than ``/``, ``**`` across any number of folders (``**/*.py`` also matches ``a.py``; a
``**`` not followed by ``/`` matches any characters, ``/`` included); every other character
matches itself. Matching folders end with ``/``. Matching must stay fast on any name: a
``*`` followed by fixed text and another ``*`` (or a ``**`` not followed by ``/``) takes the
first place that text occurs, atomically (``(?>[^/]*?abc)``), or ``*a*a*a*a*a*a*a*b``
backtracks for minutes; never before a ``**/``, which may match no folder (``*a**/x.py``
matches ``aax.py``). Unless ``include_hidden``: skip names that start with ``.``, dependency
folders (``options.DEPENDENCY_FOLDERS`` and any folder holding a ``pyvenv.cfg``) and what
the ``.gitignore`` at the workspace root ignores, without descending into them. That one
file applies wherever the search starts, and its patterns are relative to the workspace
root: match it against paths relative to the workspace. Read it with
``pathspec.GitIgnoreSpec.from_lines(lines)`` (``PathSpec.from_lines("gitwildmatch", ...)``
is deprecated and warns), ask about a folder with a trailing ``/``, and open the file with
the given ``files.open_regular_file`` (a FIFO named ``.gitignore`` must not stall the walk);
skip the lines pathspec cannot take (``!``, ``[z-a]``), as git does. Never follow symlinked
folders. More matches than ``limit`` (default ``options.DEFAULT_GLOB_LIMIT``): end with
``[Showing {limit} of {total} matches; use a narrower pattern ...]``. No match is a
successful result that says ``No paths match {pattern!r}.`` An empty pattern, or one that is
absolute or has a ``..`` part anywhere, is an error, and so is a ``path`` that is a file or
does not exist (name it, as ``ls`` does). Report ``GlobDetails``.
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
