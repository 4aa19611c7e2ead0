"""A real model: any server that speaks the OpenAI-compatible chat completions API.

OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio and OpenRouter all speak it. This class
implements the runtime's model protocol (``complete``) with the official ``openai`` SDK:

- the registry's tool definitions go out in function-calling format;
- replies stream: text is handed to ``on_text`` as it arrives, tool calls are assembled
  from their streamed deltas (a call's id and name come first, its arguments in pieces);
- the abort signal cancels the HTTP stream at once (the loop then cancels running tools);
- 429 and 5xx answers are retried with backoff, honouring ``Retry-After`` (the SDK's own
  retry logic, which reads ``retry-after-ms`` and ``retry-after``);
- a bad key, an unknown model or an unreachable server end the turn with
  ``stop_reason="error"`` and a message that says what to do, never an exception;
- arguments that are not valid JSON are passed on as the raw string: the runtime turns
  them into an error result that the model sees and can correct;
- token usage, when the server reports it, is kept in ``usage`` (per call) and
  ``total_usage``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from picourse.abort import AbortSignal
from picourse.messages import (
    AssistantMessage,
    Message,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from picourse.model import ModelRequest

if TYPE_CHECKING:
    import openai
    from openai import AsyncOpenAI

DEFAULT_RETRIES = 4
FINISH_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "length": "length",
    "content_filter": "error",
}


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass
class _ToolCallDraft:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIChatModel:
    """``complete`` over ``/chat/completions``. ``client`` wins over ``base_url``/``api_key``;
    without either, the SDK reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``."""

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = DEFAULT_RETRIES,
        timeout: float = 600.0,
        stream: bool = True,
        on_text: Callable[[str], None] | None = None,
    ) -> None:
        self.model = model
        self.stream = stream
        self.on_text = on_text
        self.usage: Usage | None = None  # of the last call, when the server said
        self.total_usage = Usage()
        # Imported here, not at the top: the SDK's import costs about half a second of CPU,
        # which a process that imports this module but talks to no model need not pay.
        from openai import AsyncOpenAI

        self._client = client or AsyncOpenAI(
            base_url=base_url,
            # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
            api_key=api_key or _env_key() or "no-key",
            max_retries=max_retries,
            timeout=timeout,
        )

    async def complete(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AssistantMessage:
        import openai  # the SDK's errors (imported with the client in __init__)

        self.usage = None
        reply = _Reply()
        if signal is not None and signal.aborted:
            return reply.message("aborted")
        call = asyncio.ensure_future(self._call(request, reply))
        remove = signal.add_listener(call.cancel) if signal is not None else _noop
        try:
            return await call
        except asyncio.CancelledError:
            if signal is not None and signal.aborted:
                return reply.message("aborted")
            raise
        except openai.APIError as error:
            return reply.failed(_explain(error, self._client))
        except (ValueError, TypeError, LookupError, AttributeError) as error:
            return reply.failed(
                f"the server's reply is not a chat completion ({type(error).__name__}: "
                f"{error}); is {self._client.base_url} its OpenAI-compatible address "
                "(usually ending in /v1)?"
            )
        finally:
            remove()

    async def _call(self, request: ModelRequest, reply: _Reply) -> AssistantMessage:
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request),
        }
        if request.tools:
            arguments["tools"] = to_openai_tools(request.tools)
        if not self.stream:
            completion = await self._client.chat.completions.create(**arguments)
            self._count(completion.usage)
            if not completion.choices:
                return reply.failed("the server's reply holds no choice; try again")
            choice = completion.choices[0]
            reply.add_text(choice.message.content or "", None)
            for index, tool_call in enumerate(choice.message.tool_calls or []):
                function = getattr(tool_call, "function", None)
                reply.add_call(index, tool_call.id, function and function.name)
                reply.add_arguments(index, function.arguments if function else "")
            return reply.message(FINISH_REASONS.get(choice.finish_reason or "stop", "stop"))
        stream = await self._client.chat.completions.create(
            **arguments, stream=True, stream_options={"include_usage": True}
        )
        finish: str | None = None
        async with stream:
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    self._count(chunk.usage)
                for choice in getattr(chunk, "choices", None) or []:  # none: a keep-alive
                    delta = choice.delta
                    reply.add_text(delta.content or "", self.on_text)
                    for part in delta.tool_calls or []:
                        function = part.function
                        reply.add_call(part.index, part.id, function.name if function else None)
                        reply.add_arguments(part.index, function.arguments if function else None)
                    finish = choice.finish_reason or finish
        if finish is None:
            return reply.failed(
                "the server ended the stream before the reply was complete (the connection "
                "was cut, or the server does not speak the chat completions stream); try again"
            )
        return reply.message(FINISH_REASONS.get(finish, "stop"))

    def _count(self, usage: Any) -> None:
        if usage is None:
            return
        self.usage = Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)
        self.total_usage = self.total_usage + self.usage


class _Reply:
    """What has arrived of one reply, in order: text, then tool calls by their index."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _ToolCallDraft] = {}

    def add_text(self, piece: str, on_text: Callable[[str], None] | None) -> None:
        if piece:
            self._text.append(piece)
            if on_text is not None:
                on_text(piece)

    def add_call(self, index: int, call_id: str | None, name: str | None) -> None:
        draft = self._calls.setdefault(index, _ToolCallDraft())
        draft.id = draft.id or (call_id or "")
        # Most servers send the name once; some repeat it whole in every delta.
        if name and name != draft.name:
            draft.name += name

    def add_arguments(self, index: int, piece: str | None) -> None:
        if piece:
            self._calls.setdefault(index, _ToolCallDraft()).arguments.append(piece)

    def message(self, stop_reason: StopReason) -> AssistantMessage:
        content: list[TextContent | ToolCall] = []
        if self._text:
            content.append(TextContent("".join(self._text)))
        # A reply cut short (aborted, too long, failed) keeps its text but no calls: a call
        # whose arguments may be cut off must not run.
        if stop_reason in ("stop", "toolUse"):
            for index in sorted(self._calls):
                draft = self._calls[index]
                content.append(ToolCall(draft.id or f"call_{index}", draft.name, _arguments(draft)))
            if self._calls:
                stop_reason = "toolUse"  # some servers say "stop" after tool calls
        return AssistantMessage(content, stop_reason)

    def failed(self, why: str) -> AssistantMessage:
        # Only what the model said is content; the client's own words are the error's.
        partial: list[TextContent | ToolCall] = (
            [TextContent("".join(self._text))] if self._text else []
        )
        return AssistantMessage(partial, "error", error_message=why)


