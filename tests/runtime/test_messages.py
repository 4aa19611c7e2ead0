import pytest

from picourse.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    assistant_message,
    text,
    user_message,
)


def test_each_message_kind_has_its_role() -> None:
    assert user_message("hi").role == "user"
    assert assistant_message([text("ok")], "stop").role == "assistant"
    assert ToolResultMessage("c1", "read", [text("x")], None, False).role == "toolResult"


def test_user_message_wraps_text() -> None:
    assert user_message("hello") == UserMessage([TextContent("hello")])


def test_text_converts_non_strings() -> None:
    assert text(42) == TextContent("42")
    assert text("a").type == "text"


def test_assistant_message_separates_text_and_tool_calls() -> None:
    call = ToolCall("c1", "read", {"path": "a"})
    message = assistant_message([text("let me look "), call, text("now")], "toolUse")
    assert message.tool_calls == [call]
    assert message.text == "let me look now"


def test_unknown_stop_reason_is_rejected_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="stop_reason must be one of"):
        AssistantMessage([], "finished")  # type: ignore[arg-type]


def test_role_cannot_be_passed_in() -> None:
    with pytest.raises(TypeError):
        UserMessage([text("x")], role="assistant")  # type: ignore[call-arg]
