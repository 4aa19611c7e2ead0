"""The settings one registry's tools share."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    from picourse.coding_tools.approval import Confirm
    from picourse.coding_tools.careful_edit import ReadLedger

Containment: TypeAlias = Literal["workspace", "unrestricted"]
CONTAINMENTS: tuple[Containment, ...] = ("workspace", "unrestricted")

# Lab 8.7: how much ls and glob show when the model gives no limit, and what glob skips.
DEFAULT_LIST_LIMIT = 500
DEFAULT_GLOB_LIMIT = 200
DEPENDENCY_FOLDERS = frozenset(
    {"node_modules", "__pycache__", "venv", ".venv", "site-packages", ".tox", ".git"}
)


@dataclass(frozen=True)
class CodingToolOptions:
    cwd: str  # absolute path of the workspace
    containment: Containment = "workspace"
    max_read_bytes: int = 48_000
    max_read_lines: int = 240
    max_bash_output_bytes: int = 96_000
    bash_timeout_ms: int = 30_000
    # The extension stages; off by default, so stages 8.1-8.6 never depend on them.
    confirm: Confirm | None = None  # Lab 8.8: ask before write, edit and bash
    careful_edits: bool = False  # Lab 8.9: replace_all, line endings, hints, snippet
    ledger: ReadLedger | None = None  # Lab 8.9: what was read; set with careful_edits

    def __post_init__(self) -> None:
        if self.containment not in CONTAINMENTS:
            raise ValueError(
                f"containment must be 'workspace' or 'unrestricted', got {self.containment!r}"
            )
        for name in (
            "max_read_bytes",
            "max_read_lines",
            "max_bash_output_bytes",
            "bash_timeout_ms",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        object.__setattr__(self, "cwd", os.path.abspath(os.fspath(self.cwd)))
