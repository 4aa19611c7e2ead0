"""Shared builders and the pairing check used by the runtime tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from picourse.messages import (
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolResultMessage,
    text,
)
from picourse.tool import Object, Tool, ToolContext, ToolOutput, optional_string, string


def reply(
    *calls: ToolCall, say: str = "", stop_reason: StopReason | None = None
) -> AssistantMessage:
    content: list[Any] = [text(say)] if say else []
    content.extend(calls)
    return AssistantMessage(content, stop_reason or ("toolUse" if calls else "stop"))


def call(call_id: str, name: str = "echo", **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, arguments or {"value": call_id})


def make_tool(
    name: str,
    execute: Callable[[Any, ToolContext], Awaitable[ToolOutput]],
) -> Tool:
    schema = Object({"value": string("any text"), "note": optional_string()})
    return Tool(name, f"the {name} test tool", schema, execute)


def echo_tool(name: str = "echo") -> Tool:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput.of_text(params["value"], details={"call_id": ctx.call_id})

    return make_tool(name, execute)


def assert_paired(messages: list[Message]) -> None:
    """Every tool call is followed, before the next assistant turn, by exactly one result
    with its id and name, in call order, and no result answers a call that was not made."""
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if not isinstance(message, AssistantMessage):
            assert not isinstance(message, ToolResultMessage), (
                f"a tool result at position {index - 1} answers no assistant turn"
            )
            continue
        calls = message.tool_calls
        answers = messages[index : index + len(calls)]
        assert len(answers) == len(calls), (
            f"turn at {index - 1} made {len(calls)} call(s) but only {len(answers)} messages follow"
        )
        for tool_call, answer in zip(calls, answers, strict=True):
            assert isinstance(answer, ToolResultMessage), (
                f"call {tool_call.id} is answered by a {answer.role} message, not a tool result"
            )
            assert (answer.tool_call_id, answer.tool_name) == (tool_call.id, tool_call.name), (
                f"results are out of call order: expected {tool_call.id}/{tool_call.name}, "
                f"got {answer.tool_call_id}/{answer.tool_name}"
            )
        index += len(calls)
