"""Lab 8.6 — drive the coding tools through the real agent loop.

``build_system_prompt(cwd, tools)`` tells the model where it works and what it can do:
it names the workspace by its absolute path (``os.path.abspath(cwd)``) and lists every
tool of the registry it is given, each with its name and its full description.

``run_coding_agent`` builds the tools for ``cwd`` with the ``containment`` it is given
(``create_coding_tools(cwd, containment)``), the system prompt for those tools, and a
context whose only message is the task as a user message, then runs ``run_agent_loop``
to its end, passing ``signal``, ``max_steps`` and ``on_event`` through unchanged.
"""

from __future__ import annotations

from picourse.abort import AbortSignal
from picourse.agent_loop import AgentRun, EventListener
from picourse.coding_tools.options import Containment
from picourse.model import Model
from picourse.tool import ToolRegistry


def build_system_prompt(cwd: str, tools: ToolRegistry) -> str:
    # Lab 8.6: name the workspace and every tool with its description.
    raise NotImplementedError("Lab 8.6 build_system_prompt is not implemented yet")


async def run_coding_agent(
    model: Model,
    cwd: str,
    task: str,
    *,
    containment: Containment = "workspace",
    signal: AbortSignal | None = None,
    max_steps: int | None = 50,
    on_event: EventListener | None = None,
) -> AgentRun:
    # Lab 8.6: tools, system prompt, context with the task, then the loop.
    raise NotImplementedError("Lab 8.6 run_coding_agent is not implemented yet")