def to_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The runtime's transcript in chat-completions form."""
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": _utf8(request.system_prompt)})
    for message in request.messages:
        if isinstance(message, AssistantMessage) and not (_said(message) or message.tool_calls):
            continue  # a failed or aborted reply with nothing said: no message to send
        messages.append(_to_openai(message))
    return messages


def _to_openai(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _utf8("".join(part.text for part in message.content))}
    if isinstance(message, ToolResultMessage):
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": _utf8(message.text),
        }
    out: dict[str, Any] = {"role": "assistant", "content": _utf8(_said(message)) or None}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    return out


def _utf8(text: str) -> str:
    """Text a request can carry. A file name that is not UTF-8 reaches Python as lone
    surrogates, which no UTF-8 request can hold (the SDK would fail to send it): the model
    sees the name's odd bytes escaped instead, ``caf\\xe9.txt``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no undecodable byte makes
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _said(message: AssistantMessage) -> str:
    """The model's own text: an error reply's message is the client's, never resent."""
    return "".join(
        part.text
        for part in message.content
        if isinstance(part, TextContent)
        and not (message.stop_reason == "error" and part.text == message.error_message)
    )


def to_openai_tools(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``registry.definitions()`` in function-calling form."""
    return [
        {
            "type": "function",
            "function": {
                "name": definition["name"],
                "description": definition.get("description", ""),
                "parameters": definition.get("parameters", {"type": "object"}),
            },
        }
        for definition in definitions
    ]


def _arguments(draft: _ToolCallDraft) -> Any:
    raw = "".join(draft.arguments)
    try:
        return json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):
        return raw  # the runtime answers the model with "not valid JSON" (or too deep)


def _explain(error: openai.APIError, client: AsyncOpenAI) -> str:
    import openai

    where = str(client.base_url)
    if isinstance(error, openai.AuthenticationError):
        return (
            f"the server at {where} refused the API key (401). Set OPENAI_API_KEY to a valid "
            "key (local servers such as Ollama accept any)."
        )
    if isinstance(error, openai.NotFoundError):
        return (
            f"the server at {where} does not know this model or endpoint (404: {error.message}). "
            "Check --model against the server's model list (GET /v1/models; for Ollama: "
            "`ollama list`) and that OPENAI_BASE_URL ends in /v1."
        )
    if isinstance(error, openai.APITimeoutError):
        return f"the server at {where} did not answer in time. Is it overloaded?"
    if isinstance(error, openai.APIConnectionError):
        return (
            f"cannot reach the server at {where} ({error.__cause__ or error}). Is it running? "
            "Set OPENAI_BASE_URL to its address, e.g. http://localhost:11434/v1 for Ollama."
        )
    if isinstance(error, openai.RateLimitError):
        return f"the server at {where} is still rate-limiting after every retry (429)."
    if isinstance(error, openai.BadRequestError) and _context_is_full(error):
        return (
            f"the conversation no longer fits the model's context (400: {error.message}). "
            "Every later turn would fail too: end this session (Ctrl-D) and start a new one, "
            "or give the server a larger context (llama-server -c N; Ollama: num_ctx)."
        )
    if isinstance(error, openai.APIStatusError):
        return f"the server at {where} answered {error.status_code}: {error.message}"
    return f"the model call failed: {error}"


def _context_is_full(error: openai.BadRequestError) -> bool:
    # OpenAI says code "context_length_exceeded"; llama.cpp's server, type
    # "exceed_context_size_error"; others only say so in words.
    return (
        error.code == "context_length_exceeded"
        or error.type == "exceed_context_size_error"
        or "context" in error.message.lower()
    )


def _env_key() -> str | None:
    return os.environ.get("OPENAI_API_KEY")


def _noop() -> None:
    return None
