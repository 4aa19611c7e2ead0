"""Lab 8.5 — run a command to exactly one bounded end.

Run ``bash -c command`` in the workspace as the leader of a new process group. End in
exactly one of: success, non-zero exit, timeout, abort, not started. On timeout and abort:
SIGTERM to the group, a short grace, SIGKILL, and wait for that before returning. Nothing
the command started may outlive the call. In workspace mode refuse (without running) a
command in which a word starting with ``/``, ``~/`` or ``../`` stands at the start or after
whitespace or one of ``;&|<>()``. Report ``BashDetails``.
"""

from __future__ import annotations

from picourse.abort import AbortSignal
from picourse.coding_tools.options import CodingToolOptions
from picourse.tool import ToolOutput


def find_guardrail_violation(command: str) -> str | None:
    # Lab 8.5: the first word that names a path outside the workspace, or None.
    raise NotImplementedError("Lab 8.5 the bash guardrail is not implemented yet")


async def run_bash(
    options: CodingToolOptions, command: str, *, signal: AbortSignal | None = None
) -> ToolOutput:
    # Lab 8.5: guardrail, spawn, drain both pipes, race exit/timeout/abort, clean up.
    raise NotImplementedError("Lab 8.5 bash is not implemented yet")
