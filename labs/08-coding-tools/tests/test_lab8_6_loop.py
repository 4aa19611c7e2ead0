"""Lab 8.6 — the tools driven through the real agent loop by a scripted model.

The tests observe both sides: the environment (the file really changed, bash saw the new
content) and the protocol (one result per call, in order, with its id and name).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import stat
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

import picourse.agent_loop as agent_loop
import picourse.coding_tools.agent as coding_agent
from lab_helpers import call_now, run, spy_on_listeners, text_of
from picourse.abort import AbortController, AbortSignal
from picourse.agent_loop import AgentEvent, AgentRun
from picourse.coding_tools import build_system_prompt, create_coding_tools, run_coding_agent
from picourse.messages import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    assistant_message,
    text,
    user_message,
)
from picourse.model import ModelRequest
from picourse.scripted_model import ScriptedModel
from picourse.tool import Tool, ToolOutput, ToolRegistry, object_schema, string

pytestmark = pytest.mark.lab8_6

TASK = "Rename the greeting in greet.py from hello to hi, then run it."


def script() -> list[AssistantMessage]:
    return [
        assistant_message(
            [text("Let me look."), ToolCall("r1", "read", {"path": "greet.py"})], "toolUse"
        ),
        assistant_message(
            [
                ToolCall(
                    "e1", "edit", {"path": "greet.py", "old_text": "'hello'", "new_text": "'hi'"}
                )
            ],
            "toolUse",
        ),
        assistant_message([ToolCall("b1", "bash", {"command": "cat greet.py"})], "toolUse"),
        assistant_message([text("Done: greet.py now says hi.")], "stop"),
    ]


def write_then_stop(path: str, content: str) -> list[AssistantMessage]:
    """A script of one write, then a stop."""
    return [
        assistant_message([ToolCall("w1", "write", {"path": path, "content": content})], "toolUse"),
        assistant_message([text("Written.")], "stop"),
    ]


@pytest.fixture
def project(workspace: Path) -> Path:
    (workspace / "greet.py").write_text("print('hello')\n")
    return workspace


def test_read_edit_bash_and_stop_change_the_workspace(project: Path) -> None:
    model = ScriptedModel(script())
    result = run(run_coding_agent(model, str(project), TASK))
    assert result.reason == "stop", f"the run must end when the model stops, not {result.reason!r}"
    assert (project / "greet.py").read_text() == "print('hi')\n", "the edit must reach the disk"
    bash_result = result.messages[6]
    assert isinstance(bash_result, ToolResultMessage) and "print('hi')" in bash_result.text, (
        "bash must see the edited file: the edit is committed before the next turn"
    )


def test_every_call_has_one_result_in_order_with_its_id_and_name(project: Path) -> None:
    result = run(run_coding_agent(ScriptedModel(script()), str(project), TASK))
    roles = [message.role for message in result.messages]
    assert roles == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant",
    ], "the transcript must be: the task, then each call followed by exactly one result"
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.tool_name) for r in results] == [
        ("r1", "read"),
        ("e1", "edit"),
        ("b1", "bash"),
    ]
    assert not any(r.is_error for r in results), [r.text for r in results if r.is_error]
    assert result.messages[0] == user_message(TASK), "the task is the first, user message"


def test_the_model_is_asked_once_per_turn_and_sees_the_tools_and_results(
    project: Path,
) -> None:
    model = ScriptedModel(script())
    task = f"  {TASK}\n"  # as a person typed it: the model gets it exactly so
    run(run_coding_agent(model, str(project), task))
    assert len(model.requests) == 4, "four scripted turns mean exactly four model requests"
    first = model.requests[0]
    assert [tool["name"] for tool in first.tools] == ["read", "write", "edit", "bash"]
    assert first.system_prompt and str(project) in first.system_prompt, (
        "the system prompt must name the workspace"
    )
    for tool in first.tools:
        assert tool["description"] in first.system_prompt, (
            f"the system prompt must list each tool with its description; {tool['name']!r}'s "
            "is missing"
        )
    offered = {tool["name"] for tool in first.tools}
    for other in create_coding_tools(project, navigation=True).list():
        assert other.name in offered or other.description not in first.system_prompt, (
            f"the system prompt describes {other.name!r}, which the model is not offered: build "
            "it from the very registry the loop gets (build_system_prompt(cwd, tools)), so "
            "that it describes exactly the tools the model has"
        )
    assert first.messages == [user_message(task)], (
        "the context holds the task, exactly as given (not stripped), as its only message; "
        "the prompt goes in system_prompt"
    )
    second = model.requests[1].messages
    assert isinstance(second[-1], ToolResultMessage) and "print('hello')" in second[-1].text, (
        "the second request must carry the read result (the model sees what it asked for)"
    )


def test_the_agent_gets_the_tools_with_their_default_limits(project: Path) -> None:
    # Each description states its tool's limits (read's lines and bytes, bash's timeout and
    # output cap): the tools the model is offered must be create_coding_tools(cwd) as it is.
    model = ScriptedModel([assistant_message([text("Nothing to do.")], "stop")])
    run(run_coding_agent(model, str(project), TASK))
    offered = [(tool["name"], tool["description"]) for tool in model.requests[0].tools]
    defaults = [(tool.name, tool.description) for tool in create_coding_tools(project)]
    assert offered == defaults, (
        "run_coding_agent gives the model create_coding_tools(cwd, containment) and nothing "
        "more: no longer bash timeout, no other read or output limits, no extra tools. "
        f"Offered: {offered}; the defaults: {defaults}"
    )
    definitions = create_coding_tools(project).definitions()
    assert model.requests[0].tools == definitions, (
        "the model is offered the tools' definitions as create_coding_tools makes them, "
        "schemas and annotations included (read says it is read-only: readOnlyHint): hand "
        "the loop that registry itself, never tools rebuilt from its parts. Offered: "
        f"{model.requests[0].tools}"
    )


def test_events_and_max_steps_are_passed_through(project: Path) -> None:
    events: list[AgentEvent] = []
    result = run(
        run_coding_agent(
            ScriptedModel(script()), str(project), TASK, max_steps=2, on_event=events.append
        )
    )
    assert result.reason == "max_steps", "max_steps must reach the loop"
    assert (project / "greet.py").read_text() == "print('hi')\n"
    assert [e.type for e in events if e.type in ("tool_start", "tool_end")] == [
        "tool_start",
        "tool_end",
        "tool_start",
        "tool_end",
    ], "on_event must reach the loop"


def test_max_steps_zero_reaches_the_loop_which_refuses_it(project: Path) -> None:
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        run(run_coding_agent(ScriptedModel(script()), str(project), TASK, max_steps=0))


def test_an_exception_of_on_event_reaches_the_caller(project: Path) -> None:
    def listener(event: AgentEvent) -> None:
        raise RuntimeError("the listener failed")

    try:
        run(run_coding_agent(ScriptedModel(script()), str(project), TASK, on_event=listener))
    except NotImplementedError:
        raise  # an unfinished stage shows as itself
    except RuntimeError as error:
        assert str(error) == "the listener failed", f"another error reached the caller: {error!r}"
    else:
        raise AssertionError(
            "an exception of on_event must reach the caller as the loop raises it: pass the "
            "listener through unchanged, not wrapped in a try"
        )


def test_an_empty_task_is_sent_as_it_is(project: Path) -> None:
    model = ScriptedModel([assistant_message([text("Nothing to do.")], "stop")])
    run(run_coding_agent(model, str(project), ""))
    assert model.requests[0].messages == [user_message("")], (
        "the task, whatever it is (also empty), is the context's only message, unchanged"
    )


def test_a_run_is_bounded_to_50_steps_by_default(project: Path) -> None:
    endless = [
        assistant_message([ToolCall(f"r{n}", "read", {"path": "greet.py"})], "toolUse")
        for n in range(60)
    ]
    model = ScriptedModel(endless)
    result = run(run_coding_agent(model, str(project), TASK))
    assert result.reason == "max_steps" and len(model.requests) == 50, (
        "run_coding_agent's default max_steps=50 reaches the loop"
    )


def test_max_steps_none_reaches_the_loop_as_no_limit(project: Path) -> None:
    turns = [
        assistant_message([ToolCall(f"r{n}", "read", {"path": "greet.py"})], "toolUse")
        for n in range(60)
    ]
    model = ScriptedModel([*turns, assistant_message([text("Read it 60 times.")], "stop")])
    result = run(run_coding_agent(model, str(project), TASK, max_steps=None))
    assert result.reason == "stop" and len(model.requests) == 61, (
        "max_steps=None means no limit, and it must reach the loop unchanged: pass max_steps "
        "through as given, never replace None with the default 50 (the run ended with "
        f"{result.reason!r} after {len(model.requests)} model requests)"
    )


def test_max_steps_above_the_default_reaches_the_loop_unchanged(project: Path) -> None:
    endless = [
        assistant_message([ToolCall(f"r{n}", "read", {"path": "greet.py"})], "toolUse")
        for n in range(60)
    ]
    model = ScriptedModel(endless)
    result = run(run_coding_agent(model, str(project), TASK, max_steps=55))
    assert result.reason == "max_steps" and len(model.requests) == 55, (
        "max_steps=55 must allow 55 model requests: pass max_steps to the loop exactly as "
        "given, never capped or replaced (the run ended with "
        f"{result.reason!r} after {len(model.requests)} model requests)"
    )


def test_an_edit_needs_no_read_first(project: Path) -> None:
    turns = [
        assistant_message(
            [ToolCall("e1", "edit", {"path": "greet.py", "old_text": "hello", "new_text": "hi"})],
            "toolUse",
        ),
        assistant_message([text("Done.")], "stop"),
    ]
    result = run(run_coding_agent(ScriptedModel(turns), str(project), TASK))
    edited = result.messages[2]
    assert isinstance(edited, ToolResultMessage) and not edited.is_error, (
        "run_coding_agent's tools are create_coding_tools(cwd, containment), nothing more: "
        "an edit of a file the model has not read applies (careful edits are Lab 8.9's, "
        "and off unless asked for). Got: "
        + (edited.text if isinstance(edited, ToolResultMessage) else repr(edited))
    )
    assert (project / "greet.py").read_text() == "print('hi')\n"


def test_a_write_of_what_the_file_holds_answers_as_the_plain_tools_do(project: Path) -> None:
    # The same call, made by the model in a run and then straight on create_coding_tools:
    # the plain tools write it (no confirmation gate in 8.6), so both answers are the same.
    write = ToolCall("w1", "write", {"path": "greet.py", "content": "print('hello')\n"})
    turns = [assistant_message([write], "toolUse"), assistant_message([text("Done.")], "stop")]
    result = run(run_coding_agent(ScriptedModel(turns), str(project), TASK))
    in_the_run = result.messages[2]
    assert isinstance(in_the_run, ToolResultMessage), result.messages
    plain = call_now(create_coding_tools(project), "write", **write.arguments)
    assert (in_the_run.text, in_the_run.is_error) == (text_of(plain), plain.is_error), (
        "run_coding_agent's tools are create_coding_tools(cwd, containment) as it is: no "
        "confirm, no careful edits, no other option. The same write answered "
        f"{in_the_run.text!r} in the run and {text_of(plain)!r} from the plain tools"
    )


def test_a_workspace_that_does_not_exist_yet_still_runs(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet"
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    turns = [
        assistant_message(
            [
                ToolCall("b1", "bash", {"command": "pwd"}),
                ToolCall("r1", "read", {"path": str(secret)}),
            ],
            "toolUse",
        ),
        assistant_message([text("Done.")], "stop"),
    ]
    try:
        result = run(run_coding_agent(ScriptedModel(turns), str(missing), "Where am I?"))
    except OSError as error:
        raise AssertionError(
            "a workspace that does not exist yet is no reason to raise: run the loop, and "
            f"the tools answer with error results of their own (bash names it). Got {error!r}"
        ) from None
    answered = result.messages[2]
    assert isinstance(answered, ToolResultMessage) and answered.is_error, (
        "bash in a workspace that does not exist is an error result"
    )
    final = result.messages[-1]
    assert "not-yet" in answered.text and isinstance(final, AssistantMessage), answered.text
    assert final.text == "Done.", "the run goes on to the model's last turn"
    refusal = result.messages[3]
    assert isinstance(refusal, ToolResultMessage) and refusal.is_error, (
        "a workspace that does not exist yet keeps its containment: the tools are "
        "create_coding_tools(cwd, containment) as given, so a read outside it is refused"
    )
    assert "TOP SECRET" not in refusal.text


def test_workspace_containment_is_the_default(project: Path, outside: Path) -> None:
    turns = [
        assistant_message([ToolCall("r1", "read", {"path": "../outside/secret.txt"})], "toolUse"),
        assistant_message([text("I may not.")], "stop"),
    ]
    result = run(run_coding_agent(ScriptedModel(turns), str(project), "Read the secret."))
    refusal = result.messages[2]
    assert isinstance(refusal, ToolResultMessage) and refusal.is_error, (
        "run_coding_agent must default to containment='workspace'"
    )
    assert "TOP SECRET" not in refusal.text


def test_the_system_prompt_describes_the_registry_it_is_given(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def search(params: Any, ctx: Any) -> ToolOutput:
        return ToolOutput.of_text("")

    extra = Tool(
        "grep",
        # Two lines, indented, ending in a newline: the full description as it is, not its
        # first line or sentence, nor stripped.
        "  Search the files of the workspace for a regular expression (100% literal with -F).\n"
        "\tOptions: -F, -i.\n"
        '  Matches are listed as path:line: text, at most 100 of them, e.g. {"n": 1} or %(n)s.\n',
        object_schema({"pattern": string("What to look for.")}),
        search,
    )
    registry = ToolRegistry([*create_coding_tools(workspace).list(), extra])
    monkeypatch.chdir(workspace.parent)
    prompt = build_system_prompt(workspace.name, registry)
    assert str(workspace) in prompt, (
        "the system prompt names the workspace by its absolute path, also when cwd is relative"
    )
    for tool in registry.list():
        assert tool.name in prompt and tool.description in prompt, (
            f"the system prompt lists every tool of the registry it is given, with its full "
            f"description as it is (not stripped): {tool.name!r} or part of its description "
            "is missing"
        )


def test_the_system_prompt_names_no_tool_the_model_is_not_offered(workspace: Path) -> None:
    registry = create_coding_tools(workspace)
    prompt = build_system_prompt(str(workspace), registry).replace(str(workspace), "")
    offered = {tool.name for tool in registry.list()}
    named = set(re.findall(r"\w+", prompt)) & ({"ls", "glob"} - offered)
    assert not named, (
        f"the prompt describes exactly the tools the model is offered ({sorted(offered)}), "
        f"but it also names {sorted(named)}: a model told of a tool it does not have calls "
        "it. Write every word about tools from the registry you are given"
    )


def test_the_system_prompt_names_a_workspace_that_is_not_utf8_as_it_is(tmp_path: Path) -> None:
    # A name of bytes that are not UTF-8, as Python spells it (surrogateescape); the
    # folder need not exist for its prompt.
    workspace = str(tmp_path / os.fsdecode(b"caf\xe9"))
    prompt = build_system_prompt(workspace, create_coding_tools(tmp_path))
    assert workspace in prompt, (
        "the prompt names the workspace as os.path.abspath gives it, character for "
        "character, also a name that is not UTF-8: never re-encode it (errors='replace' "
        "makes another name of it)"
    )


def test_each_prompt_names_the_workspace_it_is_given_now(tmp_path: Path) -> None:
    registry = create_coding_tools(tmp_path)
    for name in ("first", "second"):
        prompt = build_system_prompt(str(tmp_path / name), registry)
        assert str(tmp_path / name) in prompt, (
            "the prompt is built on every call from what it is given then: the same "
            f"registry with another workspace names that workspace ({name})"
        )


def names(prompt: str, path: str) -> bool:
    """Whether ``path`` is a word of ``prompt``: quotes or punctuation right next to it do
    not matter, more of a path (a trailing separator) does."""
    return path in [word.strip("'\"`.,:;()") or word for word in prompt.split()]


@pytest.mark.parametrize(
    "given", ["./{name}", "{name}/../{name}", "../{parent}/{name}", "{ws}/./sub/..", "{ws}//"]
)
def test_the_system_prompt_names_the_workspace_by_its_normalised_absolute_path(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.chdir(workspace.parent)
    cwd = given.format(name=workspace.name, parent=workspace.parent.name, ws=workspace)
    prompt = build_system_prompt(cwd, create_coding_tools(workspace))
    joined = os.path.join(os.getcwd(), cwd)
    assert names(prompt, str(workspace)) and joined not in prompt, (
        f"the system prompt names the workspace {cwd!r} by its absolute path, normalised "
        f"(os.path.abspath(cwd)): {str(workspace)!r} as a word of its own, not {joined!r}, "
        "a name with '.' or '..' in it that a command cannot always follow, and with no "
        f"trailing separator. The prompt begins: {prompt[:200]!r}"
    )


def test_the_system_prompt_names_a_folder_called_tilde_as_the_tools_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "~" / "proj").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    prompt = build_system_prompt("~/proj", create_coding_tools("~/proj"))
    assert str(tmp_path / "~" / "proj") in prompt, (
        "the tools take cwd '~/proj' as a folder named '~' (os.path.abspath expands nothing), "
        "so the system prompt names that folder too, os.path.abspath(cwd): expanding '~' "
        "would send the model to another directory than the one its tools work in"
    )


@pytest.mark.parametrize(
    "name",
    ["odd\\name with 'quotes'", "ends with a space ", "café", "cafe\u0301", "two\nlines"],
    ids=["quotes", "trailing-space", "not-ascii", "decomposed-accent", "newline"],
)
def test_the_system_prompt_names_an_odd_workspace_name_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    workspace = tmp_path / name
    workspace.mkdir()
    monkeypatch.chdir(tmp_path)  # given relative, as the sibling tests give it
    prompt = build_system_prompt(workspace.name, create_coding_tools(workspace.name))
    assert str(workspace) in prompt, (
        "the system prompt names the workspace as its absolute path, character for "
        "character: no repr(), json.dumps or quoting that escapes a backslash, a quote or a "
        "letter such as é, no Unicode normalisation ('cafe' + U+0301 is another folder than "
        "'café'), and no strip() (a folder named 'ws ' is not 'ws')"
    )


def test_the_system_prompt_names_the_root_folder_as_a_slash() -> None:
    # "/" is a workspace too (a container's whole file system). Its absolute path is "/";
    # stripping a trailing separator leaves nothing, and the prompt names no folder at all.
    prompt = build_system_prompt("/", create_coding_tools("/"))
    assert names(prompt, "/"), (
        "the system prompt names the workspace '/' as '/', a word of its own: never strip "
        "the separator off os.path.abspath(cwd), which has no trailing one to strip except "
        f"for the root. The prompt begins: {prompt[:200]!r}"
    )


def test_the_system_prompt_names_a_workspace_under_home_by_its_absolute_path(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(workspace.parent))
    prompt = build_system_prompt(str(workspace), create_coding_tools(workspace))
    assert str(workspace) in prompt, (
        "the system prompt names the workspace by its absolute path, also under the home "
        "folder: never shortened to '~/...', which the tools do not expand (a path the "
        "model copies from the prompt would name a folder called '~')"
    )


@pytest.mark.parametrize("given", ["absolute", "relative"])
def test_the_system_prompt_names_the_workspace_as_given_not_its_real_path(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    link = tmp_path / "via-link"  # a name that is no part of the real path
    link.symlink_to(workspace, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    cwd = str(link) if given == "absolute" else link.name
    model = ScriptedModel([assistant_message([text("Nothing to do.")], "stop")])
    run(run_coding_agent(model, cwd, "Say hello."))
    prompt = model.requests[0].system_prompt or ""
    assert str(link) in prompt and str(workspace) not in prompt, (
        f"the system prompt names the workspace {cwd!r} by its absolute path "
        f"(os.path.abspath(cwd)), here {str(link)!r}, not by its real path "
        "(os.path.realpath, Path.resolve): the tools check absolute paths against the "
        "workspace as given, so a path the model copies from the prompt would be refused "
        "as an escape"
    )


def test_an_absolute_path_under_the_workspace_as_given_is_inside(
    workspace: Path, tmp_path: Path
) -> None:
    link = tmp_path / "via-link"
    link.symlink_to(workspace, target_is_directory=True)
    note = f"{link}/note.txt"  # as a model writes it from the prompt's workspace
    turns = write_then_stop(note, "hi\n")
    result = run(run_coding_agent(ScriptedModel(turns), str(link), "Write a note."))
    written = result.messages[2]
    assert isinstance(written, ToolResultMessage) and not written.is_error, (
        "the tools are rooted at cwd as given (create_coding_tools(cwd, ...)), not at its real "
        "path: an absolute path under the workspace the prompt names is inside. Got: "
        + (written.text if isinstance(written, ToolResultMessage) else repr(written))
    )
    assert (workspace / "note.txt").read_text() == "hi\n"


def test_the_tools_of_a_run_in_the_root_folder_reach_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "note.txt"
    note.write_text("hello from anywhere\n")
    elsewhere = tmp_path / "elsewhere"  # the current folder, which is not the workspace
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    turns = [
        assistant_message([ToolCall("r1", "read", {"path": str(note)})], "toolUse"),
        assistant_message([text("Read.")], "stop"),
    ]
    result = run(run_coding_agent(ScriptedModel(turns), "/", "Read the note."))
    answered = result.messages[2]
    assert (
        isinstance(answered, ToolResultMessage)
        and not answered.is_error
        and "hello from anywhere" in answered.text
    ), (
        "a run in the workspace '/' roots its tools at '/', as given, so every absolute path "
        "is inside: never strip the separator (''.rstrip would leave '', the current folder). "
        "Got: " + (answered.text if isinstance(answered, ToolResultMessage) else repr(answered))
    )


class FolderRecordingModel(ScriptedModel):
    """A scripted model that notes the process's current folder at each request."""

    def __init__(self, turns: list[AssistantMessage]) -> None:
        super().__init__(turns)
        self.folders: list[str] = []

    async def complete(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AssistantMessage:
        self.folders.append(os.getcwd())
        return await super().complete(request, signal)


def test_a_run_leaves_the_current_folder_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path)
    here = os.getcwd()
    model = FolderRecordingModel(write_then_stop("a.txt", "a\n"))
    run(run_coding_agent(model, "ws", "Write a.txt."))
    assert model.folders == [here] * 2 and os.getcwd() == here, (
        "a run changes nothing of the process around it: never os.chdir into the workspace "
        "(the tools are rooted at cwd already, and other runs may share the process). The "
        f"current folder at each model request: {model.folders}"
    )
    assert (tmp_path / "ws" / "a.txt").read_text() == "a\n"


