"""The message model: what a user, the model and the tools say to each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

StopReason: TypeAlias = Literal["stop", "toolUse", "length", "aborted", "error"]
STOP_REASONS: frozenset[str] = frozenset({"stop", "toolUse", "length", "aborted", "error"})


@dataclass(frozen=True)
class TextContent:
    text: str
    type: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: Any
    type: Literal["toolCall"] = field(default="toolCall", init=False)


@dataclass(frozen=True)
class UserMessage:
    content: list[TextContent]
    role: Literal["user"] = field(default="user", init=False)


@dataclass(frozen=True)
class AssistantMessage:
    content: list[TextContent | ToolCall]
    stop_reason: StopReason
    error_message: str | None = None
    role: Literal["assistant"] = field(default="assistant", init=False)

    def __post_init__(self) -> None:
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(
                f"stop_reason must be one of {sorted(STOP_REASONS)}, got {self.stop_reason!r}"
            )

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [part for part in self.content if isinstance(part, ToolCall)]

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.content if isinstance(part, TextContent))


@dataclass(frozen=True)
class ToolResultMessage:
    tool_call_id: str
    tool_name: str
    content: list[TextContent]
    details: Any = None
    is_error: bool = False
    role: Literal["toolResult"] = field(default="toolResult", init=False)

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.content)


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def text(value: object) -> TextContent:
    """Wrap any value as text content (non-strings are converted with ``str``)."""
    return TextContent(value if isinstance(value, str) else str(value))


def user_message(value: str) -> UserMessage:
    return UserMessage([text(value)])


def assistant_message(
    content: list[TextContent | ToolCall], stop_reason: StopReason
) -> AssistantMessage:
    return AssistantMessage(list(content), stop_reason)
