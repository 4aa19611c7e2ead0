"""The settings one registry's tools share."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, TypeAlias

Containment: TypeAlias = Literal["workspace", "unrestricted"]
CONTAINMENTS: tuple[Containment, ...] = ("workspace", "unrestricted")


@dataclass(frozen=True)
class CodingToolOptions:
    cwd: str  # absolute path of the workspace
    containment: Containment = "workspace"
    max_read_bytes: int = 48_000
    max_read_lines: int = 240
    max_bash_output_bytes: int = 96_000
    bash_timeout_ms: int = 30_000

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
