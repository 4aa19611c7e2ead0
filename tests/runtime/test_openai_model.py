"""OpenAIChatModel against a real HTTP server on localhost that speaks chat completions,
streaming (SSE) and not: tool calls from awkward deltas, retries, errors, abort."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from picourse.abort import AbortController
from picourse.agent_loop import AgentContext, run_agent_loop
from picourse.messages import TextContent, ToolCall, user_message
from picourse.model import ModelRequest
from picourse.openai_model import OpenAIChatModel
from picourse.tool import Object, String, Tool, ToolContext, ToolOutput, ToolRegistry
from tests.chat_stream import chunk, sse, tool_call_stream

PATH = "/v1/chat/completions"


def model_for(server: HTTPServer, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "test-model", base_url=server.url_for("/v1"), api_key="sk-test", **options
    )


def request_for(text: str, tools: list[dict[str, Any]] | None = None) -> ModelRequest:
    return ModelRequest("be brief", [user_message(text)], tools or [])


def echo_registry(seen: list[Any]) -> ToolRegistry:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        seen.append(params)
        return ToolOutput([TextContent(f"echo: {params['value']}")])

    return ToolRegistry([Tool("echo", "Echo a value.", Object({"value": String()}), execute)])


def test_streamed_text_arrives_piece_by_piece_with_usage(server: HTTPServer) -> None:
    server.expect_request(PATH, method="POST").respond_with_response(
        sse(
            chunk({"role": "assistant", "content": "Hel"}),
            chunk({"content": "lo"}),
            chunk({}, "stop"),
            chunk({}, usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}),
        )
    )
    pieces: list[str] = []
    model = model_for(server, on_text=pieces.append)
    reply = asyncio.run(model.complete(request_for("hi")))
    assert reply.stop_reason == "stop" and reply.text == "Hello"
    assert pieces == ["Hel", "lo"], "text is handed on as it arrives"
    assert model.usage is not None and (
        model.usage.prompt_tokens,
        model.usage.completion_tokens,
    ) == (7, 2)
    sent = json.loads(server.log[0][0].get_data())
    assert sent["stream"] is True and sent["messages"][0] == {
        "role": "system",
        "content": "be brief",
    }


def test_tool_calls_are_assembled_from_deltas_cut_anywhere(server: HTTPServer) -> None:
    arguments = json.dumps({"value": 'naïve "quoted" text ✓'})
    second = [
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "ec", "arguments": '{"val'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"name": "ho", "arguments": 'ue": "2"}'}}]}),
    ]  # fmt: skip
    stream = tool_call_stream("call_a", "echo", arguments, pieces=7)
    server.expect_request(PATH).respond_with_response(sse(*stream[:-1], *second, stream[-1]))
    registry = echo_registry([])
    reply = asyncio.run(model_for(server).complete(request_for("x", registry.definitions())))
    assert reply.stop_reason == "toolUse"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "echo", {"value": 'naïve "quoted" text ✓'}),
        ("call_b", "echo", {"value": "2"}),
    ]
    sent = json.loads(server.log[0][0].get_data())
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "echo",
                "description": "Echo a value.",
                "parameters": registry.definitions()[0]["parameters"],
            },
        }
    ]


def test_not_streamed_replies_work_too(server: HTTPServer) -> None:
    server.expect_request(PATH).respond_with_json(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "echo", "arguments": '{"value": "v"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        }
    )
    model = model_for(server, stream=False)
    reply = asyncio.run(model.complete(request_for("x")))
    assert reply.tool_calls == [ToolCall("c1", "echo", {"value": "v"})]
    assert model.total_usage.completion_tokens == 4


def test_a_429_is_retried_after_its_retry_after(server: HTTPServer) -> None:
    arrivals: list[float] = []

    def limited(request: Request) -> Response:
        arrivals.append(time.monotonic())
        return Response("slow down", status=429, headers={"Retry-After": "1"})

    def ok(request: Request) -> Response:
        arrivals.append(time.monotonic())
        return sse(chunk({"content": "fine"}), chunk({}, "stop"))

    server.expect_ordered_request(PATH).respond_with_handler(limited)
    server.expect_ordered_request(PATH).respond_with_handler(ok)
    reply = asyncio.run(model_for(server).complete(request_for("x")))
    assert reply.stop_reason == "stop" and reply.text == "fine"
    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] >= 0.95, "the retry waits as long as Retry-After says"


def test_5xx_until_the_retry_budget_ends_is_an_error_reply(server: HTTPServer) -> None:
    server.expect_request(PATH).respond_with_response(
        Response("down", status=503, headers={"Retry-After": "0.01"})
    )
    reply = asyncio.run(model_for(server, max_retries=2).complete(request_for("x")))
    assert reply.stop_reason == "error" and "503" in (reply.error_message or "")
    assert len(server.log) == 3, "one try and two retries, then the error"


@pytest.mark.parametrize(
    ("status", "advice"),
    [(401, "OPENAI_API_KEY"), (404, "--model")],
)
def test_a_bad_key_or_an_unknown_model_says_what_to_do(
    server: HTTPServer, status: int, advice: str
) -> None:
    server.expect_request(PATH).respond_with_json(
        {"error": {"message": "nope", "type": "invalid_request_error"}}, status=status
    )
    reply = asyncio.run(model_for(server).complete(request_for("x")))
    assert reply.stop_reason == "error" and advice in (reply.error_message or "")
    assert len(server.log) == 1, f"a {status} is not retried"


@pytest.mark.parametrize(
    "error",
    [
        {  # llama.cpp's server
            "code": 400,
            "message": "request (4118 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
        },
        {  # OpenAI
            "message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        },
    ],
    ids=["llama.cpp", "openai"],
)
def test_a_full_context_says_to_start_a_new_session(
    server: HTTPServer, error: dict[str, Any]
) -> None:
    server.expect_request(PATH).respond_with_json({"error": error}, status=400)
    reply = asyncio.run(model_for(server).complete(request_for("x")))
    message = reply.error_message or ""
    assert reply.stop_reason == "error" and "no longer fits the model's context" in message
    assert "start a new one" in message and error["message"] in message
    assert len(server.log) == 1, "a 400 is not retried"


def test_an_unreachable_server_says_so() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    reply = asyncio.run(model.complete(request_for("x")))
    assert reply.stop_reason == "error" and "cannot reach" in (reply.error_message or "")


def test_a_stream_cut_midway_is_an_error_and_runs_no_half_call(server: HTTPServer) -> None:
    stream = tool_call_stream("c", "echo", json.dumps({"value": "never whole"}))
    server.expect_request(PATH).respond_with_response(sse(*stream[:3], done=False))
    reply = asyncio.run(model_for(server).complete(request_for("x")))
    assert reply.stop_reason == "error" and "ended" in (reply.error_message or "")
    assert reply.tool_calls == [], "a call whose arguments were cut off must not run"


# Unterminated; an integer json refuses to convert (over 4300 digits); nesting too deep for
# the parser (RecursionError, not a ValueError): each a result the model sees, not a crash.
MALFORMED = ['{"value": "unterminated', '{"value": 1' + "0" * 5000 + "}", "[" * 100_000]


@pytest.mark.parametrize("arguments", MALFORMED, ids=["unterminated", "huge-int", "too-deep"])
def test_malformed_arguments_become_an_error_result_the_model_sees(
    server: HTTPServer, arguments: str
) -> None:
    seen: list[Any] = []
    server.expect_ordered_request(PATH).respond_with_response(
        sse(*tool_call_stream("bad", "echo", arguments))
    )
    server.expect_ordered_request(PATH).respond_with_response(
        sse(chunk({"content": "sorry"}), chunk({}, "stop"))
    )
    run = asyncio.run(
        run_agent_loop(
            model=model_for(server),
            tools=echo_registry(seen),
            context=AgentContext([user_message("go")]),
        )
    )
    assert run.reason == "stop" and seen == [], "the tool never ran on broken arguments"
    second = json.loads(server.log[1][0].get_data())
    tool_message = next(m for m in second["messages"] if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "bad"
    assert "Invalid arguments for tool 'echo'" in tool_message["content"]
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"]["arguments"] == arguments


def test_abort_during_streaming_cancels_the_stream(server: HTTPServer) -> None:
    started = threading.Event()
    release = threading.Event()

    def hold(request: Request) -> Response:
        def body() -> Iterator[str]:
            yield chunk({"content": "thinking"})
            started.set()
            release.wait(30)  # held open until the test ends
            yield chunk({}, "stop")

        return Response(body(), content_type="text/event-stream")

    server.expect_request(PATH).respond_with_handler(hold)
    controller = AbortController()
    received = threading.Event()
    model = model_for(server, on_text=lambda piece: received.set())

    async def scenario() -> Any:
        task = asyncio.ensure_future(model.complete(request_for("x"), controller.signal))
        # Abort once the client has the first piece and the server holds the stream open.
        await asyncio.to_thread(received.wait, 30)
        await asyncio.to_thread(started.wait, 30)
        controller.abort("user pressed Ctrl-C")
        return await asyncio.wait_for(task, 10)

    try:
        reply = asyncio.run(scenario())
    finally:
        release.set()
    assert reply.stop_reason == "aborted" and reply.text == "thinking"


def test_a_keep_alive_chunk_without_choices_is_skipped(server: HTTPServer) -> None:
    keep_alive = "data: {}\n\n"
    server.expect_request(PATH).respond_with_response(
        sse(chunk({"content": "still "}), keep_alive, chunk({"content": "here"}), chunk({}, "stop"))
    )
    reply = asyncio.run(model_for(server).complete(request_for("x")))
    assert reply.stop_reason == "stop" and reply.text == "still here"


@pytest.mark.parametrize(
    "body",
    [
        '{"id": "x", "object": "chat.completion", "choices": []}',
        "this is not json",
        '{"unexpected": true}',
    ],
)
def test_a_reply_that_is_no_chat_completion_is_a_clear_error(server: HTTPServer, body: str) -> None:
    server.expect_request(PATH).respond_with_data(body, content_type="application/json")
    reply = asyncio.run(model_for(server, stream=False).complete(request_for("x")))
    assert reply.stop_reason == "error", reply
    assert "reply" in (reply.error_message or ""), reply.error_message
    assert reply.tool_calls == []


def test_the_clients_error_words_are_never_sent_back_as_the_models(server: HTTPServer) -> None:
    server.expect_ordered_request(PATH).respond_with_response(
        sse(chunk({"content": "par"}), done=False)  # cut: no finish reason, no [DONE]
    )
    server.expect_ordered_request(PATH).respond_with_response(
        sse(chunk({"content": "ok"}), chunk({}, "stop"))
    )
    model = model_for(server)
    first = asyncio.run(model.complete(request_for("x")))
    assert first.stop_reason == "error" and first.text == "par", "only the model's words"
    assert first.error_message and first.error_message not in first.text
    again = ModelRequest("be brief", [user_message("x"), first, user_message("again")], [])
    asyncio.run(model.complete(again))
    sent = json.loads(server.log[1][0].get_data())["messages"]
    assistant = [m for m in sent if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": "par"}], sent
