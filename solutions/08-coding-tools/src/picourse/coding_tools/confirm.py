"""Lab 8.8 (reference): see before you write.

Write and edit compute the whole new content first, show it as a unified diff (3 lines
of context, capped) and touch the disk only if the approver says yes. Identical content
asks nothing and writes nothing. Bash asks with the command. Read-only tools never ask.
"""

from __future__ import annotations

import difflib
import sys
from typing import TextIO

from rich.console import Console
from rich.syntax import Syntax

from picourse.coding_tools.approval import MAX_DIFF_LINES, Confirm, ConfirmRequest, Decision
from picourse.coding_tools.threads import in_thread


def diff_preview(path: str, old: str | None, new: str, *, max_lines: int = MAX_DIFF_LINES) -> str:
    """A unified diff from ``old`` (None: the file is new) to ``new``. difflib finds the
    changed blocks, so edits far apart show as separate hunks, not one long change."""
    before = [] if old is None else _lines(old)
    diff = list(
        difflib.unified_diff(
            before,
            _lines(new),
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile=f"b/{path}",
            n=3,
        )
    )
    if len(diff) > max_lines:
        left = len(diff) - max_lines
        diff = [*diff[:max_lines], f"[diff truncated: {left} more lines not shown]\n"]
    return "".join(diff)


async def ask_before_change(
    confirm: Confirm, tool: str, path: str, old: bytes | None, new: bytes
) -> Decision:
    """Ask the approver about replacing ``old`` (None: no file yet) with ``new``."""
    if old == new:
        return "unchanged"
    # difflib on a large file takes seconds: in a worker, so the event loop goes on meanwhile.
    diff = await in_thread(_preview, path, old, new)
    approved = await confirm(ConfirmRequest(tool, path=path, diff=diff))
    return "approved" if approved else "declined"


async def ask_before_command(confirm: Confirm, command: str) -> bool:
    return await confirm(ConfirmRequest("bash", command=command))


def terminal_confirmer(*, answers: TextIO | None = None, console: Console | None = None) -> Confirm:
    """An approver for a person at a terminal: shows the diff (or command) in colour and
    asks y/N; anything but y or yes declines."""
    shown = console or Console(stderr=True)

    async def confirm(request: ConfirmRequest) -> bool:
        if request.diff is not None:
            shown.print(f"[bold]{request.tool}[/bold] wants to change {request.path}:")
            shown.print(Syntax(request.diff, "diff", theme="ansi_dark"))
        else:
            shown.print(f"[bold]{request.tool}[/bold] wants to run: {request.command}")
        shown.print("Allow? [y/N] ", end="", markup=False, highlight=False)
        line = await in_thread((answers or sys.stdin).readline)
        return line.strip().lower() in {"y", "yes"}

    return confirm


def _lines(text: str) -> list[str]:
    """The lines of ``text`` for difflib. Only ``\\n`` ends a line, as read counts them
    (``str.splitlines`` also splits on ``\\r``, form feeds and ``\\u2028``)."""
    lines = [f"{line}\n" for line in text.split("\n")]
    last = lines.pop()  # what follows the final \n: nothing, or a last line without one
    if last != "\n":
        lines.append(f"{last}\\ No newline at end of file\n")
    return lines


def _preview(path: str, old: bytes | None, new: bytes) -> str:
    return diff_preview(path, None if old is None else _text(old), _text(new))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
