"""Lab 8.8 — see before you write: a diff preview and a confirmation gate (optional stage).

``diff_preview`` renders a unified diff (difflib, 3 lines of context, ``a/{path}`` and
``b/{path}`` in the header, ``/dev/null`` as the old side of a new file), capped at
``max_lines`` lines, then one line that says the diff was ``truncated``. Only ``\\n`` ends a
line, as in read (not ``str.splitlines()``). A last line without a newline is followed by
the line ``\\ No newline at end of file``, as diff and git print it (difflib does not add it
for you); every line of the diff ends with ``\\n``, the last one too. ``ask_before_change``
returns ``"unchanged"`` when old and new are equal (nobody is asked; a new file, even an
empty one, is a change), else asks the approver with a
``ConfirmRequest`` carrying the diff and returns ``"approved"`` or ``"declined"``;
``ask_before_command`` asks with the command. ``terminal_confirmer`` builds an approver for
a person: print the path and the diff in colour (rich), then the question with ``[y/N]`` in
it (print it with ``markup=False``: rich would take ``[y/N]`` for a style tag and drop it);
read one line from ``answers`` (default: stdin) in a worker thread (``asyncio.to_thread``),
so the event loop keeps running while the person thinks. Only ``y`` or ``yes`` approves.

Then wire the gate in: when ``options.confirm`` is set, write and edit ask it (inside
their queue lane, before the atomic write) and bash asks it before anything is spawned. A
declined change is an error result whose text says ``declined``, and nothing changes.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console

from picourse.coding_tools.approval import MAX_DIFF_LINES, Confirm, Decision


def diff_preview(path: str, old: str | None, new: str, *, max_lines: int = MAX_DIFF_LINES) -> str:
    # Lab 8.8: difflib's unified diff, capped with a notice.
    raise NotImplementedError("Lab 8.8 diff_preview is not implemented yet")


async def ask_before_change(
    confirm: Confirm, tool: str, path: str, old: bytes | None, new: bytes
) -> Decision:
    # Lab 8.8: unchanged asks nobody; otherwise ask confirm with the diff.
    raise NotImplementedError("Lab 8.8 ask_before_change is not implemented yet")


async def ask_before_command(confirm: Confirm, command: str) -> bool:
    # Lab 8.8: ask confirm with the command.
    raise NotImplementedError("Lab 8.8 ask_before_command is not implemented yet")


def terminal_confirmer(*, answers: TextIO | None = None, console: Console | None = None) -> Confirm:
    # Lab 8.8: an approver that shows the request and reads y/N.
    raise NotImplementedError("Lab 8.8 terminal_confirmer is not implemented yet")
