"""Chapter 07, the agent loop: ask the model, run the tools it calls, repeat until it stops.

The invariant that every ending keeps: each tool call in the transcript is followed by
exactly one result with its id and name, in call order. Providers reject a transcript
with an unanswered call, so a call that never ran still gets a result that says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from picourse.abort import AbortSignal
from picourse.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    text,
)
from picourse.model import Model, ModelRequest
from picourse.tool import Tool, ToolRegistry, execute_tool_call

RunReason: TypeAlias = Literal["stop", "length", "aborted", "max_steps", "error"]
EventType: TypeAlias = Literal[
    "agent_start",
    "turn_start",
    "message",
    "tool_start",
    "tool_progress",
    "tool_end",
    "turn_end",
    "agent_end",
]

# How long tools may take to honour an abort themselves before the loop cancels them.
ABORT_GRACE_SECONDS = 5.0


@dataclass
class AgentContext:
    messages: list[Message] = field(default_factory=list)
    system_prompt: str | None = None


@dataclass(frozen=True)
class AgentRun:
    reason: RunReason
    messages: list[Message]
    error: str | None = None


@dataclass(frozen=True)
class AgentEvent:
    """One lifecycle event. Order per turn: turn_start, message, then per call in call
    order tool_start, (tool_progress as it happens), tool_end in call order, turn_end."""

    type: EventType
    step: int
    message: AssistantMessage | None = None
    tool_call: ToolCall | None = None
    result: ToolResultMessage | None = None
    results: tuple[ToolResultMessage, ...] = ()
    progress: Any = None
    reason: RunReason | None = None


EventListener = Callable[[AgentEvent], object]


async def run_agent_loop(
    *,
    model: Model,
    tools: ToolRegistry | Iterable[Tool],
    context: AgentContext | Mapping[str, Any],
    signal: AbortSignal | None = None,
    max_steps: int | None = None,
    on_event: EventListener | None = None,
) -> AgentRun:
    """Run until the model stops; the caller's ``context`` is left as it was."""
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be at least 1 (or None for no limit), got {max_steps}")
    registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
    if isinstance(context, Mapping):
        context = AgentContext(list(context.get("messages", [])), context.get("system_prompt"))
    return await _Run(model, registry, context, signal, max_steps, on_event).run()


