import asyncio

import pytest

from picourse.messages import Message, user_message
from picourse.model import ModelRequest
from picourse.scripted_model import ScriptedModel, ScriptExhaustedError

from .helpers import reply


def test_replays_turns_in_order_and_records_requests() -> None:
    first, second = reply(say="one"), reply(say="two")
    model = ScriptedModel([first, second])

    async def scenario() -> None:
        assert await model.complete(ModelRequest("sys", [user_message("a")], [])) is first
        assert await model.complete(ModelRequest("sys", [user_message("b")], [])) is second

    asyncio.run(scenario())
    assert [r.messages[0] for r in model.requests] == [user_message("a"), user_message("b")]


def test_requests_are_snapshots_taken_at_call_time() -> None:
    messages: list[Message] = [user_message("before")]
    tools = [{"name": "t", "description": "d", "parameters": {}}]
    model = ScriptedModel([reply(say="ok")])
    asyncio.run(model.complete(ModelRequest(None, messages, tools)))
    messages.append(user_message("after"))
    tools[0]["name"] = "changed"
    assert model.requests[0].messages == [user_message("before")]
    assert model.requests[0].tools[0]["name"] == "t"


def test_running_past_the_script_is_a_clear_error() -> None:
    model = ScriptedModel([reply(say="only")])
    request = ModelRequest(None, [], [])
    asyncio.run(model.complete(request))
    with pytest.raises(ScriptExhaustedError, match="asked for turn 2, but its script holds 1"):
        asyncio.run(model.complete(request))
