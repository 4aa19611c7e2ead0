"""Lab 8.5 — bash runs a process group to exactly one bounded end.

Child programs are Python (sys.executable). Its path is absolute, so process tests run
with containment="unrestricted"; the guardrail tests use workspace mode.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from lab_helpers import call, call_now, run, text_of, utf8_len, wait_for_file
from picourse.abort import AbortController
from picourse.coding_tools import BashDetails, create_coding_tools
from picourse.tool import ToolOutput, ToolRegistry

pytestmark = [pytest.mark.lab8_5, pytest.mark.timeout(60)]

PY = shlex.quote(sys.executable)


def unrestricted(workspace: Path, **options: Any) -> ToolRegistry:
    return create_coding_tools(workspace, "unrestricted", **options)


def script(workspace: Path, name: str, code: str) -> str:
    (workspace / name).write_text(textwrap.dedent(code))
    return f"{PY} {name}"


# A child that starts a grandchild, reports both pids, then waits forever.
FAMILY = """
    import os, signal, subprocess, sys, time
    if "--grandchild" in sys.argv:
        if "--ignore-term" in sys.argv:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open("grandchild.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        while True:
            time.sleep(1)
    args = [sys.executable, sys.argv[0], "--grandchild", *sys.argv[1:]]
    grandchild = subprocess.Popen(args)
    while not os.path.exists("grandchild.pid"):
        time.sleep(0.01)
    with open("family.pid", "w") as f:
        f.write(f"{os.getpid()} {grandchild.pid}\\n")
    while True:
        time.sleep(1)
"""


def assert_gone(pid: int, script_name: str) -> None:
    try:
        process = psutil.Process(pid)
        alive = process.status() != psutil.STATUS_ZOMBIE
        ours = any(script_name in part for part in process.cmdline())
    except psutil.NoSuchProcess:
        return
    assert not (alive and ours), (
        f"process {pid} ({script_name}) outlived the bash call: signal the whole process group "
        "(os.killpg), and wait for the cleanup before returning"
    )


# ---------------------------------------------------------------- endings


def test_success_returns_stdout_and_stderr_and_runs_in_the_workspace(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="echo hello; echo oops >&2; pwd")
    assert not out.is_error, f"exit 0 is a success, got: {text_of(out)}"
    assert "hello" in text_of(out) and "oops" in text_of(out), "stdout and stderr both count"
    assert str(workspace.resolve()) in text_of(out), "the command must run in the workspace"
    assert out.details == BashDetails("echo hello; echo oops >&2; pwd", 0, False, False, False)


def test_no_output_gives_a_short_status(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="true")
    assert not out.is_error
    assert text_of(out).startswith("(no output") and "0" in text_of(out), (
        "when a command prints nothing, say so with its exit status, e.g. '(no output, exit 0)'"
    )


def test_a_non_zero_exit_is_an_error_result_that_keeps_the_code(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="echo partial; exit 3")
    assert out.is_error, "a non-zero exit must be an error result"
    assert "partial" in text_of(out), "the output before the failure must be kept"
    assert out.details.exit_code == 3 and not out.details.timed_out


def test_death_by_signal_has_no_exit_code(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command="kill -KILL $$")
    assert out.is_error
    assert out.details.exit_code is None, "killed by a signal: exit_code is None"


def test_a_timeout_kills_the_whole_group_before_returning(workspace: Path) -> None:
    command = script(workspace, "family_timeout.py", FAMILY)
    out = call_now(unrestricted(workspace, bash_timeout_ms=3000), "bash", command=command)
    assert (workspace / "family.pid").exists(), "the child never started (machine overloaded?)"
    assert out.is_error and out.details.timed_out and not out.details.aborted, (
        "a command still running at the timeout must end as timed_out (and not aborted)"
    )
    for pid in map(int, (workspace / "family.pid").read_text().split()):
        assert_gone(pid, "family_timeout.py")


def test_an_abort_while_running_kills_the_group_and_is_not_a_timeout(workspace: Path) -> None:
    command = script(workspace, "family_abort.py", FAMILY)

    async def scenario() -> ToolOutput:
        controller = AbortController()
        task = asyncio.create_task(
            call(unrestricted(workspace), "bash", {"command": command}, signal=controller.signal)
        )
        await wait_for_file(workspace / "family.pid", task)
        controller.abort("user pressed Esc")
        return await task

    out = run(scenario())
    assert out.is_error and out.details.aborted and not out.details.timed_out, (
        "an abort while running must end as aborted (not timed out)"
    )
    for pid in map(int, (workspace / "family.pid").read_text().split()):
        assert_gone(pid, "family_abort.py")


def test_a_descendant_that_ignores_sigterm_does_not_outlive_the_call(workspace: Path) -> None:
    command = script(workspace, "stubborn.py", FAMILY) + " --ignore-term"

    async def scenario() -> ToolOutput:
        controller = AbortController()
        task = asyncio.create_task(
            call(unrestricted(workspace), "bash", {"command": command}, signal=controller.signal)
        )
        await wait_for_file(workspace / "family.pid", task)
        controller.abort()
        return await task

    out = run(scenario())
    assert out.details.aborted
    grandchild = int((workspace / "grandchild.pid").read_text())
    assert_gone(grandchild, "stubborn.py")


def test_an_abort_before_start_spawns_nothing(workspace: Path) -> None:
    controller = AbortController()
    controller.abort()
    out = run(
        call(
            create_coding_tools(workspace),
            "bash",
            {"command": "touch spawned.txt"},
            signal=controller.signal,
        )
    )
    assert out.is_error and out.details.aborted, "an already-aborted call must end as aborted"
    assert not (workspace / "spawned.txt").exists(), "an aborted call must not start the command"


def test_a_background_process_does_not_outlive_a_successful_command(workspace: Path) -> None:
    child = script(
        workspace,
        "lingering.py",
        """
        import os, time
        with open("lingering.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        while True:
            time.sleep(1)
    """,
    )
    command = f"{child} & while [ ! -s lingering.pid ]; do sleep 0.01; done; echo started"
    out = call_now(unrestricted(workspace), "bash", command=command)
    assert not out.is_error and "started" in text_of(out), text_of(out)
    assert_gone(int((workspace / "lingering.pid").read_text()), "lingering.py")


# ---------------------------------------------------------------- output budget


def test_long_output_is_truncated_within_the_budget_notice_included(workspace: Path) -> None:
    command = f"{PY} -c \"print('x' * 200000)\""
    out = call_now(unrestricted(workspace, max_bash_output_bytes=1000), "bash", command=command)
    assert text_of(out).endswith("[output truncated]"), "truncated output must end with the notice"
    assert utf8_len(text_of(out)) <= 1000, (
        f"the text is {utf8_len(text_of(out))} bytes: the notice counts against the budget"
    )
    assert text_of(out).startswith("xxxx") and out.details.truncated


@pytest.mark.parametrize("budget", [999, 1000])  # one of the two cuts lands inside an 'é'
def test_truncation_counts_utf8_bytes_and_never_splits_a_character(
    workspace: Path, budget: int
) -> None:
    command = f"{PY} -c \"print('é' * 100000)\""
    out = call_now(unrestricted(workspace, max_bash_output_bytes=budget), "bash", command=command)
    assert utf8_len(text_of(out)) <= budget, "the budget is in UTF-8 bytes ('é' is 2)"
    assert "\ufffd" not in text_of(out), "cut at a character boundary, not inside 'é'"
    assert text_of(out).endswith("[output truncated]")
    assert text_of(out).startswith("éé") and utf8_len(text_of(out)) >= budget - 25, (
        "truncation must keep as much output as fits in the budget"
    )


def test_both_pipes_are_drained_after_the_budget_is_spent(workspace: Path) -> None:
    # Far more than a pipe holds (64 KiB): a tool that stops reading deadlocks the child.
    command = script(
        workspace,
        "flood.py",
        """
        import sys
        for _ in range(64):
            sys.stdout.write("o" * 16384)
            sys.stderr.write("e" * 16384)
        sys.stdout.flush()
        sys.stderr.flush()
    """,
    )
    out = call_now(
        unrestricted(workspace, max_bash_output_bytes=2000, bash_timeout_ms=20000),
        "bash",
        command=command,
    )
    assert not out.details.timed_out, (
        "the command timed out: keep reading both pipes to the end, even past the budget"
    )
    assert out.details.exit_code == 0 and out.details.truncated
    assert utf8_len(text_of(out)) <= 2000


def test_a_command_that_never_stops_printing_still_ends_at_its_timeout(
    workspace: Path,
) -> None:
    command = script(
        workspace,
        "endless.py",
        """
        import os, sys
        with open("endless.pid", "w") as f:
            f.write(f"{os.getpid()}\\n")
        while True:
            sys.stdout.write("o" * 65536)
            sys.stderr.write("e" * 65536)
    """,
    )
    out = call_now(
        unrestricted(workspace, max_bash_output_bytes=2000, bash_timeout_ms=2000),
        "bash",
        command=command,
    )
    assert (workspace / "endless.pid").exists(), "the child never started (machine overloaded?)"
    assert out.is_error and out.details.timed_out and out.details.truncated, (
        "output that never ends must not keep the call alive: the timeout still ends it, "
        "and the result is truncated"
    )
    assert utf8_len(text_of(out)) <= 2000
    assert_gone(int((workspace / "endless.pid").read_text()), "endless.py")


# ---------------------------------------------------------------- guardrail


@pytest.mark.parametrize(
    "command",
    [
        "touch ran.txt; cat /etc/hostname",
        "touch ran.txt && ls ~/",
        "touch ran.txt; cat ../outside/secret.txt",
        "touch ran.txt 2>/dev/null",
        "touch ran.txt;(cat /etc/passwd)",
        "/bin/touch ran.txt",
    ],
)
def test_the_guardrail_refuses_paths_outside_and_never_runs_them(
    workspace: Path, command: str
) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert out.is_error and "guardrail" in text_of(out), (
        f"workspace mode must refuse {command!r} with an error that mentions the guardrail"
    )
    assert not (workspace / "ran.txt").exists(), "a refused command must not run at all"


@pytest.mark.parametrize(
    "command",
    [
        "echo a/b > ok.txt",
        "mkdir -p d && echo x > d/ok.txt && cp d/ok.txt ok.txt",
        "echo http://example.org > ok.txt",
        "echo x>ok.txt",
    ],
)
def test_the_guardrail_allows_relative_paths(workspace: Path, command: str) -> None:
    out = call_now(create_coding_tools(workspace), "bash", command=command)
    assert not out.is_error, f"{command!r} names no path outside the workspace: {text_of(out)}"
    assert (workspace / "ok.txt").exists()


def test_unrestricted_mode_has_no_guardrail(workspace: Path) -> None:
    out = call_now(unrestricted(workspace), "bash", command="cat /dev/null; echo ran")
    assert not out.is_error and "ran" in text_of(out)


# ---------------------------------------------------------------- beyond the chapter


@pytest.mark.challenge
def test_a_spawn_failure_is_an_error_result(tmp_path: Path) -> None:
    gone = tmp_path / "deleted-workspace"
    gone.mkdir()
    registry = create_coding_tools(gone)
    gone.rmdir()
    out = call_now(registry, "bash", command="echo hi")
    assert out.is_error, "a command that cannot start (missing cwd) is an error result"


@pytest.mark.challenge
def test_flooding_both_pipes_far_past_the_buffer_never_deadlocks(workspace: Path) -> None:
    command = script(
        workspace,
        "deluge.py",
        """
        import sys
        block = "z" * 65536
        for _ in range(320):  # 20 MiB on each pipe
            sys.stdout.write(block)
            sys.stderr.write(block)
    """,
    )
    out = call_now(unrestricted(workspace, bash_timeout_ms=50000), "bash", command=command)
    assert out.details.exit_code == 0 and not out.details.timed_out and out.details.truncated


@pytest.mark.challenge
def test_timeout_and_abort_together_give_one_result(workspace: Path) -> None:
    command = script(workspace, "both.py", FAMILY)

    async def scenario() -> ToolOutput:
        controller = AbortController()
        task = asyncio.create_task(
            call(
                unrestricted(workspace, bash_timeout_ms=1),
                "bash",
                {"command": command},
                signal=controller.signal,
            )
        )
        await asyncio.sleep(0)
        controller.abort()
        return await task

    out = run(scenario())
    assert out.is_error
    assert out.details.timed_out != out.details.aborted, (
        "exactly one ending may be reported: timed_out or aborted, not both"
    )


@pytest.mark.challenge
def test_a_descendant_that_escaped_with_setsid_is_cleaned_up(workspace: Path) -> None:
    command = script(
        workspace,
        "escapee.py",
        """
        import os, time
        if os.fork() == 0:
            os.setsid()  # a new session: no longer in the tool's process group
            with open("escapee.pid", "w") as f:
                f.write(f"{os.getpid()}\\n")
            while True:
                time.sleep(1)
        while not os.path.exists("escapee.pid"):
            time.sleep(0.01)
    """,
    )
    out = call_now(unrestricted(workspace), "bash", command=command)
    assert not out.is_error, text_of(out)
    assert_gone(int((workspace / "escapee.pid").read_text()), "escapee.py")