class SignalRecordingModel(ScriptedModel):
    """A scripted model that keeps the signal each request came with."""

    def __init__(self, turns: list[AssistantMessage]) -> None:
        super().__init__(turns)
        self.signals: list[AbortSignal | None] = []

    async def complete(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AssistantMessage:
        self.signals.append(signal)
        return await super().complete(request, signal)


# A given signal is not compared by identity here: the grader runs the tools in a process
# of their own, where the model's signal stands for the caller's (a relay is caught by the
# listener count of test_a_run_leaves_no_listener_on_the_callers_signal).
def test_a_run_without_a_signal_asks_the_model_with_none(project: Path) -> None:
    model = SignalRecordingModel([assistant_message([text("Nothing to do.")], "stop")])
    run(run_coding_agent(model, str(project), TASK))
    assert model.signals == [None], (
        "invariant: run_agent_loop gets the caller's signal unchanged, and the model is asked "
        f"with it: no signal is None, never a new AbortSignal() of your own. Got {model.signals}"
    )


def test_a_run_without_on_event_hands_the_loop_none(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = agent_loop.run_agent_loop
    listeners: list[object] = []

    async def spy(*args: Any, **kwargs: Any) -> AgentRun:
        listeners.append(inspect.signature(real).bind(*args, **kwargs).arguments.get("on_event"))
        return await real(*args, **kwargs)

    # Wherever run_coding_agent finds the loop: its own module's name for it, or the loop's.
    monkeypatch.setattr(agent_loop, "run_agent_loop", spy)
    for name, value in list(vars(coding_agent).items()):
        if value is real:
            monkeypatch.setattr(coding_agent, name, spy)
    run(
        run_coding_agent(
            ScriptedModel([assistant_message([text("Done.")], "stop")]), str(project), TASK
        )
    )
    assert listeners == [None], (
        "invariant: on_event reaches run_agent_loop unchanged: no listener is None, never a "
        f"listener of your own (one that keeps the events of every run grows forever). Got "
        f"{listeners}"
    )


def test_the_abort_signal_reaches_the_loop(project: Path) -> None:
    aborted = AbortController()
    aborted.abort()
    model = ScriptedModel(script())
    result = run(run_coding_agent(model, str(project), TASK, signal=aborted.signal))
    assert result.reason == "aborted" and model.requests == [], (
        "an aborted signal must reach run_agent_loop: pass signal through"
    )

    controller = AbortController()

    def abort_after_first_turn(event: AgentEvent) -> None:
        if event.type == "turn_end":
            controller.abort()

    model = ScriptedModel(script())
    result = run(
        run_coding_agent(
            model, str(project), TASK, signal=controller.signal, on_event=abort_after_first_turn
        )
    )
    assert result.reason == "aborted" and len(model.requests) == 1, (
        "an abort during the run ends it before the next turn (this test aborts from "
        "on_event at turn_end: pass both signal and on_event through to run_agent_loop)"
    )
    assert (project / "greet.py").read_text() == "print('hello')\n", "the edit never ran"


def test_containment_is_passed_through(project: Path, outside: Path) -> None:
    turns = [
        assistant_message([ToolCall("r1", "read", {"path": "../outside/secret.txt"})], "toolUse"),
        assistant_message([text("Read it.")], "stop"),
    ]
    result = run(
        run_coding_agent(
            ScriptedModel(turns), str(project), "Read the secret.", containment="unrestricted"
        )
    )
    shown = result.messages[2]
    assert isinstance(shown, ToolResultMessage) and "TOP SECRET" in shown.text, (
        "containment='unrestricted' must reach create_coding_tools"
    )


def test_a_run_with_an_aborted_signal_still_starts_and_ends_in_the_loop(project: Path) -> None:
    aborted = AbortController()
    aborted.abort()
    events: list[AgentEvent] = []
    model = ScriptedModel(script())
    result = run(
        run_coding_agent(model, str(project), TASK, signal=aborted.signal, on_event=events.append)
    )
    assert [e.type for e in events] == ["agent_start", "agent_end"], (
        "a run whose signal has already fired still goes through run_agent_loop, which "
        "reports agent_start and agent_end (a listener sees every run start and end): do "
        f"not check the signal yourself and return early. Events: {[e.type for e in events]}"
    )
    assert result.reason == "aborted" and model.requests == []


class Recorder(list[AgentEvent]):
    """A listener object that is empty, and so false, until its first event."""

    def __call__(self, event: AgentEvent) -> None:
        self.append(event)


def test_a_listener_that_is_false_still_hears_every_event(project: Path) -> None:
    recorder = Recorder()
    run(run_coding_agent(ScriptedModel(script()), str(project), TASK, on_event=recorder))
    types = [event.type for event in recorder]
    assert types[:1] == ["agent_start"] and types[-1:] == ["agent_end"], (
        "on_event is any callable, also an object that is false while empty (a list with "
        f"__call__): pass it on as it is; test 'is None', never its truth. Events: {types}"
    )


def test_each_run_gets_tools_of_its_own_containment(project: Path, outside: Path) -> None:
    turns = [
        assistant_message([ToolCall("r1", "read", {"path": "../outside/secret.txt"})], "toolUse"),
        assistant_message([text("Read it.")], "stop"),
    ]
    shown = [
        run(
            run_coding_agent(ScriptedModel(turns), str(project), "Read.", containment=mode)
        ).messages[2]
        for mode in ("unrestricted", "workspace")
    ]
    texts = [m.text if isinstance(m, ToolResultMessage) else repr(m) for m in shown]
    assert "TOP SECRET" in texts[0] and "escapes the workspace" in texts[1], (
        "two runs on one folder, unrestricted and then in the workspace: the second must "
        "refuse ../outside. Make the tools for each run (create_coding_tools(cwd, "
        f"containment)), never keep them from an earlier run on the same folder. Got: {texts}"
    )


def test_each_run_roots_its_tools_at_cwd_as_it_is_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same relative cwd in two runs, the process's folder changed between them: the
    # second run's tools must be made anew, rooted where "ws" is now.
    for place in ("first", "second"):
        (tmp_path / place / "ws").mkdir(parents=True)
    for place in ("first", "second"):
        monkeypatch.chdir(tmp_path / place)
        run(run_coding_agent(ScriptedModel(write_then_stop("x.txt", "x\n")), "ws", "Write x.txt."))
    landed = [(tmp_path / place / "ws" / "x.txt").exists() for place in ("first", "second")]
    assert landed == [True, True], (
        "two runs with cwd 'ws', the process in another folder for the second: each run's "
        "write must land in the 'ws' of its own time. Make the tools for each run "
        "(create_coding_tools(cwd, containment)), never keep them from an earlier run on the "
        f"same folder. Written (first/ws, second/ws): {landed}"
    )


# A folder named like a shell expansion, and the variable the expansion would use.
EXPANSIONS = {"tilde": ("~", "HOME"), "variable": ("$PROJ", "PROJ")}


@pytest.mark.parametrize("expansion", list(EXPANSIONS))
def test_the_tools_take_a_folder_named_like_an_expansion_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expansion: str
) -> None:
    name, variable = EXPANSIONS[expansion]
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "proj").mkdir(parents=True)
    (tmp_path / name / "proj").mkdir(parents=True)
    monkeypatch.setenv(variable, str(elsewhere))
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel(write_then_stop("x.txt", "x\n"))
    run(run_coding_agent(model, f"{name}/proj", "Write x.txt."))
    landed = (tmp_path / name / "proj" / "x.txt").exists(), (elsewhere / "proj" / "x.txt").exists()
    named = str(tmp_path / name / "proj") in (model.requests[0].system_prompt or "")
    assert landed == (True, False) and named, (
        f"cwd {name + '/proj'!r} is a folder named {name!r} for the tools and the prompt: root "
        "the tools at cwd as given (create_coding_tools(cwd, ...)) and name os.path.abspath("
        "cwd), never os.path.expanduser or os.path.expandvars of it, another folder. Written "
        f"(under {name!r}, under ${variable}): {landed}; the prompt names it: {named}"
    )


