"""Lexical containment only: symlinks are not resolved (a common first attempt)."""

import os

from picourse.coding_tools.errors import WorkspaceEscapeError


def ensure_inside_workspace(workspace: str, target: str) -> None:
    root = os.path.abspath(workspace)
    if os.path.commonpath([root, os.path.abspath(target)]) != root:
        raise WorkspaceEscapeError(f"{target} escapes the workspace {root}")
