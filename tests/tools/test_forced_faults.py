"""Faults of the world around the reference tools, forced deterministically: another
program swapping a symlink or saving a file at the worst moment, no descriptor left,
a read-only file system, a socket, an abort while the user decides, an old_text on every
line of a large file. Each case runs in a child process against the solved reference;
where a fault must land at one exact moment, the child patches the one call it comes
through (never a sleep that hopes)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.tools.own_session import json_from_reference

pytestmark = pytest.mark.slow

PRELUDE = """
import asyncio, errno, json, os, sys, threading
from picourse.abort import AbortController
from picourse.coding_tools import create_coding_tools
from picourse.messages import ToolCall
from picourse.tool import execute_tool_call

def call(tools, name, arguments, signal=None):
    result = asyncio.run(execute_tool_call(ToolCall("1", name, arguments), tools, signal=signal))
    return {"error": result.is_error, "text": result.content[0].text}

def report(value):
    print(json.dumps(value))
"""


def run_case(src: Path, workspace: Path, script: str, timeout: float = 120) -> Any:
    """The JSON the child printed last; it runs in a session of its own, reaped after."""
    return json_from_reference(
        src,
        PRELUDE + textwrap.dedent(script),
        str(workspace),
        timeout=timeout,
        hung=f"the case still ran after {timeout} s: the fault hangs the tool",
    )


def test_an_old_text_on_every_line_is_refused_briefly_and_replaced_in_linear_time(
    solved_src: Path, tmp_path: Path
) -> None:
    # 300,000 matches: naming each match's line by counting from the start, or moving an
    # earlier edit's spans past every replacement one by one, is quadratic (hours).
    result = run_case(
        solved_src,
        tmp_path,
        """
        path = os.path.join(sys.argv[1], "f.txt")
        with open(path, "w") as file:
            file.write("x\\n" * 300_000)
        tools = create_coding_tools(sys.argv[1], careful_edits=True)
        call(tools, "read", {"path": "f.txt"})
        refused = call(tools, "edit", {"path": "f.txt", "old_text": "x", "new_text": "y"})
        both = call(tools, "edit", {"path": "f.txt", "edits": [
            {"old_text": "x", "new_text": "yy", "replace_all": True},
            {"old_text": "yy", "new_text": "z", "replace_all": True}]})
        with open(path) as file:
            report({"refused": refused, "both": both, "after": file.read()})
        """,
    )
    refused = result["refused"]
    assert refused["error"] and "matches 300000 times" in refused["text"], refused
    assert "lines 1, 2, 3" in refused["text"] and "and 299950 more" in refused["text"], (
        "a refusal names a few lines and how many more, not 300,000 numbers"
    )
    assert len(refused["text"]) < 2000, len(refused["text"])
    assert not result["both"]["error"], result["both"]
    assert result["after"] == "z\n" * 300_000


def test_an_abort_while_matches_are_counted_stops_the_edit(
    solved_src: Path, tmp_path: Path
) -> None:
    # "aa" in 400,000 "a": 399,999 overlapping matches, counted one by one (a 200 MB file
    # took a minute and a half). The abort comes once counting has begun, after every check
    # before it; the edit runs in a worker thread, so the abort is sent to the event loop.
    result = run_case(
        solved_src,
        tmp_path,
        """
        from picourse.coding_tools import edit

        path = os.path.join(sys.argv[1], "f.txt")
        with open(path, "w") as file:
            file.write("a" * 400_000)
        controller = AbortController()
        heard = threading.Event()
        controller.signal.add_listener(heard.set)
        real_count = edit._count_from

        async def main():
            loop = asyncio.get_running_loop()

            def count_as_the_run_is_aborted(*args):
                loop.call_soon_threadsafe(controller.abort)
                assert heard.wait(30), "the abort never reached the signal"
                return real_count(*args)

            edit._count_from = count_as_the_run_is_aborted
            tools = create_coding_tools(sys.argv[1])
            result = await execute_tool_call(
                ToolCall("1", "edit", {"path": "f.txt", "old_text": "aa", "new_text": "b"}),
                tools,
                signal=controller.signal,
            )
            with open(path) as file:
                report({"text": result.content[0].text, "unchanged": file.read() == "a" * 400_000})

        asyncio.run(main())
        """,
    )
    assert "aborted; f.txt is unchanged" in result["text"], (
        f"an abort heard while matches are counted stops the edit and names the file: {result}"
    )
    assert result["unchanged"]


def test_a_file_saved_by_another_program_right_after_the_read_is_not_taken_as_read(
    solved_src: Path, tmp_path: Path
) -> None:
    # The save lands after read_file returned and before the ledger hashes the file: the
    # model saw OLD, so an edit of what it never saw must be refused as changed.
    result = run_case(
        solved_src,
        tmp_path,
        """
        from picourse.coding_tools import registry
        path = os.path.join(sys.argv[1], "f.txt")
        with open(path, "w") as file:
            file.write("OLD line\\n")
        real_read = registry.read_file

        async def read_then_another_program_saves(*args, **kwargs):
            output = await real_read(*args, **kwargs)
            with open(path + ".new", "w") as file:
                file.write("NEW line\\n")
            os.replace(path + ".new", path)
            return output

        registry.read_file = read_then_another_program_saves
        tools = create_coding_tools(sys.argv[1], careful_edits=True)
        seen = call(tools, "read", {"path": "f.txt"})
        edit = call(tools, "edit", {"path": "f.txt", "old_text": "NEW", "new_text": "EDITED"})
        with open(path) as file:
            report({"seen": seen, "edit": edit, "after": file.read()})
        """,
    )
    assert "OLD line" in result["seen"]["text"]
    assert result["edit"]["error"] and "changed on disk" in result["edit"]["text"], result
    assert result["after"] == "NEW line\n"


def test_a_same_size_rewrite_between_two_chunks_of_the_read_is_not_edited_over(
    solved_src: Path, tmp_path: Path
) -> None:
    # Another program (no folder lock) rewrites the first bytes in place while the edit reads
    # the second chunk: the size stays, the times do not. Its mtime set in the past first,
    # so that the rewrite's is another whatever the clock's granularity.
    result = run_case(
        solved_src,
        tmp_path,
        """
        import io
        from picourse.coding_tools import edit

        path = os.path.join(sys.argv[1], "f.txt")
        with open(path, "w") as file:
            file.write("old " + "x" * (3 * edit.CHUNK_BYTES))
        os.utime(path, ns=(0, 0))

        class RewrittenAfterTheFirstChunk(io.FileIO):
            chunks = 0

            def readinto(self, buffer):
                count = super().readinto(buffer)
                RewrittenAfterTheFirstChunk.chunks += 1
                if RewrittenAfterTheFirstChunk.chunks == 1:
                    with open(path, "r+b") as other:
                        other.write(b"NEW!")
                return count

        real_fdopen = os.fdopen

        def fdopen(fd, *args, **kwargs):
            if args[:1] == ("rb",) and kwargs.get("buffering") == 0:
                return RewrittenAfterTheFirstChunk(fd, "rb")
            return real_fdopen(fd, *args, **kwargs)

        os.fdopen = fdopen
        tools = create_coding_tools(sys.argv[1])
        result = call(tools, "edit", {"path": "f.txt", "old_text": "old ", "new_text": "new "})
        with open(path, "rb") as file:
            start = file.read(4)
        chunks = RewrittenAfterTheFirstChunk.chunks
        files = sorted(os.listdir(sys.argv[1]))
        report({"edit": result, "start": start.decode(), "chunks": chunks, "files": files})
        """,
    )
    assert result["chunks"] >= 2, f"the case never reached a second chunk: {result}"
    assert (
        result["edit"]["error"] and "changed while it was being read" in result["edit"]["text"]
    ), f"a file rewritten during the read is not edited over: {result['edit']}"
    assert result["start"] == "NEW!", "the other program's bytes are kept"
    assert result["files"] == ["f.txt"], "no temp file is left"


def test_an_append_after_the_read_and_before_the_write_is_not_lost(
    solved_src: Path, tmp_path: Path
) -> None:
    # Another program (no folder lock) appends while the edit replaces in memory: the edit
    # must look again before it writes, and refuse, instead of renaming its copy over it.
    result = run_case(
        solved_src,
        tmp_path,
        """
        from picourse.coding_tools import edit

        path = os.path.join(sys.argv[1], "f.txt")
        with open(path, "w") as file:
            file.write("one\\n")
        real_replace = edit._replace_once

        def replace_as_another_program_appends(*args):
            with open(path, "a") as other:
                other.write("two\\n")
            return real_replace(*args)

        edit._replace_once = replace_as_another_program_appends
        tools = create_coding_tools(sys.argv[1])
        result = call(tools, "edit", {"path": "f.txt", "old_text": "one", "new_text": "ONE"})
        with open(path) as file:
            report({"edit": result, "after": file.read(), "files": sorted(os.listdir(sys.argv[1]))})
        """,
    )
    assert result["edit"]["error"] and "changed on disk" in result["edit"]["text"], (
        f"an edit whose file changed since its read writes nothing: {result['edit']}"
    )
    assert result["after"] == "one\ntwo\n", "the other program's append is kept"
    assert result["files"] == ["f.txt"], "no temp file is left"


# The file's copies an edit may hold, and the memory left above the process for them:
# plain, not even the file's own copy fits; with a confirmation (which shows the file as it
# was and as it will be), the file and its original fit and the edited copy does not.
_MEMORY_CASES = {"plain": ({}, 128), "confirmed": ({"confirm": "yes"}, 2 * 256 + 128)}


@pytest.mark.skipif(sys.platform != "linux", reason="only Linux enforces an address-space limit")
@pytest.mark.parametrize("case", sorted(_MEMORY_CASES))
def test_an_edit_without_the_memory_for_its_file_is_refused_and_writes_nothing(
    solved_src: Path, tmp_path: Path, case: str
) -> None:
    # 256 MiB of file (sparse) under an address-space limit some MiB above what the process
    # holds: one of the copies the edit makes cannot be made.
    mode, room = _MEMORY_CASES[case]
    result = run_case(
        solved_src,
        tmp_path,
        f"""
        import resource
        from picourse.coding_tools.approval import approve_all

        path = os.path.join(sys.argv[1], "big.txt")
        with open(path, "wb") as file:
            file.write(b"old")
            file.truncate(256 << 20)
        mode = {mode!r}
        if mode.get("confirm"):
            mode["confirm"] = approve_all
        tools = create_coding_tools(sys.argv[1], **mode)
        with open("/proc/self/status") as status:
            held = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, ((held << 10) + ({room} << 20), hard))
        edit = call(tools, "edit", {{"path": "big.txt", "old_text": "old", "new_text": "new"}})
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        with open(path, "rb") as file:
            start = file.read(3)
        files = sorted(os.listdir(sys.argv[1]))
        report({{"edit": edit, "start": start.decode(), "files": files}})
        """,
    )
    edit = result["edit"]
    assert edit["error"] and "Not enough memory to edit big.txt" in edit["text"], (
        f"an edit that cannot hold its file is refused with its own result: {edit}"
    )
    assert result["start"] == "old" and result["files"] == ["big.txt"], result


def test_a_symlink_swapped_while_its_path_is_resolved_gives_an_error_result(
    solved_src: Path, tmp_path: Path
) -> None:
    # os.path.realpath lstat()s a symlink, another program swaps it for a file, readlink
    # fails with EINVAL: forced here as realpath raising for that one name.
    result = run_case(
        solved_src,
        tmp_path,
        """
        real = os.path.realpath

        def swapped_meanwhile(path, *args, **kwargs):
            if os.path.basename(str(path)) == "x":
                raise OSError(errno.EINVAL, "Invalid argument", path)
            return real(path, *args, **kwargs)

        os.path.realpath = swapped_meanwhile
        with open(os.path.join(sys.argv[1], "x"), "w") as file:
            file.write("hello\\n")
        tools = create_coding_tools(sys.argv[1])
        report([
            call(tools, "read", {"path": "x"}),
            call(tools, "write", {"path": "x", "content": "new\\n"}),
            call(tools, "edit", {"path": "x", "old_text": "hello", "new_text": "bye"}),
        ])
        """,
    )
    for outcome in result:
        assert outcome["error"] and "changed while it was being resolved" in outcome["text"], (
            outcome
        )
    assert (tmp_path / "x").read_text() == "hello\n"


@pytest.mark.parametrize(
    "mode", [{}, {"careful_edits": True}, {"confirm": "yes"}], ids=["plain", "careful", "confirm"]
)
def test_write_and_edit_refuse_a_socket_as_not_a_regular_file(
    solved_src: Path, tmp_path: Path, mode: dict[str, Any]
) -> None:
    result = run_case(
        solved_src,
        tmp_path,
        f"""
        import socket
        os.chdir(sys.argv[1])
        server = socket.socket(socket.AF_UNIX)
        server.bind("app.sock")

        async def yes(request):
            return True

        mode = {mode!r}
        if mode.get("confirm"):
            mode["confirm"] = yes
        tools = create_coding_tools(sys.argv[1], **mode)
        report([
            call(tools, "write", {{"path": "app.sock", "content": "x"}}),
            call(tools, "edit", {{"path": "app.sock", "old_text": "a", "new_text": "b"}}),
        ])
        """,
    )
    for outcome in result:
        assert outcome["error"] and "is a socket, not a regular file" in outcome["text"], outcome


def test_a_read_only_file_system_is_named_as_such_not_as_a_read_only_file(
    solved_src: Path, tmp_path: Path
) -> None:
    # A file of mode 644 on a file system mounted read-only: chmod would not help.
    result = run_case(
        solved_src,
        tmp_path,
        """
        import types
        with open(os.path.join(sys.argv[1], "a.txt"), "w") as file:
            file.write("hello\\n")
        # What a read-only mount answers: no write access (EROFS), whatever the mode.
        os.statvfs = lambda path: types.SimpleNamespace(f_flag=os.ST_RDONLY)
        real_access = os.access
        os.access = lambda path, mode, *args, **kwargs: (
            False if mode & os.W_OK else real_access(path, mode, *args, **kwargs)
        )
        tools = create_coding_tools(sys.argv[1])
        report([
            call(tools, "write", {"path": "a.txt", "content": "x"}),
            call(tools, "edit", {"path": "a.txt", "old_text": "hello", "new_text": "bye"}),
        ])
        """,
    )
    for outcome in result:
        assert outcome["error"] and "read-only file system" in outcome["text"], outcome
        assert "chmod" not in outcome["text"], outcome
    assert (tmp_path / "a.txt").read_text() == "hello\n"


def test_a_write_below_a_symlink_loop_says_loop_not_file(solved_src: Path, tmp_path: Path) -> None:
    (tmp_path / "d").symlink_to("e")
    (tmp_path / "e").symlink_to("d")
    result = run_case(
        solved_src,
        tmp_path,
        """
        tools = create_coding_tools(sys.argv[1])
        report(call(tools, "write", {"path": "d/x.txt", "content": "x"}))
        """,
    )
    assert result["error"] and "Too many levels of symbolic links" in result["text"], result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "e"]


def test_a_command_aborted_while_the_user_decides_is_not_started(
    solved_src: Path, tmp_path: Path
) -> None:
    result = run_case(
        solved_src,
        tmp_path,
        """
        controller = AbortController()
        spawned = []

        async def approve_as_the_run_is_aborted(request):
            controller.abort()
            return True

        async def main():
            loop = asyncio.get_running_loop()
            real = loop.subprocess_exec

            async def spy(*args, **kwargs):
                spawned.append(args[1:])
                return await real(*args, **kwargs)

            loop.subprocess_exec = spy
            tools = create_coding_tools(sys.argv[1], confirm=approve_as_the_run_is_aborted)
            result = await execute_tool_call(
                ToolCall("1", "bash", {"command": "touch ran"}), tools, signal=controller.signal
            )
            report({"text": result.content[0].text, "spawned": len(spawned)})

        asyncio.run(main())
        """,
    )
    assert result["spawned"] == 0, f"an aborted call starts no process: {result}"
    assert "aborted" in result["text"], result
    assert not (tmp_path / "ran").exists()


def test_a_fork_refused_at_the_process_limit_says_so(solved_src: Path, tmp_path: Path) -> None:
    # fork fails with EAGAIN when the user's process limit is reached (root never meets it,
    # so the child's event loop refuses the spawn as the kernel would).
    result = run_case(
        solved_src,
        tmp_path,
        """
        async def main():
            loop = asyncio.get_running_loop()

            async def refused(*args, **kwargs):
                raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))

            loop.subprocess_exec = refused
            tools = create_coding_tools(sys.argv[1])
            result = await execute_tool_call(ToolCall("1", "bash", {"command": "true"}), tools)
            report({"error": result.is_error, "text": result.content[0].text})

        asyncio.run(main())
        """,
    )
    assert result["error"], result
    assert "process limit" in result["text"] and "end some processes" in result["text"], (
        f"a refused fork must say what to do about it: {result}"
    )
    assert "bash is installed" not in result["text"], result


def test_output_past_the_budget_still_drains_when_no_descriptor_is_left(
    solved_src: Path, tmp_path: Path
) -> None:
    # The thread that drops output past the budget opens /dev/null: with no descriptor
    # to be had (EMFILE) the pipe must go back to the event loop, not stay paused until
    # the command times out.
    result = run_case(
        solved_src,
        tmp_path,
        """
        real_open = os.open

        def no_descriptor_for_the_discard(path, *args, **kwargs):
            if threading.current_thread().name == "bash-discard" and path == os.devnull:
                raise OSError(errno.EMFILE, "Too many open files")
            return real_open(path, *args, **kwargs)

        os.open = no_descriptor_for_the_discard
        tools = create_coding_tools(
            sys.argv[1], max_bash_output_bytes=4096, bash_timeout_ms=60_000
        )
        report(call(tools, "bash", {"command": "yes | head -c 50000000"}))
        """,
    )
    assert not result["error"], result["text"][-500:]
    assert "timed out" not in result["text"], result["text"][-500:]


def test_the_diff_of_a_confirmation_is_made_off_the_event_loop(
    solved_src: Path, tmp_path: Path
) -> None:
    # difflib takes seconds on a large file: on the event loop's thread it would stop
    # every other call (and every deadline) meanwhile.
    result = run_case(
        solved_src,
        tmp_path,
        """
        from picourse.coding_tools import confirm
        threads = []
        real = confirm.diff_preview

        def spy(*args, **kwargs):
            threads.append(threading.current_thread() is threading.main_thread())
            return real(*args, **kwargs)

        confirm.diff_preview = spy

        async def yes(request):
            return True

        with open(os.path.join(sys.argv[1], "a.txt"), "w") as file:
            file.write("old\\n")
        tools = create_coding_tools(sys.argv[1], confirm=yes)
        written = call(tools, "write", {"path": "a.txt", "content": "new\\n"})
        report({"written": written, "on_the_loop": threads})
        """,
    )
    assert not result["written"]["error"], result
    assert result["on_the_loop"] == [False], (
        f"diff_preview ran on the event loop's thread: {result['on_the_loop']}"
    )


def test_glob_says_which_folders_it_could_not_read(solved_src: Path, tmp_path: Path) -> None:
    # A folder without read permission (forced: root reads any folder) holds files the
    # search cannot see: the result must not look complete.
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "hidden.py").write_text("")
    (tmp_path / "visible.py").write_text("")
    result = run_case(
        solved_src,
        tmp_path,
        """
        real = os.scandir

        def permission_denied(path=".", *args):
            if os.path.basename(os.fsdecode(path)) == "locked":
                raise PermissionError(errno.EACCES, "Permission denied", path)
            return real(path, *args)

        os.scandir = permission_denied
        tools = create_coding_tools(sys.argv[1], navigation=True)
        report(call(tools, "glob", {"pattern": "**/*.py"}))
        """,
    )
    assert not result["error"], result
    lines = result["text"].splitlines()
    assert lines[0] == "visible.py", result
    assert "Could not read 1 folder" in lines[-1] and "locked/" in lines[-1], result


def test_glob_over_folders_nested_past_the_recursion_limit_answers_with_a_result(
    solved_src: Path, tmp_path: Path
) -> None:
    # os.walk recurses once per level on Python 3.11 (3.12 walks with a stack of its own):
    # 1,100 nested folders are past the interpreter's limit there. So do os.makedirs and
    # shutil.rmtree: the tree is made and removed level by level here, or pytest's own
    # clean-up of its temporary folders would fail on it.
    levels = [tmp_path.joinpath(*["d"] * n) for n in range(1, 1101)]
    try:
        for level in levels:
            level.mkdir()
        (levels[-1] / "bottom.txt").touch()
        result = run_case(
            solved_src,
            tmp_path,
            """
            tools = create_coding_tools(sys.argv[1], navigation=True)
            report({"glob": call(tools, "glob", {"pattern": "**/bottom.txt"}),
                    "recursive_walk": sys.version_info < (3, 12)})
            """,
        )
    finally:
        (levels[-1] / "bottom.txt").unlink(missing_ok=True)
        for level in reversed(levels):
            if level.is_dir():
                level.rmdir()
    glob = result["glob"]
    assert "failed: RecursionError" not in glob["text"], (
        f"glob answers a tree too deep for os.walk with its own result: {glob}"
    )
    if result["recursive_walk"]:
        assert glob["error"] and "nested too deep to search" in glob["text"], glob
    else:
        assert not glob["error"] and glob["text"].endswith("bottom.txt"), glob


def test_a_write_to_a_path_ending_in_a_slash_creates_no_file(
    solved_src: Path, tmp_path: Path
) -> None:
    # normpath drops the slash: 'newdir/' would become a FILE named newdir.
    result = run_case(
        solved_src,
        tmp_path,
        """
        tools = create_coding_tools(sys.argv[1])
        report(call(tools, "write", {"path": "newdir/", "content": "x"}))
        """,
    )
    assert result["error"] and "directory" in result["text"], result
    assert list(tmp_path.iterdir()) == []
