"""Lab 8.2 — keep read, write and edit inside the workspace.

``paths.resolve_path`` calls this in workspace mode with the joined, normalised path.
Refuse a path that leaves the workspace lexically, and one that leaves it through a
symlink (judge the real path of the target, or of its nearest existing ancestor when the
target does not exist yet). Raise ``WorkspaceEscapeError`` with a message containing
``escapes the workspace`` (and ``symlink`` for the second case).

Compare whole path components, not string prefixes (``/ws-evil`` is not inside ``/ws``),
on both checks. The workspace itself (``"."``) is inside. Raise nothing else: a symlink
loop is not an escape, and reading it later is an error result of its own.
"""

from __future__ import annotations


def ensure_inside_workspace(workspace: str, target: str) -> None:
    # Lab 8.2: the lexical check, then the real-path check.
    raise NotImplementedError("Lab 8.2 workspace containment is not implemented yet")
