"""Lab 8.6 (reference): drive the coding tools through the real agent loop."""

from __future__ import annotations

import os

from picourse.abort import AbortSignal
from picourse.agent_loop import AgentContext, AgentRun, EventListener, run_agent_loop
from picourse.coding_tools.options import Containment
from picourse.coding_tools.registry import create_coding_tools
from picourse.messages import user_message
from picourse.model import Model
from picourse.tool import ToolRegistry


def build_system_prompt(cwd: str, tools: ToolRegistry) -> str:
    """Tell the model where it works and what each tool does."""
    lines = [
        "You are a coding agent. You work in the directory (the workspace):",
        f"  {os.path.abspath(cwd)}",
        "Relative paths start there. Read a file before you edit it; prefer edit over write "
        "for changes to an existing file; check your work with bash.",
        "",
        "Tools:",
    ]
    lines += [f"- {tool.name}: {tool.description}" for tool in tools.list()]
    return "\n".join(lines)


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
    """Give ``task`` to ``model`` with the four coding tools rooted at ``cwd``."""
    tools = create_coding_tools(cwd, containment)
    context = AgentContext([user_message(task)], build_system_prompt(cwd, tools))
    return await run_agent_loop(
        model=model,
        tools=tools,
        context=context,
        signal=signal,
        max_steps=max_steps,
        on_event=on_event,
    )
