"""Lab 8.2 (reference): keep read, write and edit inside the workspace.

Two checks, because either alone can be fooled: the lexical one catches absolute paths
and ``..``; the real-path one catches a symlink inside the workspace that points out.
``os.path.realpath`` resolves every existing component and keeps the rest as written, so
for a file that does not exist yet it checks the real path of its nearest existing
ancestor: a write cannot create a file behind a symlink either.

Both comparisons are by whole path components (``commonpath``), never by string prefix:
``/ws-evil`` starts with ``/ws`` but is outside it. The workspace itself is inside.
``realpath`` does not raise on a symlink loop; the loop stays where it is, and opening it
later fails with a clear error result.
"""

from __future__ import annotations

import os

from picourse.coding_tools.errors import WorkspaceEscapeError


def ensure_inside_workspace(workspace: str, target: str) -> None:
    """Raise ``WorkspaceEscapeError`` unless ``target`` stays inside ``workspace``."""
    # commonpath spells "//ws" as "/ws" (one folder on Linux and macOS; abspath keeps the
    # two apart): spell the root its way too, so that _within compares like with like.
    root = os.path.commonpath([os.path.abspath(workspace)])
    absolute = os.path.abspath(target)
    if not _within(absolute, root):
        raise WorkspaceEscapeError(
            f"{target} escapes the workspace {root}. Use a path inside the workspace; "
            "relative paths start there."
        )
    real_root = os.path.realpath(root)
    real = os.path.realpath(absolute)
    if not _within(real, real_root):
        raise WorkspaceEscapeError(
            f"{target} escapes the workspace through a symlink: it really is {real}, outside "
            f"{real_root}. Work on files inside the workspace."
        )


def _within(path: str, root: str) -> bool:
    return path == root or os.path.commonpath([path, root]) == root