def test_each_prompt_lists_the_registry_it_is_given_now(workspace: Path) -> None:
    async def search(params: Any, ctx: Any) -> ToolOutput:
        return ToolOutput.of_text("")

    extra = Tool("find_in_files", "Search the files.", object_schema({}), search)
    first = build_system_prompt(str(workspace), create_coding_tools(workspace))
    second = build_system_prompt(
        str(workspace), ToolRegistry([*create_coding_tools(workspace).list(), extra])
    )
    assert "find_in_files" not in first and "find_in_files" in second, (
        "a second prompt for the same folder lists the tools of the registry given now: "
        "build the text on every call, never kept from an earlier call for that folder"
    )
    elsewhere = workspace.parent / "elsewhere"
    third = build_system_prompt(str(elsewhere), create_coding_tools(elsewhere))
    assert "find_in_files" not in third and str(workspace) not in third, (
        "invariant: a prompt holds only what this call was given: a third prompt, for "
        "another folder and the plain tools, names neither the earlier folder nor the extra "
        "tool. Build the lines in a new list on every call (never append to a list kept "
        f"between calls). Got: {third!r}"
    )


def _failing_listener(event: AgentEvent) -> None:
    raise RuntimeError("the listener failed")


# How a run ends: at the model's stop, or raising (an exception of on_event, or the loop
# refusing max_steps=0), with the error it must end with.
RUN_ENDS: dict[str, tuple[dict[str, Any], str]] = {
    "stop": ({}, ""),
    "on-event-raises": ({"on_event": _failing_listener}, "RuntimeError: the listener failed"),
    "max-steps-refused": ({"max_steps": 0}, "ValueError: max_steps must be at least 1"),
}


