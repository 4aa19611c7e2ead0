"""A model that replays a script: deterministic tests of the agent loop, no network."""

from __future__ import annotations

import copy

from picourse.abort import AbortSignal
from picourse.messages import AssistantMessage
from picourse.model import ModelRequest


class ScriptExhaustedError(RuntimeError):
    """The loop asked for more turns than the script holds."""


class ScriptedModel:
    def __init__(self, turns: list[AssistantMessage]) -> None:
        self._turns = list(turns)
        self.requests: list[ModelRequest] = []

    async def complete(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AssistantMessage:
        # A deep copy: later changes to the context must not rewrite what the model saw.
        self.requests.append(copy.deepcopy(request))
        index = len(self.requests) - 1
        if index >= len(self._turns):
            raise ScriptExhaustedError(
                f"ScriptedModel was asked for turn {index + 1}, but its script holds "
                f"{len(self._turns)} turn(s); add a turn or end the script with stop_reason 'stop'."
            )
        return self._turns[index]
