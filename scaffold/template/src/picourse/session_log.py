"""A session saved as JSONL, one record per line, and read back for ``--replay``.

Records: the session, each user message, each assistant message with its tool calls and
token usage, each tool result. A replay takes the user messages and the assistant turns.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from picourse.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


class SessionError(Exception):
    """The session cannot start; the message says what to do."""


class SessionLog:
    """Appends one JSON record per line and flushes it, so a crash loses nothing."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # A file name that is not UTF-8 reaches Python as lone surrogates ("\udce9"): written
        # as that escape, the line stays UTF-8 and JSON reads the same name back.
        self._file = path.open("a", encoding="utf-8", errors="backslashreplace")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def message(self, message: Message, usage: Any = None) -> None:
        record = message_record(message)
        if usage is not None:
            record["usage"] = dataclasses.asdict(usage)
        self.write(record)

    def close(self) -> None:
        self._file.close()


def message_record(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"type": "user", "text": "".join(part.text for part in message.content)}
    if isinstance(message, ToolResultMessage):
        details = message.details
        if dataclasses.is_dataclass(details) and not isinstance(details, type):
            details = dataclasses.asdict(details)
        return {
            "type": "toolResult",
            "tool_call_id": message.tool_call_id,
            "tool_name": message.tool_name,
            "text": message.text,
            "is_error": message.is_error,
            "details": details,
        }
    content: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextContent):
            content.append({"type": "text", "text": part.text})
        else:
            content.append(
                {"type": "toolCall", "id": part.id, "name": part.name, "arguments": part.arguments}
            )
    return {
        "type": "assistant",
        "content": content,
        "stop_reason": message.stop_reason,
        "error_message": message.error_message,
    }


def load_replay(path: Path) -> tuple[list[str], list[AssistantMessage]]:
    """The user messages and the assistant turns of a saved session, in order."""
    users: list[str] = []
    turns: list[AssistantMessage] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SessionError(
            f"cannot read the saved session {path} ({error}); name a .jsonl "
            "file from .practice/sessions"
        ) from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if record.get("type") == "user":
                users.append(str(record["text"]))
            elif record.get("type") == "assistant":
                turns.append(_assistant_turn(record))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise SessionError(
                f"{path}:{number} is not a session record ({type(error).__name__}: {error}); "
                "replay a file that python -m picourse saved"
            ) from None
    if not users:
        raise SessionError(f"{path} holds no user message to replay")
    return users, turns


def _assistant_turn(record: dict[str, Any]) -> AssistantMessage:
    content: list[TextContent | ToolCall] = [
        TextContent(part["text"])
        if part["type"] == "text"
        else ToolCall(part["id"], part["name"], part["arguments"])
        for part in record["content"]
    ]
    return AssistantMessage(content, record["stop_reason"], record.get("error_message"))