@pytest.mark.parametrize("end", list(RUN_ENDS))
def test_a_run_leaves_no_listener_on_the_callers_signal(project: Path, end: str) -> None:
    controller = AbortController()
    listeners = spy_on_listeners(controller.signal)
    arguments, error = RUN_ENDS[end]
    coroutine = run_coding_agent(
        ScriptedModel(script()), str(project), TASK, signal=controller.signal, **arguments
    )
    if end == "stop":
        assert run(coroutine).reason == "stop"
    else:
        # Only the error the run must end with: any other (an unfinished stage's, or one of
        # a run that never got going) is no such end.
        with pytest.raises((RuntimeError, ValueError)) as raised:
            run(coroutine)
        if isinstance(raised.value, NotImplementedError):
            raise raised.value  # an unfinished stage shows as itself
        ended = f"{type(raised.value).__name__}: {raised.value}"
        assert ended.startswith(error), f"the run must end with {error!r}, not {ended!r}"
    assert listeners() == 0, (
        f"{listeners()} listener(s) left on the caller's signal after a run that ended by "
        f"{end}: pass the signal through unchanged (run_agent_loop and the tools remove what "
        "they add); a relay or listener of your own stays on the caller's signal, also when "
        "the run raises, unless it is removed in a finally block"
    )


