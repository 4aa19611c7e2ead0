"""Overhead of OpenAIChatModel per turn over a bare `openai` SDK call, in the same run,
against a local server that answers at once (a streamed reply with a tool call and usage).

    python benchmarks/bench_model.py

Both sides use one AsyncOpenAI client, stream the same reply and read it to the end; they
alternate, so load on the machine falls on both alike. Target: the median difference is at
most 10 ms per turn.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scaffold" / "template" / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openai import AsyncOpenAI

from picourse.messages import user_message
from picourse.model import ModelRequest
from picourse.openai_model import OpenAIChatModel
from tests.chat_stream import DONE, chunk, tool_call_stream

TARGET_MS = 10.0
TURNS = 200


def _reply() -> bytes:
    arguments = json.dumps({"path": "src/app.py", "offset": 1, "limit": 120})
    usage = {"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930}
    parts = [
        chunk({"content": "Let me look. "}),
        *tool_call_stream("call_1", "read", arguments, pieces=len(arguments) // 8),
        chunk({}, usage=usage),
    ]
    return ("".join(parts) + DONE).encode()


REPLY = _reply()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)

    def log_message(self, *args: Any) -> None:
        return


async def _measure(url: str) -> tuple[list[float], list[float]]:
    client = AsyncOpenAI(base_url=url, api_key="k", max_retries=0)
    model = OpenAIChatModel("m", client=client)
    tools = [
        {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    request = ModelRequest("You are a coding agent.", [user_message("look at app.py")], tools)

    async def bare() -> None:
        stream = await client.chat.completions.create(  # type: ignore[call-overload]
            model="m",
            messages=[
                {"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "look at app.py"},
            ],
            tools=[{"type": "function", "function": tools[0]}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async with stream:
            async for _ in stream:
                pass

    async def ours() -> None:
        reply = await model.complete(request)
        assert reply.tool_calls, reply

    for _ in range(20):  # warm up connections and code paths
        await bare()
        await ours()
    with_sdk: list[float] = []
    with_model: list[float] = []
    for _ in range(TURNS):
        for action, times in ((bare, with_sdk), (ours, with_model)):
            start = time.perf_counter()
            await action()
            times.append(time.perf_counter() - start)
    await client.close()
    return with_sdk, with_model


def main() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with_sdk, with_model = asyncio.run(_measure(url))
    finally:
        server.shutdown()
        server.server_close()
    sdk_ms = statistics.median(with_sdk) * 1000
    model_ms = statistics.median(with_model) * 1000
    overhead = model_ms - sdk_ms
    ok = overhead <= TARGET_MS
    print(
        f"{'ok  ' if ok else 'MISS'} model turn: median {model_ms:.2f} ms vs bare SDK "
        f"{sdk_ms:.2f} ms: overhead {overhead:+.2f} ms (target <= {TARGET_MS:g} ms, "
        f"{TURNS} turns each, interleaved)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
