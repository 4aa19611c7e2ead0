"""What the agent loop needs from a model: one method, ``complete``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from picourse.abort import AbortSignal
from picourse.messages import AssistantMessage, Message


@dataclass(frozen=True)
class ModelRequest:
    system_prompt: str | None
    messages: list[Message]
    tools: list[dict[str, Any]]


class Model(Protocol):
    async def complete(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AssistantMessage: ...
