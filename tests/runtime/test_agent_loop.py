"""The agent loop: turns, concurrency, ordering, events, and one result per call on every ending."""

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from picourse import agent_loop
from picourse.abort import AbortController, AbortSignal
from picourse.agent_loop import AgentContext, AgentEvent, run_agent_loop
from picourse.messages import AssistantMessage, ToolResultMessage, text, user_message
from picourse.model import ModelRequest
from picourse.scripted_model import ScriptedModel
from picourse.tool import ToolContext, ToolOutput, ToolRegistry

from .helpers import assert_paired, call, echo_tool, make_tool, reply

START = [user_message("please help")]


def run_loop(**kwargs: Any) -> Any:
    kwargs.setdefault("context", AgentContext(list(START)))
    return asyncio.run(asyncio.wait_for(run_agent_loop(**kwargs), timeout=30))


def results_of(messages: list[Any]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def test_a_turn_without_tool_calls_stops_and_keeps_the_input() -> None:
    context = AgentContext(list(START), system_prompt="be brief")
    model = ScriptedModel([reply(say="done")])
    run = run_loop(model=model, tools=[echo_tool()], context=context)
    assert run.reason == "stop"
    assert run.messages == [*START, reply(say="done")]
    assert context.messages == START, "the caller's context must not be mutated"
    assert model.requests[0].system_prompt == "be brief"
    assert model.requests[0].tools == ToolRegistry([echo_tool()]).definitions()


def test_a_plain_dict_context_is_accepted() -> None:
    run = run_loop(
        model=ScriptedModel([reply(say="ok")]),
        tools=[],
        context={"messages": list(START), "system_prompt": "s"},
    )
    assert run.reason == "stop" and run.messages[0] == START[0]


def test_tool_results_follow_their_turn_and_the_model_sees_them() -> None:
    model = ScriptedModel([reply(call("c1"), call("c2")), reply(say="thanks")])
    run = run_loop(model=model, tools=[echo_tool()])
    assert run.reason == "stop"
    assert_paired(run.messages)
    assert [r.text for r in results_of(run.messages)] == ["c1", "c2"]
    assert len(model.requests) == 2
    assert model.requests[1].messages == run.messages[:-1]


def test_tools_of_one_turn_run_concurrently_and_results_keep_call_order() -> None:
    # "first" can only finish after "second" has started: a sequential loop would deadlock
    # (and hit the wait_for deadline); a concurrent one finishes "second" first.
    second_started = asyncio.Event()
    finished: list[str] = []

    async def first(params: Any, ctx: ToolContext) -> ToolOutput:
        await second_started.wait()
        finished.append("first")
        return ToolOutput.of_text("first")

    async def second(params: Any, ctx: ToolContext) -> ToolOutput:
        second_started.set()
        finished.append("second")
        return ToolOutput.of_text("second")

    async def scenario() -> Any:
        model = ScriptedModel([reply(call("a", "first"), call("b", "second")), reply(say="ok")])
        tools = [make_tool("first", first), make_tool("second", second)]
        return await asyncio.wait_for(
            run_agent_loop(model=model, tools=tools, context=AgentContext(list(START))), timeout=10
        )

    run = asyncio.run(scenario())
    assert finished == ["second", "first"]
    assert [r.tool_call_id for r in results_of(run.messages)] == ["a", "b"]


def test_tool_errors_are_results_not_crashes() -> None:
    model = ScriptedModel([reply(call("c1", "nope"), call("c2", "echo", value=5)), reply(say="ok")])
    run = run_loop(model=model, tools=[echo_tool()])
    assert run.reason == "stop"
    unknown, invalid = results_of(run.messages)
    assert unknown.is_error and "Unknown tool" in unknown.text
    assert invalid.is_error and "Invalid arguments" in invalid.text


@pytest.mark.parametrize("stop_reason", ["length", "error", "aborted"])
def test_a_cut_off_turn_ends_the_run_and_its_calls_are_answered_without_running(
    stop_reason: Any,
) -> None:
    ran: list[str] = []

    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        ran.append(ctx.call_id)
        return ToolOutput.of_text("ran")

    model = ScriptedModel([reply(call("c1", "t"), call("c2", "t"), stop_reason=stop_reason)])
    run = run_loop(model=model, tools=[make_tool("t", execute)])
    assert run.reason == stop_reason
    assert ran == [], f"tools must not run after a turn that ended with {stop_reason!r}"
    assert_paired(run.messages)
    assert all(r.is_error and "not executed" in r.text for r in results_of(run.messages))


def test_a_failing_model_ends_the_run_with_reason_error() -> None:
    class Broken:
        async def complete(self, request: ModelRequest, signal: AbortSignal | None = None) -> Any:
            raise ConnectionError("provider down")

    run = run_loop(model=Broken(), tools=[])
    assert run.reason == "error"
    assert "ConnectionError: provider down" in (run.error or "")
    assert run.messages[-1].stop_reason == "error"


def test_running_past_the_script_ends_with_a_clear_error() -> None:
    run = run_loop(model=ScriptedModel([reply(call("c1"))]), tools=[echo_tool()])
    assert run.reason == "error"
    assert "script holds 1 turn" in (run.error or "")
    assert_paired(run.messages)


def test_abort_before_the_model_is_asked() -> None:
    controller = AbortController()
    controller.abort("early")
    model = ScriptedModel([reply(say="never")])
    run = run_loop(model=model, tools=[], signal=controller.signal)
    assert run.reason == "aborted"
    assert model.requests == []
    assert run.messages == START


def test_abort_while_the_model_is_thinking() -> None:
    asked = asyncio.Event()

    class Slow:
        async def complete(self, request: ModelRequest, signal: AbortSignal | None = None) -> Any:
            asked.set()
            await asyncio.Event().wait()  # never answers

    async def scenario() -> Any:
        controller = AbortController()
        task = asyncio.create_task(
            run_agent_loop(
                model=Slow(), tools=[], context=AgentContext(list(START)), signal=controller.signal
            )
        )
        await asked.wait()
        controller.abort("user")
        return await asyncio.wait_for(task, timeout=10)

    run = asyncio.run(scenario())
    assert run.reason == "aborted"
    assert run.messages[-1] == AssistantMessage([], "aborted")


def test_abort_between_the_reply_and_its_tools() -> None:
    controller = AbortController()
    ran: list[str] = []

    class AbortsAsItAnswers:
        async def complete(self, request: ModelRequest, signal: AbortSignal | None = None) -> Any:
            controller.abort("user")
            return reply(call("c1", "t"), call("c2", "t"))

    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        ran.append(ctx.call_id)
        return ToolOutput.of_text("ran")

    run = run_loop(
        model=AbortsAsItAnswers(), tools=[make_tool("t", execute)], signal=controller.signal
    )
    assert run.reason == "aborted"
    assert ran == []
    assert_paired(run.messages)


def test_abort_during_tools_keeps_cooperative_results_and_cancels_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stubborn tool never returns, so the grace period always runs out: no race.
    monkeypatch.setattr(agent_loop, "ABORT_GRACE_SECONDS", 0.05)
    both_running = asyncio.Barrier(3)
    stubborn_cleaned_up = asyncio.Event()

    async def polite(params: Any, ctx: ToolContext) -> ToolOutput:
        await both_running.wait()
        assert ctx.signal is not None
        reason = await ctx.signal.wait()
        return ToolOutput.error(f"stopped: {reason}")

    async def stubborn(params: Any, ctx: ToolContext) -> ToolOutput:
        await both_running.wait()
        try:
            await asyncio.Event().wait()
        finally:
            stubborn_cleaned_up.set()
        raise AssertionError("unreachable")

    async def scenario() -> Any:
        controller = AbortController()
        model = ScriptedModel(
            [reply(call("p", "polite"), call("s", "stubborn")), reply(say="never asked")]
        )
        task = asyncio.create_task(
            run_agent_loop(
                model=model,
                tools=[make_tool("polite", polite), make_tool("stubborn", stubborn)],
                context=AgentContext(list(START)),
                signal=controller.signal,
            )
        )
        await both_running.wait()
        controller.abort("user")
        run = await asyncio.wait_for(task, timeout=10)
        return run, model

    run, model = asyncio.run(scenario())
    assert run.reason == "aborted"
    assert len(model.requests) == 1
    assert_paired(run.messages)
    polite_result, stubborn_result = results_of(run.messages)
    assert polite_result.text == "stopped: user"
    assert stubborn_result.is_error and "cancelled" in stubborn_result.text
    assert stubborn_cleaned_up.is_set()


def test_max_steps_ends_the_run_after_answering_every_call() -> None:
    model = ScriptedModel([reply(call(f"c{i}")) for i in range(5)])
    run = run_loop(model=model, tools=[echo_tool()], max_steps=2)
    assert run.reason == "max_steps"
    assert len(model.requests) == 2
    assert_paired(run.messages)
    assert len(results_of(run.messages)) == 2


def test_max_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        run_loop(model=ScriptedModel([]), tools=[], max_steps=0)


def test_events_arrive_in_a_stable_order() -> None:
    events: list[AgentEvent] = []

    async def slow(params: Any, ctx: ToolContext) -> ToolOutput:
        ctx.progress("working")
        return ToolOutput.of_text("slow")

    model = ScriptedModel([reply(call("a", "slow"), call("b", "echo")), reply(say="done")])
    run = run_loop(
        model=model, tools=[make_tool("slow", slow), echo_tool()], on_event=events.append
    )
    summary = [(e.type, e.step, e.tool_call.id if e.tool_call else None) for e in events]
    assert summary == [
        ("agent_start", 0, None),
        ("turn_start", 1, None),
        ("message", 1, None),
        ("tool_start", 1, "a"),
        ("tool_start", 1, "b"),
        ("tool_progress", 1, "a"),
        ("tool_end", 1, "a"),
        ("tool_end", 1, "b"),
        ("turn_end", 1, None),
        ("turn_start", 2, None),
        ("message", 2, None),
        ("turn_end", 2, None),
        ("agent_end", 2, None),
    ]
    assert events[5].progress == "working"
    assert events[-1].reason == run.reason == "stop"
    assert events[8].results == tuple(results_of(run.messages))


# ---------------------------------------------------------------- the pairing property

STOPS = st.sampled_from(["stop", "toolUse", "length", "error", "aborted"])
TURN = st.tuples(
    st.integers(min_value=0, max_value=3), STOPS, st.sampled_from(["echo", "boom", "missing"])
)


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(TURN, min_size=0, max_size=5),
    max_steps=st.none() | st.integers(1, 4),
    abort_at=st.none() | st.integers(0, 5),
)
def test_every_call_gets_exactly_one_result_on_every_ending(
    turns: list[tuple[int, Any, str]], max_steps: int | None, abort_at: int | None
) -> None:
    controller = AbortController()

    async def boom(params: Any, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("boom")

    script = [
        AssistantMessage([text("t"), *[call(f"t{i}c{j}", name) for j in range(n)]], stop)
        for i, (n, stop, name) in enumerate(turns)
    ]

    class Model(ScriptedModel):
        async def complete(self, request: ModelRequest, signal: AbortSignal | None = None) -> Any:
            if abort_at is not None and len(self.requests) == abort_at:
                controller.abort("hypothesis")
            return await super().complete(request, signal)

    run = run_loop(
        model=Model(script),
        tools=[echo_tool(), make_tool("boom", boom)],
        signal=controller.signal,
        max_steps=max_steps,
    )
    assert run.reason in {"stop", "length", "aborted", "max_steps", "error"}
    assert_paired(run.messages)
    assert run.messages[: len(START)] == START
