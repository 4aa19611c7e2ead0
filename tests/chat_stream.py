"""What an OpenAI-compatible server streams for chat completions (server-sent events):
the bodies the project's model tests and the model benchmark serve."""

from __future__ import annotations

import json
from typing import Any

from werkzeug import Response

DONE = "data: [DONE]\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> str:
    """One ``chat.completion.chunk`` event; with ``usage``, the final usage-only event."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        body["choices"] = []
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


def tool_call_stream(call_id: str, name: str, arguments: str, pieces: int = 5) -> list[str]:
    """One tool call whose arguments arrive in ``pieces`` cuts, some inside strings."""
    size = max(1, len(arguments) // pieces)
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    first = {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                             "function": {"name": name, "arguments": ""}}]}  # fmt: skip
    rest = [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in parts]
    return [chunk(first), *(chunk(d) for d in rest), chunk({}, "tool_calls")]


def sse(*chunks: str, done: bool = True) -> Response:
    body = "".join(chunks) + (DONE if done else "")
    return Response(body, content_type="text/event-stream")
