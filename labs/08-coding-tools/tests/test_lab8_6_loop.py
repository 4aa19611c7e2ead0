"""Lab 8.6 — the tools driven through the real agent loop by a scripted model.

The tests observe both sides: the environment (the file really changed, bash saw the new
content) and the protocol (one result per call, in order, with its id and name).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab_helpers import run
from picourse.agent_loop import AgentEvent
from picourse.coding_tools import run_coding_agent
from picourse.messages import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    assistant_message,
    text,
    user_message,
)
from picourse.scripted_model import ScriptedModel

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
    run(run_coding_agent(model, str(project), TASK))
    assert len(model.requests) == 4, "four scripted turns mean exactly four model requests"
    first = model.requests[0]
    assert [tool["name"] for tool in first.tools] == ["read", "write", "edit", "bash"]
    assert first.system_prompt and str(project) in first.system_prompt, (
        "the system prompt must name the workspace"
    )
    assert all(name in first.system_prompt for name in ("read", "write", "edit", "bash"))
    second = model.requests[1].messages
    assert isinstance(second[-1], ToolResultMessage) and "print('hello')" in second[-1].text, (
        "the second request must carry the read result (the model sees what it asked for)"
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
