import asyncio
import dataclasses
from typing import Any

import pytest

from picourse.abort import AbortController
from picourse.messages import ToolCall, text
from picourse.tool import (
    Array,
    Boolean,
    Integer,
    Object,
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    ValidationError,
    execute_tool_call,
    object_schema,
    optional_positive_int,
    optional_string,
    string,
)

from .helpers import echo_tool, make_tool

READ_LIKE = object_schema(
    {"path": string("file"), "offset": optional_positive_int("line"), "note": optional_string()}
)


# ---------------------------------------------------------------- validators


def test_object_keeps_given_keys_and_omits_missing_optional_ones() -> None:
    assert READ_LIKE.validate({"path": "a.txt", "offset": 3}) == {"path": "a.txt", "offset": 3}
    assert READ_LIKE.validate({"path": "a.txt", "offset": None}) == {"path": "a.txt"}


@pytest.mark.parametrize(
    ("arguments", "where", "problem"),
    [
        ({}, "path", "is required"),
        ({"path": 7}, "path", "expected a string, got integer"),
        ({"path": "a", "offset": 0}, "offset", "must be >= 1"),
        ({"path": "a", "offset": True}, "offset", "expected an integer, got boolean"),
        ({"path": "a", "offset": "3"}, "offset", "expected an integer, got string"),
        ({"path": "a", "mode": "x"}, "", "unknown key(s) mode"),
        ("a.txt", "", "expected an object, got string"),
    ],
)
def test_object_rejects_bad_arguments_saying_where(
    arguments: Any, where: str, problem: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        READ_LIKE.validate(arguments)
    assert caught.value.path == where
    assert problem in caught.value.problem


def test_nested_errors_name_the_full_path() -> None:
    schema = Object(
        {"edits": Array(Object({"old_text": string(), "flag": Boolean(optional=True)}))}
    )
    with pytest.raises(ValidationError, match=r"edits\[1\]\.old_text: expected a string"):
        schema.validate({"edits": [{"old_text": "a"}, {"old_text": 1}]})
    with pytest.raises(ValidationError, match=r"edits\[0\]\.flag: expected true or false"):
        schema.validate({"edits": [{"old_text": "a", "flag": "yes"}]})


def test_json_schema_describes_required_optional_and_closed_objects() -> None:
    assert READ_LIKE.json_schema() == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file"},
            "offset": {"type": "integer", "minimum": 1, "description": "line"},
            "note": {"type": "string"},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    assert Array(Integer()).json_schema() == {"type": "array", "items": {"type": "integer"}}


# ---------------------------------------------------------------- registry


def test_registry_keeps_order_and_refuses_duplicates() -> None:
    registry = ToolRegistry([echo_tool("b"), echo_tool("a")])
    assert [tool.name for tool in registry.list()] == ["b", "a"]
    assert registry.get("a") is not None
    assert registry.get("zzz") is None
    with pytest.raises(ValueError, match="already registered"):
        registry.register(echo_tool("a"))


def test_definitions_are_openai_style_functions() -> None:
    (definition,) = ToolRegistry([echo_tool("echo")]).definitions()
    assert set(definition) == {"name", "description", "parameters"}
    assert definition["name"] == "echo"
    assert definition["parameters"]["type"] == "object"
    assert definition["parameters"]["required"] == ["value"]


def test_a_read_only_tool_says_so_in_its_definition() -> None:
    plain = echo_tool("plain")
    looking = dataclasses.replace(echo_tool("look"), read_only=True)
    plain_definition, looking_definition = ToolRegistry([plain, looking]).definitions()
    assert "annotations" not in plain_definition
    assert looking_definition["annotations"] == {"readOnlyHint": True}


# ---------------------------------------------------------------- execute_tool_call


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_success_keeps_id_name_content_and_details() -> None:
    result = run(
        execute_tool_call(ToolCall("c7", "echo", {"value": "hi"}), ToolRegistry([echo_tool()]))
    )
    assert (result.tool_call_id, result.tool_name, result.is_error) == ("c7", "echo", False)
    assert result.content == [text("hi")]
    assert result.details == {"call_id": "c7"}


def test_json_string_arguments_are_parsed() -> None:
    result = run(
        execute_tool_call(ToolCall("c1", "echo", '{"value": "x"}'), ToolRegistry([echo_tool()]))
    )
    assert not result.is_error
    assert result.text == "x"


def test_unknown_tool_is_an_error_listing_the_available_tools() -> None:
    result = run(execute_tool_call(ToolCall("c1", "delete", {}), ToolRegistry([echo_tool()])))
    assert result.is_error
    assert (result.tool_call_id, result.tool_name) == ("c1", "delete")
    assert "Unknown tool 'delete'" in result.text and "echo" in result.text


@pytest.mark.parametrize(
    "arguments",
    [
        {"value": 3},
        {},
        {"value": "a", "x": 1},
        "{not json",
        [1],
        '{"value": 1' + "0" * 5000 + "}",  # json refuses ints over 4300 digits: ValueError
        '{"value": ' + "[" * 100_000,  # too deep for the parser: RecursionError
    ],
    ids=["int", "empty", "extra", "not-json", "list", "huge-int", "deep-json"],
)
def test_invalid_arguments_never_reach_execute(arguments: Any) -> None:
    ran: list[Any] = []

    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        ran.append(params)
        return ToolOutput.of_text("ran")

    registry = ToolRegistry([make_tool("t", execute)])
    result = run(execute_tool_call(ToolCall("c1", "t", arguments), registry))
    assert result.is_error
    assert "Invalid arguments for tool 't'" in result.text
    assert ran == [], "execute must not run when the arguments are invalid"


def test_an_exception_inside_execute_becomes_an_error_result() -> None:
    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        raise OSError("disk on fire")

    result = run(
        execute_tool_call(
            ToolCall("c1", "t", {"value": "x"}), ToolRegistry([make_tool("t", execute)])
        )
    )
    assert result.is_error
    assert "OSError: disk on fire" in result.text


def test_a_tool_returning_the_wrong_type_is_an_error() -> None:
    async def execute(params: Any, ctx: ToolContext) -> Any:
        return "plain string"

    tool = Tool("t", "d", Object({}), execute)
    result = run(execute_tool_call(ToolCall("c1", "t", {}), ToolRegistry([tool])))
    assert result.is_error
    assert "returned str" in result.text


def test_error_outputs_stay_errors_and_context_reaches_the_tool() -> None:
    seen: dict[str, Any] = {}
    progress: list[Any] = []
    controller = AbortController()

    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        seen.update(call_id=ctx.call_id, signal=ctx.signal)
        ctx.progress("half way")
        return ToolOutput.error("refused", details={"why": "test"})

    registry = ToolRegistry([make_tool("t", execute)])
    result = run(
        execute_tool_call(
            ToolCall("c9", "t", {"value": "x"}),
            registry,
            signal=controller.signal,
            report_progress=progress.append,
        )
    )
    assert result.is_error and result.text == "refused" and result.details == {"why": "test"}
    assert seen == {"call_id": "c9", "signal": controller.signal}
    assert progress == ["half way"]


def test_progress_without_a_listener_is_a_no_op() -> None:
    ToolContext("c1").progress("ignored")
