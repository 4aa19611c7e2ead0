"""Lab 8.8 (optional) — see before you write: a diff preview and a confirmation gate.

create_coding_tools(..., confirm=approver) makes write, edit and bash ask first. The
approvers here are test doubles that record what they were asked.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lab_helpers import call, call_now, refuse_to_spawn, run, snapshot, text_of
from picourse.abort import AbortController
from picourse.coding_tools import (
    DEFAULT_MUTATION_QUEUE,
    BashDetails,
    Confirm,
    ConfirmRequest,
    WriteDetails,
    approve_all,
    create_coding_tools,
    terminal_confirmer,
)
from picourse.coding_tools.confirm import diff_preview
from picourse.coding_tools.options import Containment
from picourse.tool import ToolOutput, ToolRegistry
from queue_probe import QueueProbe

pytestmark = pytest.mark.lab8_8


class Approver:
    """Answers every request with ``answer`` and keeps the requests."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.requests: list[ConfirmRequest] = []

    async def __call__(self, request: ConfirmRequest) -> bool:
        self.requests.append(request)
        return self.answer


def tools(workspace: Path, approver: Any) -> ToolRegistry:
    return create_coding_tools(workspace, confirm=approver)


def declined_diff(workspace: Path, tool: str, **arguments: Any) -> tuple[ToolOutput, str]:
    """The result of one call that a declining approver was asked about, and its diff."""
    approver = Approver(False)
    out = call_now(tools(workspace, approver), tool, **arguments)
    (request,) = approver.requests
    assert request.diff is not None, f"{tool} of a file asks with a diff: {request!r}"
    return out, request.diff


def numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


# ---------------------------------------------------------------- write


