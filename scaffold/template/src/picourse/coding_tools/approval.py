"""What the confirmation gate (Lab 8.8) asks an approver, and the approver that trusts.

Given. An approver is any ``async (ConfirmRequest) -> bool``: True lets the change
happen. ``create_coding_tools(..., confirm=approver)`` turns the gate on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

MAX_DIFF_LINES = 100  # a longer diff is cut, with a notice
# What the gate makes of a change: equal content needs nobody's approval.
Decision: TypeAlias = Literal["approved", "declined", "unchanged"]


@dataclass(frozen=True)
class ConfirmRequest:
    tool: str  # "write", "edit" or "bash"
    path: str | None = None  # the file, as the model named it (write, edit)
    diff: str | None = None  # unified diff of the change (write, edit)
    command: str | None = None  # the command line (bash)


Confirm: TypeAlias = Callable[[ConfirmRequest], Awaitable[bool]]


async def approve_all(request: ConfirmRequest) -> bool:
    """Approve everything: for tests and for runs you trust."""
    return True
