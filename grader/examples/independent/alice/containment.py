"""Lab 8.2: workspace containment (written independently, for the similarity tests)."""

from __future__ import annotations

from pathlib import Path

from picourse.coding_tools.errors import WorkspaceEscapeError


def ensure_inside_workspace(workspace: str, target: str) -> None:
    base = Path(workspace).absolute()
    wanted = Path(target)
    if not wanted.is_absolute():
        wanted = base / wanted
    parts: list[str] = []
    for part in wanted.parts[1:]:
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    lexical = Path(wanted.anchor, *parts)
    if lexical != base and base not in lexical.parents:
        raise WorkspaceEscapeError(f"{target} escapes the workspace")
    existing = lexical
    while not existing.exists() and existing != base:
        existing = existing.parent
    real_base = base.resolve()
    real = existing.resolve()
    if real != real_base and real_base not in real.parents:
        raise WorkspaceEscapeError(f"{target} escapes the workspace via a symlink to {real}")
