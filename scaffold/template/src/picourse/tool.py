"""Chapter 06, the tool contract: schemas, tools, the registry and one safe way to call a tool.

``execute_tool_call`` is the only door between a model's tool call and a tool: whatever
the model sends and whatever the tool does, the caller gets back one ``ToolResultMessage``.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from picourse.abort import AbortSignal
from picourse.messages import TextContent, ToolCall, ToolResultMessage, text

ProgressReporter = Callable[[Any], object]

# --------------------------------------------------------------------------- schemas


class ValidationError(ValueError):
    """Arguments that do not fit a schema; ``path`` says where (``edits[0].old_text``)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


class Schema:
    """A validator that also describes itself as JSON Schema."""

    description: str | None = None
    optional: bool = False

    def validate(self, value: Any, path: str = "") -> Any:
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def _describe(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.description:
            schema["description"] = self.description
        return schema


@dataclass
class String(Schema):
    description: str | None = None
    optional: bool = False

    def validate(self, value: Any, path: str = "") -> Any:
        if not isinstance(value, str):
            raise ValidationError(path, f"expected a string, got {_kind(value)}")
        return value

    def json_schema(self) -> dict[str, Any]:
        return self._describe({"type": "string"})


@dataclass
class Integer(Schema):
    description: str | None = None
    optional: bool = False
    minimum: int | None = None

    def validate(self, value: Any, path: str = "") -> Any:
        # bool is an int subclass in Python, but `true` is not a line number.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(path, f"expected an integer, got {_kind(value)}")
        if self.minimum is not None and value < self.minimum:
            raise ValidationError(path, f"must be >= {self.minimum}, got {value}")
        return value

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer"}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        return self._describe(schema)


@dataclass
class Boolean(Schema):
    description: str | None = None
    optional: bool = False

    def validate(self, value: Any, path: str = "") -> Any:
        if not isinstance(value, bool):
            raise ValidationError(path, f"expected true or false, got {_kind(value)}")
        return value

    def json_schema(self) -> dict[str, Any]:
        return self._describe({"type": "boolean"})


@dataclass
class Array(Schema):
    items: Schema
    description: str | None = None
    optional: bool = False

    def validate(self, value: Any, path: str = "") -> Any:
        if not isinstance(value, list):
            raise ValidationError(path, f"expected an array, got {_kind(value)}")
        return [self.items.validate(item, f"{path}[{i}]") for i, item in enumerate(value)]

    def json_schema(self) -> dict[str, Any]:
        return self._describe({"type": "array", "items": self.items.json_schema()})


@dataclass
class Object(Schema):
    """An object with known properties; unknown keys are rejected, not silently dropped."""

    properties: Mapping[str, Schema]
    description: str | None = None
    optional: bool = False

    def validate(self, value: Any, path: str = "") -> Any:
        if not isinstance(value, Mapping):
            raise ValidationError(path, f"expected an object, got {_kind(value)}")
        unknown = sorted(str(key) for key in value if key not in self.properties)
        if unknown:
            allowed = ", ".join(self.properties) or "none"
            raise ValidationError(path, f"unknown key(s) {', '.join(unknown)}; allowed: {allowed}")
        result: dict[str, Any] = {}
        for name, schema in self.properties.items():
            where = f"{path}.{name}" if path else name
            if name not in value or value[name] is None:
                if not schema.optional:
                    raise ValidationError(where, "is required")
                continue
            result[name] = schema.validate(value[name], where)
        return result

    def json_schema(self) -> dict[str, Any]:
        return self._describe(
            {
                "type": "object",
                "properties": {name: s.json_schema() for name, s in self.properties.items()},
                "required": [name for name, s in self.properties.items() if not s.optional],
                "additionalProperties": False,
            }
        )


def string(description: str | None = None) -> String:
    return String(description)


def optional_string(description: str | None = None) -> String:
    return String(description, optional=True)


def optional_positive_int(description: str | None = None) -> Integer:
    return Integer(description, optional=True, minimum=1)


def object_schema(properties: Mapping[str, Schema], description: str | None = None) -> Object:
    return Object(dict(properties), description)


def _kind(value: Any) -> str:
    return {
        type(None): "null",
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------- tools


@dataclass(frozen=True)
class ToolContext:
    call_id: str
    signal: AbortSignal | None = None
    report_progress: ProgressReporter | None = None

    def progress(self, update: Any) -> None:
        """Report progress if anybody listens; a tool need not check."""
        if self.report_progress is not None:
            self.report_progress(update)


@dataclass
class ToolOutput:
    content: list[TextContent]
    details: Any = None
    is_error: bool = False

    @classmethod
    def of_text(cls, message: str, details: Any = None) -> ToolOutput:
        return cls([text(message)], details)

    @classmethod
    def error(cls, message: str, details: Any = None) -> ToolOutput:
        return cls([text(message)], details, is_error=True)


Execute = Callable[[Any, ToolContext], Awaitable[ToolOutput]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: Schema
    execute: Execute
    # A tool that only looks (never writes, never runs anything) can be run without asking.
    read_only: bool = False

    def definition(self) -> dict[str, Any]:
        definition = {
            "name": self.name,
            "description": self.description,
            "parameters": self.schema.json_schema(),
        }
        if self.read_only:
            # The hint's name follows the Model Context Protocol's tool annotations.
            definition["annotations"] = {"readOnlyHint": True}
        return definition


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(
                f"a tool named {tool.name!r} is already registered; tool names must be unique"
            )
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> builtins.list[str]:
        return builtins.list(self._tools)

    def definitions(self) -> builtins.list[dict[str, Any]]:
        """Name, description and JSON-schema parameters: an OpenAI-style function per tool.
        A read-only tool also carries ``"annotations": {"readOnlyHint": True}``."""
        return [tool.definition() for tool in self._tools.values()]

    def list(self) -> builtins.list[Tool]:
        return builtins.list(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())


_TOO_DEEP = "Invalid arguments for tool {!r}: nested too deeply to read; send flat JSON."


async def execute_tool_call(
    call: ToolCall,
    registry: ToolRegistry,
    *,
    signal: AbortSignal | None = None,
    report_progress: ProgressReporter | None = None,
) -> ToolResultMessage:
    """Look up, validate, execute and normalise one call; never raises (but for cancellation)."""

    def error(message: str) -> ToolResultMessage:
        return ToolResultMessage(call.id, call.name, [text(message)], None, is_error=True)

    tool = registry.get(call.name)
    if tool is None:
        available = ", ".join(registry.names()) or "none"
        return error(f"Unknown tool {call.name!r}. Available tools: {available}.")
    arguments = call.arguments
    if isinstance(arguments, str):
        # Some providers deliver arguments as a JSON string.
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:  # JSONDecodeError, or an integer of over 4300 digits
            return error(f"Invalid arguments for tool {call.name!r}: not valid JSON ({exc}).")
        except RecursionError:
            return error(_TOO_DEEP.format(call.name))
    try:
        params = tool.schema.validate(arguments)
    except ValidationError as exc:
        return error(
            f"Invalid arguments for tool {call.name!r}: {exc}. Fix the arguments and call again."
        )
    try:
        output = await tool.execute(params, ToolContext(call.id, signal, report_progress))
    except Exception as exc:  # noqa: BLE001 - the contract: nothing escapes a tool call
        return error(f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}")
    if not isinstance(output, ToolOutput) or not all(
        isinstance(part, TextContent) for part in output.content
    ):
        kind = type(output).__name__
        return error(f"Tool {call.name!r} returned {kind}, not a ToolOutput of text.")
    return ToolResultMessage(
        call.id, call.name, list(output.content), output.details, output.is_error
    )
