"""Lab 8.5 — run a command to exactly one bounded end.

Run ``bash -c command`` (bash, not sh) in the workspace with stdin from /dev/null, as the
leader of a new session (``start_new_session=True``: its own process group, no controlling
terminal). End in exactly one of: success, non-zero exit, timeout, abort, not started. Race
bash's own exit, not the pipes' end (a background child may hold them open). On timeout and
abort: SIGTERM to the group, a short grace (about 1 s, at most 2 s), SIGKILL, and wait for
that before returning. Nothing the command started may outlive the call, also when the
call's task is cancelled (kill the group in a ``finally`` block before the
``CancelledError`` goes on); remove the timer and the abort listener on every path. In
workspace mode refuse (without running) a command in which a word starting with ``/``,
``~/`` or ``../`` stands at the start or after whitespace or one of ``;&|<>()``; the error
mentions the ``guardrail``. A command no program
can receive (NUL, a lone surrogate) and an already-aborted signal give an error result
without spawning anything. The whole text, status such as ``(no output, exit 0)``
included, fits in ``max_bash_output_bytes``. Report ``BashDetails``.
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