class _Run:
    def __init__(
        self,
        model: Model,
        registry: ToolRegistry,
        context: AgentContext,
        signal: AbortSignal | None,
        max_steps: int | None,
        on_event: EventListener | None,
    ) -> None:
        self.model = model
        self.registry = registry
        self.system_prompt = context.system_prompt
        self.messages: list[Message] = list(context.messages)
        self.signal = signal
        self.max_steps = max_steps
        self.on_event = on_event
        self.step = 0

    def emit(self, type: EventType, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(AgentEvent(type, self.step, **fields))

    @property
    def aborted(self) -> bool:
        return self.signal is not None and self.signal.aborted

    async def run(self) -> AgentRun:
        self.emit("agent_start")
        reason, error = await self._turns()
        self.emit("agent_end", reason=reason)
        return AgentRun(reason, self.messages, error)

    async def _turns(self) -> tuple[RunReason, str | None]:
        while True:
            if self.aborted:
                return "aborted", None
            if self.max_steps is not None and self.step >= self.max_steps:
                return "max_steps", None
            self.step += 1
            self.emit("turn_start")
            reply = await self._ask_model()
            self.messages.append(reply)
            self.emit("message", message=reply)
            calls = reply.tool_calls
            ending = _ending_of(reply, self.aborted)
            if ending is not None:
                results = [_unanswered(call, _NOT_RUN[ending]) for call in calls]
            elif calls:
                results = await self._run_tools(calls)
            else:
                results = []
            self.messages.extend(results)
            self.emit("turn_end", message=reply, results=tuple(results))
            if ending is not None:
                return ending, reply.error_message if ending == "error" else None
            if not calls:
                return "stop", None

    async def _ask_model(self) -> AssistantMessage:
        request = ModelRequest(self.system_prompt, list(self.messages), self.registry.definitions())
        try:
            return await _race_abort(self.model.complete(request, self.signal), self.signal)
        except _AbortedWhileWaiting:
            return AssistantMessage([], "aborted")
        except Exception as exc:  # noqa: BLE001 - a failing model ends the run, not the program
            message = f"model error: {type(exc).__name__}: {exc}"
            return AssistantMessage([text(message)], "error", error_message=message)

    async def _run_tools(self, calls: Sequence[ToolCall]) -> list[ToolResultMessage]:
        tasks: dict[int, asyncio.Task[ToolResultMessage]] = {}
        for index, call in enumerate(calls):
            self.emit("tool_start", tool_call=call)
            if not self.aborted:
                tasks[index] = asyncio.create_task(
                    execute_tool_call(
                        call,
                        self.registry,
                        signal=self.signal,
                        report_progress=self._progress_reporter(call),
                    )
                )
        try:
            await self._wait_for_tools(list(tasks.values()))
        finally:
            # Whatever happens to this loop, no tool task outlives it.
            leftovers = [task for task in tasks.values() if not task.done()]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
        results = []
        for index, call in enumerate(calls):
            maybe_task = tasks.get(index)
            if maybe_task is None:
                result = _unanswered(call, _NOT_RUN["aborted"])
                results.append(result)
                self.emit("tool_end", tool_call=call, result=result)
                continue
            task = maybe_task
            if task.cancelled():
                result = _unanswered(
                    call,
                    f"Tool call aborted: it did not stop within {ABORT_GRACE_SECONDS:g}s "
                    "of the abort, so it was cancelled.",
                )
            elif task.exception() is not None:
                result = _unanswered(call, f"Tool call failed: {task.exception()!r}")
            else:
                result = task.result()
            results.append(result)
            self.emit("tool_end", tool_call=call, result=result)
        return results

    async def _wait_for_tools(self, tasks: list[asyncio.Task[ToolResultMessage]]) -> None:
        if not tasks:
            return
        if self.signal is None:
            await asyncio.wait(tasks)
            return
        abort_waiter = asyncio.ensure_future(self.signal.wait())
        try:
            pending = set(tasks)
            while pending and not abort_waiter.done():
                done, _ = await asyncio.wait(
                    pending | {abort_waiter}, return_when=asyncio.FIRST_COMPLETED
                )
                pending -= done
            if pending:
                # Aborted: tools hold the signal and should end on their own, with their own
                # result; give them a grace period, then cancel the ones that ignore it.
                _, late = await asyncio.wait(pending, timeout=ABORT_GRACE_SECONDS)
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
        finally:
            abort_waiter.cancel()

    def _progress_reporter(self, call: ToolCall) -> Callable[[Any], None]:
        def report(update: Any) -> None:
            self.emit("tool_progress", tool_call=call, progress=update)

        return report


class _AbortedWhileWaiting(Exception):
    pass


async def _race_abort(
    work: Awaitable[AssistantMessage], signal: AbortSignal | None
) -> AssistantMessage:
    """Await ``work`` unless the signal fires first; then cancel it and raise."""
    if signal is None:
        return await work
    work_task = asyncio.ensure_future(work)
    abort_waiter = asyncio.ensure_future(signal.wait())
    try:
        racers: set[asyncio.Future[Any]] = {work_task, abort_waiter}
        await asyncio.wait(racers, return_when=asyncio.FIRST_COMPLETED)
        if work_task.done():
            return work_task.result()
        raise _AbortedWhileWaiting
    finally:
        for task in (work_task, abort_waiter):
            if not task.done():
                task.cancel()
        await asyncio.gather(work_task, abort_waiter, return_exceptions=True)


_NOT_RUN: dict[RunReason, str] = {
    "length": "Tool call not executed: the model's reply was cut off (stop reason 'length'), "
    "so its arguments may be incomplete. Ask again with a shorter reply.",
    "aborted": "Tool call not executed: the run was aborted.",
    "error": "Tool call not executed: the model's turn ended with an error.",
}


def _ending_of(reply: AssistantMessage, aborted: bool) -> RunReason | None:
    """The reason this turn ends the run before its tools run, if it does."""
    if reply.stop_reason in ("length", "aborted", "error"):
        return reply.stop_reason
    if aborted:
        return "aborted"
    return None


def _unanswered(call: ToolCall, why: str) -> ToolResultMessage:
    return ToolResultMessage(call.id, call.name, [text(why)], None, is_error=True)