# When the test starts to wake a reader stuck on the FIFO. Only a reader blocked in open()
# lets a writer open it, so a slow but correct run is never taken for a stuck one.
FIFO_DEADLINE_SECONDS = 3.0


def test_a_fifo_in_the_workspace_does_not_stop_the_run(project: Path) -> None:
    fifo = project / "pipe"
    os.mkfifo(fifo)
    turns = [
        assistant_message([ToolCall("r1", "read", {"path": "pipe"})], "toolUse"),
        assistant_message(
            [ToolCall("e1", "edit", {"path": "pipe", "old_text": "a", "new_text": "b"})],
            "toolUse",
        ),
        assistant_message([text("That is no file to work on.")], "stop"),
    ]
    work = run_coding_agent(ScriptedModel(turns), str(project), "Look at pipe.")
    result, stuck = run(finish_unblocking(fifo, work), timeout=FIFO_DEADLINE_SECONDS + 10)
    assert not stuck, (
        "read or edit blocked in open() on a FIFO, which waits for a writer that never "
        "comes (and a worker thread cannot be cancelled, so the run never ends): open with "
        "O_NONBLOCK and refuse anything fstat does not call a regular file, as the given "
        "files.open_regular_file does"
    )
    assert result.reason == "stop"
    for index, tool in ((2, "read"), (4, "edit")):
        message = result.messages[index]
        assert isinstance(message, ToolResultMessage) and message.is_error, (
            f"{tool} of a FIFO is an error result: only regular files are read or edited"
        )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO is left as it was"


async def finish_unblocking(
    fifo: Path, work: Coroutine[Any, Any, AgentRun]
) -> tuple[AgentRun, bool]:
    """Run ``work``; past the deadline, wake whatever is stuck opening ``fifo`` (a writer
    that opens and closes it gives a blocked reader end of file), so that a wrong
    implementation fails with an explanation instead of hanging the test process. True
    when something was stuck: opening for writing succeeds only while a reader waits."""
    task = asyncio.ensure_future(work)
    await asyncio.wait({task}, timeout=FIFO_DEADLINE_SECONDS)
    woken = 0
    while not task.done():
        with contextlib.suppress(OSError):  # ENXIO: no reader has it open
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            woken += 1
        await asyncio.wait({task}, timeout=0.05)
    return task.result(), woken > 0