def test_an_approved_write_shows_a_unified_diff_first(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    approver = Approver(True)
    out = call_now(
        tools(workspace, approver), "write", path="notes.txt", content="alpha\nBETA\ngamma\n"
    )
    assert not out.is_error, text_of(out)
    assert (workspace / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"
    (request,) = approver.requests
    assert request.tool == "write" and request.path == "notes.txt"
    assert request.diff is not None
    assert request.diff.splitlines() == [
        "--- a/notes.txt",
        "+++ b/notes.txt",
        "@@ -1,3 +1,3 @@",
        " alpha",
        "-beta",
        "+BETA",
        " gamma",
    ], "a unified diff with file names in the header and 3 lines of context"


def test_a_declined_write_changes_nothing_and_says_so(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("keep me\n")
    before, inode = snapshot(workspace), (workspace / "notes.txt").stat().st_ino
    out = call_now(tools(workspace, Approver(False)), "write", path="notes.txt", content="gone\n")
    assert out.is_error and "declined" in text_of(out), (
        "a declined change is reported to the model as declined"
    )
    assert snapshot(workspace) == before, "declined: the file is unchanged and no temp file is left"
    assert (workspace / "notes.txt").stat().st_ino == inode


def test_a_new_file_shows_an_all_added_diff_and_a_declined_one_is_not_created(
    workspace: Path,
) -> None:
    out, diff = declined_diff(workspace, "write", path="new/hello.py", content="a\nb\n")
    assert out.is_error and not (workspace / "new").exists(), (
        "a declined new file is not created, nor the folders it would need"
    )
    assert diff.splitlines() == [
        "--- /dev/null",
        "+++ b/new/hello.py",
        "@@ -0,0 +1,2 @@",
        "+a",
        "+b",
    ]


def test_emptying_a_file_shows_its_b_path_not_dev_null(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("a\nb\n")
    out, diff = declined_diff(workspace, "write", path="notes.txt", content="")
    assert diff.splitlines() == [
        "--- a/notes.txt",
        "+++ b/notes.txt",
        "@@ -1,2 +0,0 @@",
        "-a",
        "-b",
    ], (
        "emptying a file changes it; the file stays, so its new side is b/notes.txt (only "
        f"the old side of a file that does not exist yet is /dev/null). Got: {diff!r}"
    )
    assert out.is_error and (workspace / "notes.txt").read_text() == "a\nb\n"


def test_filling_an_empty_file_shows_a_change_not_a_new_file(workspace: Path) -> None:
    (workspace / "empty.txt").write_text("")
    _, diff = declined_diff(workspace, "write", path="empty.txt", content="a\n")
    assert diff.splitlines() == [
        "--- a/empty.txt",
        "+++ b/empty.txt",
        "@@ -0,0 +1 @@",
        "+a",
    ], (
        "the file exists, though empty: its old side is a/empty.txt (only a file that does "
        f"not exist, old None, is /dev/null; test old is None, not falsiness). Got: {diff!r}"
    )


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_identical_content_asks_nothing_and_writes_nothing(workspace: Path, tool: str) -> None:
    path = workspace / "same.txt"
    path.write_text("same\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    inode = path.stat().st_ino
    approver = Approver(True)
    arguments = (
        {"content": "same\n"} if tool == "write" else {"old_text": "same", "new_text": "same"}
    )
    out = call_now(tools(workspace, approver), tool, path="same.txt", **arguments)
    assert not out.is_error and approver.requests == [], "nothing to approve: do not ask"
    assert "same.txt" in text_of(out), f"the result names the file: {text_of(out)!r}"
    if tool == "write":
        assert out.details == WriteDetails(str(path), 5)
    assert path.stat().st_ino == inode and path.stat().st_mtime_ns == 1_000_000_000, (
        "identical content must not be written again"
    )


def test_identical_means_the_same_bytes_not_the_same_decoded_text(workspace: Path) -> None:
    path = workspace / "app.cfg"
    path.write_bytes(b"v = \xff\n")  # not UTF-8: decoded with errors="replace", 0xFF is U+FFFD
    approver = Approver(True)
    out = call_now(tools(workspace, approver), "write", path="app.cfg", content="v = \ufffd\n")
    assert [request.path for request in approver.requests] == ["app.cfg"], (
        "invariant: only identical bytes are identical content. The file holds the byte 0xFF, "
        "the new content is U+FFFD (bytes EF BF BD): they decode to the same text for the "
        "diff, yet the write changes the file, so the approver is asked (once). Compare the "
        f"old and new bytes, not their decoded text. Got: {text_of(out)!r}"
    )
    assert not out.is_error and path.read_bytes() == "v = \ufffd\n".encode(), (
        "an approved change is written: the file holds the UTF-8 bytes of the content. "
        f"Got: {text_of(out)!r}, file {path.read_bytes()!r}"
    )


def test_bytes_that_are_not_utf8_show_in_the_diff_as_u_fffd(workspace: Path) -> None:
    (workspace / "app.cfg").write_bytes(b"v = \xff\n")
    _, diff = declined_diff(workspace, "write", path="app.cfg", content="v = 1\n")
    lines = diff.split("\n")
    assert "-v = \ufffd" in lines and "+v = 1" in lines, (
        "invariant: the diff shows every byte of the old file; one that is not UTF-8 is "
        'decoded with errors="replace" as U+FFFD (errors="ignore" drops it, so the '
        f"person cannot see it is there). Got: {diff!r}"
    )


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_a_special_file_behind_the_gate_is_refused_by_its_name(workspace: Path, tool: str) -> None:
    os.mkfifo(workspace / "spool")
    os.symlink("spool", workspace / "notes.txt")  # a name that says nothing of a FIFO
    (workspace / "plain.txt").write_text("a\n")
    approver = Approver(True)
    arguments = {"content": "x\n"} if tool == "write" else {"old_text": "a", "new_text": "b"}
    registry = tools(workspace, approver)
    asked = call_now(registry, tool, path="plain.txt", **arguments)
    assert not asked.is_error and len(approver.requests) == 1, (
        f"a change of a regular file is asked about first: {text_of(asked)!r}"
    )
    approver.requests.clear()
    out = call_now(registry, tool, path="notes.txt", **arguments)
    assert out.is_error and "notes.txt" in text_of(out) and approver.requests == [], (
        "a FIFO is refused before anything is asked, and the refusal names the file as given: "
        f"{text_of(out)!r}"
    )


def test_the_disk_is_touched_only_after_approval(workspace: Path) -> None:
    path = workspace / "gate.txt"
    path.write_text("before\n")

    async def scenario() -> None:
        asked, answer = asyncio.Event(), asyncio.Event()

        async def approver(request: ConfirmRequest) -> bool:
            asked.set()
            await answer.wait()
            return True

        task = asyncio.create_task(
            call(tools(workspace, approver), "write", {"path": "gate.txt", "content": "after\n"})
        )
        waiting = asyncio.create_task(asked.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            waiting.cancel()
            raise AssertionError(f"the write never asked: {text_of(task.result())}")
        assert path.read_text() == "before\n", "nothing may be written while the user decides"
        assert [p.name for p in workspace.iterdir()] == ["gate.txt"], "no temp file either"
        answer.set()
        out = await task
        assert not out.is_error and path.read_text() == "after\n"

    run(scenario())


def test_a_missing_final_newline_is_marked_in_the_diff(workspace: Path) -> None:
    (workspace / "tail.txt").write_text("a\nx\nb")
    approver = Approver(True)
    call_now(tools(workspace, approver), "write", path="tail.txt", content="a\nx\nc")
    diff = approver.requests[0].diff
    assert diff is not None
    assert diff.splitlines() == [
        "--- a/tail.txt",
        "+++ b/tail.txt",
        "@@ -1,3 +1,3 @@",
        " a",
        " x",
        "-b",
        "\\ No newline at end of file",
        "+c",
        "\\ No newline at end of file",
    ], (
        "a last line without a newline is followed by the line '\\ No newline at end of "
        "file', as diff and git print it; otherwise the diff could not show a change that "
        "only adds or removes the final newline"
    )


def test_only_a_newline_ends_a_line_in_the_diff(workspace: Path) -> None:
    # a form feed, a \r and a Unicode line separator stay part of their line, as in read
    old = "title\x0cpage\u2028break\rend\nsecond\nlast\n"
    (workspace / "odd.txt").write_text(old, newline="")
    approver = Approver(True)
    out = call_now(
        tools(workspace, approver), "write", path="odd.txt", content=old.replace("last", "LAST")
    )
    assert not out.is_error, text_of(out)
    diff = approver.requests[0].diff
    assert diff == (
        "--- a/odd.txt\n+++ b/odd.txt\n@@ -1,3 +1,3 @@\n"
        " title\x0cpage\u2028break\rend\n second\n-last\n+LAST\n"
    ), (
        "invariant: only \\n ends a line (as in read); a form feed, \\r or \\u2028 inside a "
        "line does not end it (the file has 3 lines, and its last one ends with \\n, so no "
        "'\\ No newline at end of file' marker). str.splitlines() splits on all of them: "
        "split on \\n. Every line of the diff ends with \\n, the last one too (join "
        f"difflib's lines with ''). Diff: {diff!r}"
    )


def test_a_new_empty_file_is_a_change_to_ask_about(workspace: Path) -> None:
    declining = Approver(False)
    out = call_now(tools(workspace, declining), "write", path="empty.txt", content="")
    assert [request.path for request in declining.requests] == ["empty.txt"], (
        "invariant: creating a file is a change, even an empty one: there is no old content "
        "it could be identical to, so the approver is asked (once)"
    )
    assert out.is_error and "declined" in text_of(out), text_of(out)
    assert not (workspace / "empty.txt").exists(), "a declined new file is not created"
    approving = Approver(True)
    out = call_now(tools(workspace, approving), "write", path="empty.txt", content="")
    assert not out.is_error and len(approving.requests) == 1, text_of(out)
    assert (workspace / "empty.txt").read_bytes() == b"", "an approved empty file is created"


def test_the_approver_is_asked_inside_the_queue_lane(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "lane.txt").write_text("old\n")
    probe = QueueProbe().install(monkeypatch)
    lanes_held: list[list[str]] = []

    async def approver(request: ConfirmRequest) -> bool:
        lanes_held.append(list(probe.started))
        return True

    for name, arguments in (
        ("write", {"path": "lane.txt", "content": "new\n"}),
        ("edit", {"path": "lane.txt", "old_text": "new", "new_text": "newer"}),
    ):
        probe.started.clear()
        out = call_now(tools(workspace, approver), name, **arguments)
        assert not out.is_error, text_of(out)
    key = os.path.realpath(workspace / "lane.txt")
    assert lanes_held == [[key], [key]], (
        "write and edit ask while they hold the file's lane of DEFAULT_MUTATION_QUEUE: "
        "otherwise another change can slip in between what was shown and what is written"
    )
    assert [queue for queue, _ in probe.calls] == [DEFAULT_MUTATION_QUEUE] * 2


def test_a_diff_is_capped_with_a_notice(workspace: Path) -> None:
    (workspace / "big.txt").write_text(numbered(300))
    approver = Approver(True)
    call_now(tools(workspace, approver), "write", path="big.txt", content=numbered(300).upper())
    diff = approver.requests[0].diff
    assert diff is not None
    lines = diff.splitlines()
    assert len(lines) == 101 and lines[0] == "--- a/big.txt" and "truncated" in lines[-1], (
        "the first 100 diff lines, then a notice that more was left out"
    )
    # A change far down a long file: the whole files are compared, only the diff is capped.
    (workspace / "long.txt").write_text(numbered(300))
    tail = numbered(300).replace("line 250\n", "LINE 250\n")
    call_now(tools(workspace, approver), "write", path="long.txt", content=tail)
    far = approver.requests[-1].diff
    assert far is not None and "-line 250" in far and "+LINE 250" in far, (
        "compare the whole old and new files and cap the diff's lines, never the inputs: a "
        f"change at line 250 of 300 must show. Got: {(far or '')[-300:]!r}"
    )
    call_now(tools(workspace, approver), "write", path="fits.txt", content=numbered(97))
    fits = approver.requests[-1].diff
    assert fits is not None and len(fits.splitlines()) == 100 and "truncated" not in fits, (
        "a diff of exactly 100 lines is shown whole"
    )


def test_diff_preview_caps_at_the_max_lines_it_is_given() -> None:
    old, new = numbered(20), numbered(20).upper()
    whole = diff_preview("f.txt", old, new, max_lines=1000).split("\n")
    capped = diff_preview("f.txt", old, new, max_lines=5).split("\n")
    assert capped[:5] == whole[:5] and "truncated" in capped[5] and capped[6:] == [""], (
        "diff_preview(..., max_lines=5) shows the first 5 lines of the diff, then the "
        "notice: cap at the max_lines it is given (100 is only its default), never at "
        f"MAX_DIFF_LINES whatever the caller asked. Got: {capped[:8]!r}"
    )


# ---------------------------------------------------------------- edit


def test_an_edit_shows_exactly_its_unified_diff(workspace: Path) -> None:
    (workspace / "f").write_text("a\nb\nc\nd\ne\n")
    out, diff = declined_diff(workspace, "edit", path="f", old_text="b", new_text="B")
    assert diff.splitlines() == [
        "--- a/f",
        "+++ b/f",
        "@@ -1,5 +1,5 @@",
        " a",
        "-b",
        "+B",
        " c",
        " d",
        " e",
    ], (
        "an edit shows the unified diff of the whole file: a/ and b/ headers, 3 lines of "
        f"context, the old line then the new one. Got: {diff!r}"
    )
    assert out.is_error and (workspace / "f").read_text() == "a\nb\nc\nd\ne\n"


def test_an_edit_shows_distant_changes_as_separate_hunks(workspace: Path) -> None:
    (workspace / "long.txt").write_text(numbered(100))
    approver = Approver(True)
    out = call_now(
        tools(workspace, approver),
        "edit",
        path="long.txt",
        edits=[
            {"old_text": "line 5\n", "new_text": "line five\n"},
            {"old_text": "line 90\n", "new_text": "line ninety\n"},
        ],
    )
    assert not out.is_error, text_of(out)
    (request,) = approver.requests
    assert request.tool == "edit" and request.diff is not None
    hunks = [line for line in request.diff.splitlines() if line.startswith("@@")]
    assert hunks == ["@@ -2,7 +2,7 @@", "@@ -87,7 +87,7 @@"], (
        "two changes far apart are two hunks with 3 lines of context each; trimming a "
        "common prefix and suffix would show all the lines between them as changed"
    )
    assert "line 50" not in request.diff


def test_an_edit_asks_about_the_file_by_the_path_it_was_given(workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\ny = 2\n")
    approver = Approver(True)
    out = call_now(
        tools(workspace, approver), "edit", path="app.py", old_text="x = 1", new_text="x = 3"
    )
    assert not out.is_error, text_of(out)
    (request,) = approver.requests
    assert request.tool == "edit" and request.path == "app.py", (
        "the request names the tool and the file as the model gave it"
    )
    assert request.diff is not None and request.diff.splitlines()[:2] == [
        "--- a/app.py",
        "+++ b/app.py",
    ], "the diff's headers name the file: a/ and b/ before the path as given"


def aborted_while_deciding(workspace: Path, tool: str, arguments: dict[str, Any]) -> ToolOutput:
    """Call ``tool`` with an approver that sees the abort fire (the person pressed stop while
    the question waited), then approves."""
    controller = AbortController()

    async def approver(request: ConfirmRequest) -> bool:
        controller.abort("user pressed stop")
        return True

    return run(call(tools(workspace, approver), tool, arguments, signal=controller.signal))


def test_an_abort_while_the_person_decides_stops_the_edit(workspace: Path) -> None:
    path = workspace / "app.py"
    path.write_text("x = 1\ny = 2\n")
    inode = path.stat().st_ino
    out = aborted_while_deciding(
        workspace, "edit", {"path": "app.py", "old_text": "x = 1", "new_text": "x = 3"}
    )
    assert out.is_error and "aborted" in text_of(out) and "app.py" in text_of(out), (
        "invariant: an abort that fires while the approver decides stops the edit: check the "
        f"signal again after the approval, right before the write. Got: {text_of(out)!r}"
    )
    assert path.read_text() == "x = 1\ny = 2\n" and path.stat().st_ino == inode


def test_an_abort_while_the_person_decides_stops_the_command(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned = refuse_to_spawn(monkeypatch)
    out = aborted_while_deciding(workspace, "bash", {"command": "touch ran.txt"})
    assert not spawned, (
        f"invariant: an abort that fires while the approver decides stops the command: bash "
        f"started a process ({spawned[0]}); check the signal again after the approval, before "
        "spawning anything"
    )
    assert out.is_error and "aborted" in text_of(out) and out.details.aborted, (
        f"a command aborted while the person decided ends as aborted. Got: {text_of(out)!r}"
    )


@pytest.mark.parametrize("tool", ["write", "edit"])
@pytest.mark.parametrize(
    "saved_meanwhile", ["x = 1\ny = 200\n", "x = 1\ny = 9\n"], ids=["longer", "same-size"]
)
def test_a_file_changed_on_disk_while_the_person_decides_is_not_overwritten(
    workspace: Path, tool: str, saved_meanwhile: str
) -> None:
    path = workspace / "app.py"
    path.write_text("x = 1\ny = 2\n")

    async def approver(request: ConfirmRequest) -> bool:
        path.write_text(saved_meanwhile)  # the person's editor saves the file meanwhile
        return True

    arguments = (
        {"content": "x = 3\ny = 2\n"}
        if tool == "write"
        else {"old_text": "x = 1", "new_text": "x = 3"}
    )
    out = call_now(tools(workspace, approver), tool, path="app.py", **arguments)
    assert path.read_text() == saved_meanwhile, (
        "invariant: what was shown is what gets written. A file that changed on disk while the "
        "person decided must not be overwritten: compare its content (not its size) with what "
        "the diff was made from, right before the atomic write"
    )
    assert out.is_error and "changed" in text_of(out) and "app.py" in text_of(out), (
        f"the refusal says the file changed and names it. Got: {text_of(out)!r}"
    )


def test_a_new_file_created_while_the_person_decides_is_not_overwritten(
    workspace: Path,
) -> None:
    path = workspace / "new.txt"

    async def approver(request: ConfirmRequest) -> bool:
        path.write_text("saved meanwhile\n")  # someone creates the file meanwhile
        return True

    out = call_now(tools(workspace, approver), "write", path="new.txt", content="mine\n")
    assert path.read_text() == "saved meanwhile\n", (
        "invariant: what was shown is what gets written. The diff showed a new file; one "
        "that appeared while the person decided must not be overwritten: check right before "
        "the write for a new file too (it must still not exist)"
    )
    assert out.is_error and "changed" in text_of(out) and "new.txt" in text_of(out), (
        f"the refusal says the file changed and names it. Got: {text_of(out)!r}"
    )


def test_a_declined_edit_leaves_the_file_byte_for_byte(workspace: Path) -> None:
    path = workspace / "app.py"
    path.write_bytes(b"x = 1\r\ny = 2\r\n")
    inode = path.stat().st_ino
    out = call_now(
        tools(workspace, Approver(False)), "edit", path="app.py", old_text="x = 1", new_text="x = 3"
    )
    assert out.is_error and "declined" in text_of(out)
    assert path.read_bytes() == b"x = 1\r\ny = 2\r\n" and path.stat().st_ino == inode


# ---------------------------------------------------------------- bash and read


@pytest.mark.parametrize("containment", ["workspace", "unrestricted"])
def test_bash_asks_with_the_command_and_a_declined_command_never_runs(
    workspace: Path, containment: Containment
) -> None:
    def gated(approver: Any) -> ToolRegistry:
        return create_coding_tools(workspace, containment, confirm=approver)

    approver = Approver(False)
    out = call_now(gated(approver), "bash", command="touch ran.txt")
    assert out.is_error and "declined" in text_of(out), (
        f"with containment={containment!r}, bash asks first all the same (the guardrail and "
        f"the confirmation are separate checks): {text_of(out)!r}"
    )
    assert not (workspace / "ran.txt").exists(), "a declined command must not run"
    assert approver.requests == [ConfirmRequest("bash", command="touch ran.txt")]
    approver.answer = True
    out = call_now(gated(approver), "bash", command="touch ran.txt")
    assert not out.is_error and (workspace / "ran.txt").exists()


@pytest.mark.parametrize("answer", [True, False], ids=["approving", "declining"])
def test_bash_never_asks_about_a_command_the_guardrail_refuses(
    workspace: Path, answer: bool
) -> None:
    approver = Approver(answer)
    call_now(tools(workspace, approver), "bash", command="touch ran.txt")
    assert approver.requests == [ConfirmRequest("bash", command="touch ran.txt")], (
        "bash asks about a command its checks let through"
    )
    out = call_now(tools(workspace, approver), "bash", command="cat /etc/hostname")
    assert out.is_error and "guardrail" in text_of(out) and "declined" not in text_of(out), (
        "bash's own checks come before the question: a command the guardrail refuses is "
        f"refused for that reason, and the person is never asked. Got: {text_of(out)!r}"
    )
    assert len(approver.requests) == 1, "the person was asked about a command that never runs"


@pytest.mark.parametrize("tool", ["bash", "edit"])
def test_an_already_aborted_call_asks_nothing_and_says_aborted(workspace: Path, tool: str) -> None:
    path = workspace / "app.py"
    path.write_text("x = 1\n")
    before = snapshot(workspace)
    arguments = (
        {"command": "touch ran.txt"}
        if tool == "bash"
        else {"path": "app.py", "old_text": "x = 1", "new_text": "x = 3"}
    )
    # First the gate is seen to work: the same call, not aborted, is asked about (declined).
    live = Approver(False)
    declined = run(call(tools(workspace, live), tool, arguments, signal=AbortController().signal))
    assert len(live.requests) == 1 and "declined" in text_of(declined), (
        f"{tool} with confirm= asks the approver once before it acts, and a 'no' is an error "
        f"result that says declined: asked {len(live.requests)} times, got {text_of(declined)!r}"
    )
    controller = AbortController()
    controller.abort("user pressed stop")  # the run was stopped before the call began
    approver = Approver(False)
    out = run(call(tools(workspace, approver), tool, arguments, signal=controller.signal))
    first = "before anything is spawned" if tool == "bash" else "before the file is read"
    assert approver.requests == [], (
        f"invariant: a {tool} call whose signal is already aborted asks nobody: the run is "
        f"over. Check the signal first ({first}), and ask the approver only after that"
    )
    assert out.is_error and "aborted" in text_of(out) and "declined" not in text_of(out), (
        f"an already-aborted {tool} call says it was aborted (not declined): {text_of(out)!r}"
    )
    if tool == "bash":
        assert isinstance(out.details, BashDetails) and out.details.aborted, (
            "an already-aborted command reports BashDetails(aborted=True), with or without "
            f"the confirmation gate. Got: {out.details!r}"
        )
    assert snapshot(workspace) == before, f"an aborted {tool} call changes nothing"


def test_reading_never_asks_and_approve_all_lets_changes_through(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    approver = Approver(False)
    out = call_now(tools(workspace, approver), "read", path="a.txt")
    assert not out.is_error and approver.requests == [], "read-only tools never ask"
    registry = tools(workspace, approve_all)
    assert not call_now(registry, "write", path="a.txt", content="two\n").is_error
    assert not call_now(registry, "edit", path="a.txt", old_text="two", new_text="3").is_error
    assert not call_now(registry, "bash", command="touch ok").is_error
    assert (workspace / "a.txt").read_text() == "3\n" and (workspace / "ok").exists()


# ---------------------------------------------------------------- the terminal approver


async def ask(confirm: Confirm, request: ConfirmRequest) -> bool:
    return await confirm(request)


@pytest.mark.parametrize(
    ("typed", "approved"),
    [
        ("y\n", True),
        ("yes\n", True),
        ("\n", False),
        ("\ny\n", False),
        ("n\n", False),
        ("", False),
        ("maybe\n", False),
        ("yes please\n", False),
        ("yeah\n", False),
    ],
)
def test_the_terminal_approver_shows_the_diff_in_colour_and_defaults_to_no(
    typed: str, approved: bool
) -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system="standard", width=80)
    confirm = terminal_confirmer(answers=io.StringIO(typed), console=console)
    request = ConfirmRequest("edit", path="a.txt", diff="--- a/a.txt\n+++ b/a.txt\n-old\n+new\n")
    assert run(ask(confirm, request)) is approved, (
        f"typing {typed!r} must {'' if approved else 'not '}approve: only y or yes approves, "
        "any other answer (an empty line or the end of input included) declines; one line is "
        "the answer (an Enter is 'no', never a reason to read another line)"
    )
    shown = screen.getvalue()
    assert "a.txt" in shown and "+new" in shown and "\x1b[" in shown, (
        "the person sees the file, the diff, in colour"
    )
    changed = [line for line in shown.splitlines() if "+new" in line or "-old" in line]
    assert changed and all("\x1b[" in line for line in changed), (
        "the diff's own lines are coloured (added and removed lines told apart at a glance): "
        f"print it as rich's Syntax(diff, 'diff'), not as plain text. Got: {changed!r}"
    )
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)  # colours and highlighting aside
    assert "[y/N]" in plain, (
        "the question shows [y/N]: the default is no (rich reads [y/N] as markup unless "
        "printed with markup=False)"
    )
    assert "[y/N]" in shown, (
        "the question is printed as is: rich's highlighter colours '[y/N]' in pieces on a "
        "colour terminal (print it with markup=False and highlight=False). Got: "
        f"{shown[-80:]!r}"
    )


def test_the_terminal_approver_names_the_file_before_its_diff() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system="standard", width=80)
    confirm = terminal_confirmer(answers=io.StringIO("n\n"), console=console)
    # A diff whose own headers do not carry the request's path: only the line before it can.
    request = ConfirmRequest("write", path="docs/plan.md", diff="--- a/x\n+++ b/x\n-old\n+new\n")
    assert run(ask(confirm, request)) is False
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen.getvalue())
    before_diff = plain.split("--- a/x")[0]
    assert "docs/plan.md" in before_diff and "write" in before_diff, (
        "the person is told which tool wants to change which file before the diff: print the "
        f"request's tool and path first. Shown before the diff: {before_diff!r}"
    )


def test_the_terminal_approver_names_the_file_of_an_empty_diff() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system="standard", width=80)
    confirm = terminal_confirmer(answers=io.StringIO("n\n"), console=console)
    assert run(ask(confirm, ConfirmRequest("write", path="blank.txt", diff=""))) is False
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen.getvalue())
    assert "blank.txt" in plain, (
        "a request with a diff, even an empty one (diff is not None), is a change to a file: "
        f"name the file (test `diff is not None`, not the diff's truth). Shown: {plain!r}"
    )


def test_a_file_that_is_not_utf8_still_gets_a_diff(workspace: Path) -> None:
    path = workspace / "latin1.txt"
    path.write_bytes(b"caf\xe9\n")  # Latin-1, not UTF-8
    approver = Approver(True)
    out = call_now(tools(workspace, approver), "write", path="latin1.txt", content="café\n")
    assert not out.is_error, text_of(out)
    (request,) = approver.requests
    assert request.diff is not None and "+café" in request.diff, (
        "old content that is not valid UTF-8 is still shown: decode it for the diff with "
        f"errors='replace' (the file is written as given). Diff: {request.diff!r}"
    )
    assert path.read_text() == "café\n"


class RecordingAnswers(io.StringIO):
    """Typed answers that note which thread reads them."""

    def __init__(self, typed: str) -> None:
        super().__init__(typed)
        self.readers: list[int] = []

    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        self.readers.append(threading.get_ident())
        return super().readline(size)


def test_the_terminal_approver_reads_the_answer_off_the_event_loop() -> None:
    answers = RecordingAnswers("y\n")
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    confirm = terminal_confirmer(answers=answers, console=console)
    assert run(ask(confirm, ConfirmRequest("bash", command="make test"))) is True
    assert "make test" in screen.getvalue(), "a command is shown before it is approved"
    assert answers.readers, "the answer is read from answers with readline"
    assert threading.get_ident() not in answers.readers, (
        "readline blocks until the person answers; on the event loop's thread it would "
        "freeze every other task meanwhile: read it in a worker thread (asyncio.to_thread)"
    )


@pytest.mark.parametrize(
    ("typed", "approved"), [("", False), ("\n", False), ("y\n", True)], ids=["eof", "enter", "y"]
)
def test_the_terminal_approver_reads_stdin_when_given_no_answers(
    monkeypatch: pytest.MonkeyPatch, typed: str, approved: bool
) -> None:
    stdin = RecordingAnswers(typed)
    monkeypatch.setattr("sys.stdin", stdin)
    confirm = terminal_confirmer(console=Console(file=io.StringIO(), width=80))
    try:
        answer = run(ask(confirm, ConfirmRequest("bash", command="make test")))
    except Exception as error:
        raise AssertionError(
            f"with no answers given, the approver reads sys.stdin; typing {typed!r} "
            f"raised {error!r}: the end of input (readline gives '') declines, never raises"
        ) from error
    assert answer is approved, f"typing {typed!r} must {'approve' if approved else 'decline'}"
    assert stdin.readers and threading.get_ident() not in stdin.readers, (
        "with no answers given, read the answer from sys.stdin with readline, in a worker "
        "thread (never input() or a read on the event loop's thread, which freezes it)"
    )
