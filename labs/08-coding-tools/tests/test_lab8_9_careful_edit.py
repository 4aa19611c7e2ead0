"""Lab 8.9 (optional) — edit like a careful colleague.

create_coding_tools(..., careful_edits=True): read before edit (checked by content hash),
replace_all, hints for common mistakes, kept line endings and BOM, and the edited
region in the result. One registry is one session: it remembers what it read.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
from pathlib import Path
from typing import Any

import pytest

from lab_helpers import call, call_now, run, text_of
from picourse.abort import AbortController
from picourse.coding_tools import EditDetails, create_coding_tools
from picourse.coding_tools.careful_edit import ReadLedger
from picourse.tool import ToolOutput, ToolRegistry

pytestmark = pytest.mark.lab8_9

SOURCE = (
    "def total(items):\n"
    "    result = 0\n"
    "    for item in items:\n"
    "        result += item\n"
    "    return result\n"
)


def session(workspace: Path) -> ToolRegistry:
    return create_coding_tools(workspace, careful_edits=True)


def read(tools: ToolRegistry, path: str) -> ToolOutput:
    out = call_now(tools, "read", path=path)
    assert not out.is_error, text_of(out)
    return out


def edit(tools: ToolRegistry, path: str, **arguments: Any) -> ToolOutput:
    return call_now(tools, "edit", path=path, **arguments)


def refused(out: ToolOutput, path: Path, before: bytes, *words: str) -> None:
    assert out.is_error, f"expected a refusal, got: {text_of(out)}"
    message = text_of(out)
    for word in words:
        assert word in message, f"the refusal must mention {word!r}: {message}"
        if word == "again":  # "against" holds it too, and says something else
            assert re.search(r"\bagain\b", message), (
                f"the refusal must tell to read the file again, in that word: {message}"
            )
    assert path.read_bytes() == before, "a refused change must leave the file byte for byte"


@pytest.fixture
def app(workspace: Path) -> Path:
    path = workspace / "app.py"
    path.write_text(SOURCE)
    return path


# ---------------------------------------------------------------- read before edit


def test_an_unread_file_cannot_be_edited_or_overwritten(workspace: Path, app: Path) -> None:
    tools = session(workspace)
    before = app.read_bytes()
    out = edit(tools, "app.py", old_text="result = 0", new_text="result = 1")
    refused(out, app, before, "app.py", "Read")
    # The read check comes first: a batch that would fail is refused for the unread file,
    # never with its own "no match".
    out = edit(tools, "app.py", old_text="not in the file", new_text="x")
    refused(out, app, before, "app.py", "Read")
    assert "no match" not in text_of(out), (
        "an unread file is refused as unread before its batch is matched (check the ledger "
        f"first): the model must read it, not fix its old_text. Got: {text_of(out)!r}"
    )
    out = call_now(tools, "write", path="app.py", content="x = 1\n")
    refused(out, app, before, "app.py", "Read")
    # What the file already holds: still an overwrite of a file the session has not read
    # (and once written, it would count as read).
    out = call_now(tools, "write", path="app.py", content=SOURCE)
    refused(out, app, before, "app.py", "Read")
    created = call_now(tools, "write", path="new.py", content="x = 1\n")
    assert not created.is_error, "a new file needs no read first"


def test_an_unread_empty_file_cannot_be_overwritten_either(workspace: Path) -> None:
    empty = workspace / "notes.txt"
    empty.write_bytes(b"")
    out = call_now(session(workspace), "write", path="notes.txt", content="overwritten\n")
    assert out.is_error, (
        "an empty file exists like any other: overwriting it unread must be refused (ask "
        f"whether the file exists, never whether it has content). Got: {text_of(out)}"
    )
    refused(out, empty, b"", "notes.txt", "Read")


def test_after_a_read_edits_in_a_row_work_because_own_writes_count(
    workspace: Path, app: Path
) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    first = edit(tools, "app.py", old_text="result = 0", new_text="result = 1")
    second = edit(tools, "app.py", old_text="result = 1", new_text="result = 2")
    third = call_now(tools, "write", path="app.py", content=SOURCE)
    fourth = edit(tools, "app.py", old_text="result = 0", new_text="result = 3")
    assert not any(out.is_error for out in (first, second, third, fourth)), (
        "the tools' own writes (edit and write alike) refresh what the session knows: "
        + " | ".join(text_of(o) for o in (first, second, third, fourth))
    )
    created = call_now(tools, "write", path="new.py", content="x = 1\n")
    out = edit(tools, "new.py", old_text="x = 1", new_text="x = 2")
    assert not (created.is_error or out.is_error), (
        "a file the session wrote itself counts as read: write records what it wrote"
    )


def test_write_refuses_to_overwrite_a_file_changed_since_it_was_read(
    workspace: Path, app: Path
) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    changed = SOURCE.replace("result = 0", "result = 9")
    app.write_text(changed)
    out = call_now(tools, "write", path="app.py", content="x = 1\n")
    refused(out, app, changed.encode(), "changed", "again")


def test_a_change_on_disk_since_the_read_is_caught_by_content_not_mtime(
    workspace: Path, app: Path
) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    stat = app.stat()
    changed = SOURCE.replace("result = 0", "result = 9")  # same size
    app.write_text(changed)
    os.utime(app, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
    out = edit(tools, "app.py", old_text="return result", new_text="return result * 2")
    refused(out, app, changed.encode(), "changed", "again")
    read(tools, "app.py")
    out = edit(tools, "app.py", old_text="return result", new_text="return result * 2")
    assert not out.is_error, f"after reading again the edit goes through: {text_of(out)}"


def test_a_change_anywhere_in_a_large_file_is_caught(workspace: Path) -> None:
    path = workspace / "big.txt"
    data = "".join(f"line {n:06d}\n" for n in range(300_000)).encode()  # 3.6 MB
    path.write_bytes(data)
    tools = session(workspace)
    read(tools, "big.txt")
    first = edit(tools, "big.txt", old_text="line 000000", new_text="line zero!")
    assert not first.is_error, (
        "a large file read and unchanged since can be edited: the hash that read remembers "
        f"and the one edit checks cover the same bytes. Got: {text_of(first)[:300]!r}"
    )
    edited = path.read_bytes()
    stat = path.stat()
    changed = edited[:-12] + b"LINE 299999\n"  # the last line: same size, and mtime kept
    path.write_bytes(changed)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    out = edit(tools, "big.txt", old_text="line 000001", new_text="line one")
    assert out.is_error and "changed" in text_of(out), (
        "invariant: what the session read is remembered by a hash of the whole file, every "
        "chunk of it: a change past the first chunk (here the last line of 3.6 MB) is a "
        f"change all the same. Got: {text_of(out)[:300]!r}"
    )
    assert path.read_bytes() == changed


def test_two_sessions_do_not_share_what_they_read(workspace: Path, app: Path) -> None:
    read(session(workspace), "app.py")
    out = edit(session(workspace), "app.py", old_text="result = 0", new_text="result = 1")
    refused(out, app, SOURCE.encode(), "Read")


@pytest.mark.parametrize(
    ("read_as", "changed_as", "tool"),
    [
        ("app.py", "link.py", "write"),
        ("link.py", "app.py", "edit"),
        ("link.py", "app.py", "write"),
        ("app.py", "link.py", "edit"),
    ],
)
def test_a_file_read_by_one_name_can_be_changed_by_another(
    workspace: Path, app: Path, read_as: str, changed_as: str, tool: str
) -> None:
    os.symlink("app.py", workspace / "link.py")  # two names of one file
    tools = session(workspace)
    read(tools, read_as)
    arguments = (
        {"content": SOURCE.replace("result = 0", "result = 1")}
        if tool == "write"
        else {"old_text": "result = 0", "new_text": "result = 1"}
    )
    out = call_now(tools, tool, path=changed_as, **arguments)
    assert not out.is_error, (
        f"invariant: what the session read is remembered per file, by its canonical path "
        f"(canonical_key), not by the name given: {read_as} and {changed_as} are one file, "
        f"read through {read_as}, so {tool} through {changed_as} goes through. Look up and "
        f"record the ledger under the key of the file's lane. Got: {text_of(out)!r}"
    )
    out = edit(tools, read_as, old_text="result = 1", new_text="result = 2")
    assert not out.is_error, (
        f"invariant: the session's own {tool} through {changed_as} counts as a read of the "
        f"file, under every name of it: record what was written under canonical_key, so an "
        f"edit through {read_as} right after it goes through. Got: {text_of(out)!r}"
    )
    assert app.read_text() == SOURCE.replace("result = 0", "result = 2")
    assert (workspace / "link.py").is_symlink()


def test_a_write_that_failed_does_not_count_as_read(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    failures: list[str] = []
    replace, rename = os.replace, os.rename

    def fail_once(renamer: Any) -> Any:
        def renamed(*args: Any, **kwargs: Any) -> None:
            if not failures:  # the disk is full for this one rename, then has room again
                failures.append(str(args[0]))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            renamer(*args, **kwargs)

        return renamed

    monkeypatch.setattr(os, "replace", fail_once(replace))
    monkeypatch.setattr(os, "rename", fail_once(rename))
    out = call_now(tools, "write", path="app.py", content="x = 1\n")
    assert failures and out.is_error, (
        f"the write renames its temp file over app.py (os.replace), which fails: {text_of(out)!r}"
    )
    assert app.read_bytes() == SOURCE.encode(), "a failed write leaves the file as it was"
    out = edit(tools, "app.py", old_text="result = 0", new_text="result = 1")
    assert not out.is_error, (
        "invariant: only a write that happened counts as read. The write failed, so app.py "
        "still holds what the session read, and an edit of it goes through: record the new "
        "content in the ledger after the write succeeds, never before it. "
        f"Got: {text_of(out)!r}"
    )
    assert app.read_text() == SOURCE.replace("result = 0", "result = 1")


def test_an_abort_that_comes_after_the_read_still_stops_the_write(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    controller = AbortController()
    verify = ReadLedger.verify
    verified: list[bytes] = []

    def verify_then_abort(self: ReadLedger, key: str, path: str, current: bytes) -> str | None:
        # edit calls verify with the whole file once it has read it: the read is over, and
        # the person presses stop now
        verified.append(bytes(current))
        refusal = verify(self, key, path, current)
        controller.abort("user pressed stop")
        return refusal

    monkeypatch.setattr(ReadLedger, "verify", verify_then_abort)
    inode = app.stat().st_ino
    out = run(
        call(
            tools,
            "edit",
            {"path": "app.py", "old_text": "result = 0", "new_text": "result = 1"},
            signal=controller.signal,
        )
    )
    assert SOURCE.encode() in verified, (
        "edit checks read-before-edit with ledger.verify(key, path, content) inside its lane, "
        "on the content it just read"
    )
    assert out.is_error and "aborted" in text_of(out) and "app.py" in text_of(out), (
        "invariant: an abort that comes after the file was read still stops the edit: check "
        "the signal again right before write_atomic, after the batch is applied, and say "
        f"'aborted' and which file is unchanged. Got: {text_of(out)!r}"
    )
    assert app.read_bytes() == SOURCE.encode() and app.stat().st_ino == inode, (
        "an aborted edit writes nothing"
    )


# ---------------------------------------------------------------- matching


def test_replace_all_replaces_every_occurrence(workspace: Path, app: Path) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    out = edit(
        tools, "app.py", edits=[{"old_text": "result", "new_text": "acc", "replace_all": True}]
    )
    assert not out.is_error, text_of(out)
    assert app.read_text() == SOURCE.replace("result", "acc")
    assert out.details == EditDetails(str(app), len(SOURCE), len(SOURCE) - 9, 1)


def test_replace_all_replaces_non_overlapping_occurrences_left_to_right(workspace: Path) -> None:
    path = workspace / "runs.txt"
    path.write_text("aaa aaaa\n")
    tools = session(workspace)
    read(tools, "runs.txt")
    out = edit(tools, "runs.txt", edits=[{"old_text": "aa", "new_text": "b", "replace_all": True}])
    assert not out.is_error, text_of(out)
    assert path.read_text() == "ba bb\n", (
        "replace_all replaces as str.replace does: left to right, never reusing a character "
        "of a replaced occurrence ('aaa' becomes 'ba')"
    )
    out = edit(tools, "runs.txt", edits=[{"old_text": "c", "new_text": "d", "replace_all": True}])
    refused(out, path, b"ba bb\n", "edits[0]", "no match")
    out = edit(tools, "runs.txt", old_text="b", new_text="c")
    refused(out, path, b"ba bb\n", "edits[0]", "matches 3 times")
    out = edit(tools, "runs.txt", old_text="a ", new_text="c")
    assert not out.is_error, "exactly one match needs no replace_all"
    path.write_text("aaa\n")
    read(tools, "runs.txt")
    out = edit(tools, "runs.txt", old_text="aa", new_text="b")
    refused(out, path, b"aaa\n", "edits[0]", "matches 2 times")


def test_replace_all_shows_every_replacement_where_it_landed(workspace: Path) -> None:
    lines = [f"line {n}" for n in range(1, 61)]
    for number in (10, 30, 50):
        lines[number - 1] = "MARK"
    path = workspace / "marks.txt"
    path.write_text("\n".join(lines) + "\n")
    tools = session(workspace)
    read(tools, "marks.txt")
    longer = "M" * 300
    out = edit(tools, "marks.txt", old_text="MARK", new_text=longer, replace_all=True)
    assert not out.is_error, text_of(out)
    shown = text_of(out)
    for number in (10, 30, 50):
        assert f"{number:>4}│ {longer}" in shown, (
            f"the replacement on line {number} is shown: each earlier replacement that made the "
            "text longer moves the later ones"
        )


def test_several_matches_without_replace_all_name_their_lines(workspace: Path, app: Path) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    out = edit(tools, "app.py", old_text="result", new_text="acc")
    refused(
        out, app, SOURCE.encode(), "edits[0]", "3 times in app.py", "lines 2, 4, 5", "replace_all"
    )


def test_a_match_of_several_lines_is_named_by_the_line_it_starts_on(workspace: Path) -> None:
    path = workspace / "pairs.py"
    data = b"a = 1\nx = 0\ny = 0\nb = 2\nx = 0\ny = 0\n"
    path.write_bytes(data)
    tools = session(workspace)
    read(tools, "pairs.py")
    out = edit(tools, "pairs.py", old_text="x = 0\ny = 0", new_text="x = y = 0")
    assert "(lines 2, 5)" in text_of(out), (
        "old_text of two lines matches on lines 2-3 and 5-6: name each match by the line it "
        f"starts on, (lines 2, 5). Got: {text_of(out)!r}"
    )
    refused(out, path, data, "edits[0]", "2 times in pairs.py", "replace_all")


@pytest.mark.parametrize("line", [2, 1000, 10_000])
def test_a_line_number_prefix_gets_a_hint_to_drop_it(workspace: Path, line: int) -> None:
    path = workspace / "values.py"
    data = "".join(f"    value_{n} = {n}\n" for n in range(1, 10_006)).encode()
    path.write_bytes(data)
    tools = session(workspace)
    copied = call_now(tools, "read", path="values.py", offset=line, limit=1)
    assert not copied.is_error, text_of(copied)
    old_text = text_of(copied).splitlines()[0]  # the line as read shows it, prefix and all
    out = edit(tools, "values.py", old_text=old_text, new_text=f"    value_{line} = 0")
    refused(out, path, data, "edits[0]", "no match")
    assert "prefix" in text_of(out), (
        f"invariant: old_text copied from read with its line-number prefix ({old_text!r}) "
        "gets the hint to drop the prefix, whatever the number's width: from line 1000 on, "
        "read's prefix has no space before the number ('1000│ '), so match any spaces, "
        f"even none, before the digits. Got: {text_of(out)!r}"
    )


def test_a_line_number_prefix_on_a_later_line_gets_the_hint_too(workspace: Path, app: Path) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    out = edit(
        tools, "app.py", old_text="    result = 0\n   3│     for item in items:", new_text="pass"
    )
    refused(out, app, SOURCE.encode(), "edits[0]", "no match")
    assert "prefix" in text_of(out), (
        "invariant: old_text with any line that starts with read's '   4│ ' prefix, the first "
        "or a later one, gets the hint to drop the line-number prefix (search every line, e.g. "
        f"with re.MULTILINE). Got: {text_of(out)!r}"
    )


# Mismatches without read's prefix: a digit inside a line, lines that start with a number
# (an expression, a numbered list) but carry no bar, and a number and a bar inside a line.
@pytest.mark.parametrize(
    "old_text",
    ["result = 7", "42 = answer", "  10 items\n  11 more", 'print("total 12│ items")'],
)
def test_only_old_text_with_a_line_number_prefix_gets_the_prefix_hint(
    workspace: Path, app: Path, old_text: str
) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    out = edit(tools, "app.py", old_text=old_text, new_text="result = 1")
    refused(out, app, SOURCE.encode(), "edits[0]", "no match")
    assert "prefix" not in text_of(out), (
        "invariant: the hint to drop read's line-number prefix is for old_text that carries "
        "one ('   4│ '); a plain mismatch must not claim it does. Give the prefix hint only "
        f"when old_text holds such a prefix. Got: {text_of(out)!r}"
    )


@pytest.mark.parametrize(
    ("data", "old_text", "count"),
    [(b"\nvalue\nother\nvalue\n", "value", 2), (b"x\nab ab\ny\nab\n", "ab", 3)],
    ids=["leading-empty-line", "two-on-one-line"],
)
def test_several_matches_are_counted_one_by_one_and_name_each_line_once(
    workspace: Path, data: bytes, old_text: str, count: int
) -> None:
    path = workspace / "several.txt"
    path.write_bytes(data)
    tools = session(workspace)
    read(tools, "several.txt")
    out = edit(tools, "several.txt", old_text=old_text, new_text="v")
    refused(out, path, data, "edits[0]", f"matches {count} times")
    assert "lines 2, 4" in text_of(out) and "2, 2" not in text_of(out), (
        f"{old_text!r} occurs {count} times, on lines 2 and 4 (a leading empty line is line "
        "1): count every occurrence, two on one line as two, and name each line once, in "
        f"order, as read numbers them. Got: {text_of(out)!r}"
    )


def test_many_matches_name_lines_of_theirs_and_count_the_rest_right(workspace: Path) -> None:
    path = workspace / "todo.txt"
    data = "".join(f"item {n}\nTODO\n" for n in range(1, 121)).encode()  # lines 2, 4, ... 240
    path.write_bytes(data)
    tools = session(workspace)
    read(tools, "todo.txt")
    out = edit(tools, "todo.txt", old_text="TODO", new_text="DONE")
    refused(out, path, data, "edits[0]", "matches 120 times")
    said = text_of(out)
    listed = re.search(r"lines (\d+(?:, \d+)*)", said)
    named = [int(n) for n in listed.group(1).split(", ")] if listed else []
    assert named[:3] == [2, 4, 6] and all(n % 2 == 0 and n <= 240 for n in named), (
        "invariant: a refusal of several matches names the lines they are on, in order, "
        f"from the first (2, 4, 6, ...), however many there are. Got: {said!r}"
    )
    assert named == sorted(set(named)), f"each line once, in order. Got: {said!r}"
    more = re.search(r"(\d+) more", said)
    if more:
        assert len(named) + int(more.group(1)) == 120, (
            f"invariant: {len(named)} lines named and {more.group(1)} more must make the 120 "
            f"lines of the matches. Got: {said!r}"
        )
    else:
        assert len(named) == 120, f"name every line, or how many more: got {said!r}"


def test_the_lines_of_several_matches_are_counted_like_read(workspace: Path) -> None:
    path = workspace / "odd.txt"
    data = "form\x0cfeed and line\u2028separator\nvalue\nother\nvalue\n".encode()
    path.write_bytes(data)
    tools = session(workspace)
    read(tools, "odd.txt")
    out = edit(tools, "odd.txt", old_text="value", new_text="v")
    refused(out, path, data, "edits[0]", "matches 2 times")
    assert "lines 2, 4" in text_of(out), (
        "invariant: the line numbers of several matches are read's line numbers: only \\n "
        "ends a line; a form feed or a \\u2028 stays part of its line (str.splitlines() splits "
        f"on them: count the \\n before each match instead). Got: {text_of(out)!r}"
    )


def test_an_edit_that_changes_nothing_is_refused_as_a_no_op(workspace: Path, app: Path) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    inode = app.stat().st_ino
    out = edit(tools, "app.py", old_text="result = 0", new_text="result = 0")
    refused(out, app, SOURCE.encode(), "edits[0]", "identical")
    assert app.stat().st_ino == inode
    # Equal texts are a no-op whether or not old_text occurs: say so, not "no match".
    out = edit(tools, "app.py", old_text="result = 7", new_text="result = 7")
    refused(out, app, SOURCE.encode(), "edits[0]", "identical")


@pytest.mark.parametrize(
    ("old_text", "new_text"),
    [("    return result", "  return result"), ("return result\n", "return result")],
    ids=["indentation-only", "trailing-newline-only"],
)
def test_an_edit_of_whitespace_alone_is_not_identical(
    workspace: Path, app: Path, old_text: str, new_text: str
) -> None:
    tools = session(workspace)
    read(tools, "app.py")
    out = edit(tools, "app.py", old_text=old_text, new_text=new_text)
    assert not out.is_error, (
        "invariant: old and new text are identical only when they are equal as given; text "
        "that differs in indentation or in a final newline is a real edit. Compare them "
        f"without strip() or any other normalisation of whitespace. Got: {text_of(out)!r}"
    )
    assert app.read_text() == SOURCE.replace(old_text, new_text)


# ---------------------------------------------------------------- line endings and BOM


def edited_bytes(workspace: Path, data: bytes, old_text: str, new_text: str) -> bytes:
    """Write ``data``, read it, apply one careful edit, and return the file's bytes."""
    path = workspace / "file.txt"
    path.write_bytes(data)
    tools = session(workspace)
    read(tools, "file.txt")
    out = edit(tools, "file.txt", old_text=old_text, new_text=new_text)
    assert not out.is_error, f"the edit must apply: {text_of(out)}"
    return path.read_bytes()


def test_crlf_files_match_lf_old_text_and_keep_their_endings(workspace: Path) -> None:
    crlf = b"alpha  \r\nbeta\r\ngamma\t\r\ndelta\r\n"
    assert edited_bytes(workspace, crlf, "beta\ngamma", "BETA\nGAMMA\nextra") == (
        b"alpha  \r\nBETA\r\nGAMMA\r\nextra\t\r\ndelta\r\n"
    ), "old_text with \\n matches; every line keeps CRLF; untouched bytes stay as they were"


def test_crlf_files_take_old_and_new_text_written_with_crlf_too(workspace: Path) -> None:
    crlf = b"alpha\r\nbeta\r\ngamma\r\n"
    assert edited_bytes(workspace, crlf, "beta\r\ngamma", "BETA\r\nGAMMA") == (
        b"alpha\r\nBETA\r\nGAMMA\r\n"
    ), (
        "in a CRLF file, old_text and new_text written with \\r\\n mean the same lines as "
        "with \\n: normalise both before applying, so that restoring CRLF never makes \\r\\r\\n"
    )


# A file with a BOM, the edit's old and new text, the bytes after it, and why.
BOM_CASES: dict[str, tuple[bytes, str, str, bytes, str]] = {
    "an-edit-past-line-1": (
        b"\xef\xbb\xbfname = 'caf\xc3\xa9'\r\nsize = 1\r\n",
        "size = 1",
        "size = 2",
        b"\xef\xbb\xbfname = 'caf\xc3\xa9'\r\nsize = 2\r\n",
        "the BOM and the line endings are kept",
    ),
    "an-edit-at-the-start": (
        b"\xef\xbb\xbfname = 'caf\xc3\xa9'\r\nsize = 1\r\n",
        "name = ",
        "title = ",
        b"\xef\xbb\xbftitle = 'caf\xc3\xa9'\r\nsize = 1\r\n",
        "the BOM is no part of the text: strip it before matching, so old_text at the very "
        "start of the file matches, and put it back in front when writing",
    ),
    "old-text-copied-from-read": (
        b"\xef\xbb\xbfimport os\nprint(os.name)\n",
        "\ufeffimport os",
        "import sys",
        b"\xef\xbb\xbfimport sys\nprint(os.name)\n",
        "read shows the BOM as U+FEFF at the start of line 1, and a model copies it: in a "
        "file with a BOM, drop a leading U+FEFF of old_text and new_text before matching, "
        "and keep the BOM in front",
    ),
    "both-texts-copied-from-read": (
        b"\xef\xbb\xbfimport os\nprint(os.name)\n",
        "\ufeffimport os",
        "\ufeffimport sys",
        b"\xef\xbb\xbfimport sys\nprint(os.name)\n",
        "a new_text that starts with U+FEFF in a file with a BOM brings no second BOM: drop "
        "its leading U+FEFF too (the BOM is put back in front once)",
    ),
}


@pytest.mark.parametrize("case", list(BOM_CASES))
def test_a_utf8_bom_is_kept(workspace: Path, case: str) -> None:
    data, old_text, new_text, expected, why = BOM_CASES[case]
    assert edited_bytes(workspace, data, old_text, new_text) == expected, why


@pytest.mark.parametrize("replace_all", [False, True])
def test_an_old_text_that_is_only_the_bom_is_refused_as_empty(
    workspace: Path, replace_all: bool
) -> None:
    path = workspace / "app.py"
    path.write_bytes(b"\xef\xbb\xbfab\n")
    tools = session(workspace)
    read(tools, "app.py")
    out = edit(tools, "app.py", old_text="\ufeff", new_text="\ufeff# ", replace_all=replace_all)
    refused(out, path, b"\xef\xbb\xbfab\n", "old_text must not be empty")


def test_without_a_bom_a_leading_u_feff_is_text_to_match(workspace: Path) -> None:
    path = workspace / "app.py"
    path.write_bytes(b"abc\n")
    tools = session(workspace)
    read(tools, "app.py")
    out = edit(tools, "app.py", old_text="\ufeffabc", new_text="x")
    refused(out, path, b"abc\n", "no match")


def test_a_file_with_mixed_endings_keeps_every_byte_outside_the_edit(workspace: Path) -> None:
    mixed = b"one\r\ntwo\nthree\r\n"
    assert edited_bytes(workspace, mixed, "two", "TWO") == b"one\r\nTWO\nthree\r\n", (
        "mixed endings: touch only the match"
    )
    copied = edited_bytes(workspace, mixed, "one\r\ntwo", "ONE\r\nTWO")
    assert copied == b"ONE\r\nTWO\nthree\r\n", (
        "in a file with mixed endings (not a CRLF file) the texts are matched and written as "
        "they are: an old_text copied with its \\r\\n matches, and a new_text keeps its "
        f"\\r\\n (normalise only in a CRLF file). Got {copied!r}"
    )


def test_a_file_without_any_newline_is_not_a_crlf_file(workspace: Path) -> None:
    assert edited_bytes(workspace, b"x = 1", "x = 1", "x = 1\ny = 2") == b"x = 1\ny = 2", (
        "invariant: a file without any line ending is not a CRLF file (it holds no \\r\\n): "
        "its text is edited as is, and the \\n of new_text is written as \\n, not turned "
        "into \\r\\n. Treat a file as CRLF only when it holds a \\r\\n and every \\n "
        "is part of one"
    )


# ---------------------------------------------------------------- the result


def test_a_file_that_is_not_utf8_is_refused_by_name(workspace: Path) -> None:
    path = workspace / "file.txt"
    data = b"ok = 1\n\xff\xfe = 2\n"
    path.write_bytes(data)
    tools = session(workspace)
    read_first = call_now(tools, "read", path="file.txt", limit=1)  # a valid line: read works
    assert not read_first.is_error, text_of(read_first)
    out = edit(tools, "file.txt", old_text="ok = 1", new_text="ok = 3")
    refused(out, path, data, "UTF-8", "file.txt")


def numbered_lines(out: ToolOutput) -> list[int]:
    """The line numbers the result shows, in order. Lines numbered one after the other are
    printed one after the other, as read prints them."""
    printed = text_of(out).splitlines()
    numbered = [(i, int(line.split("│")[0])) for i, line in enumerate(printed) if "│" in line]
    for (i, number), (j, following) in itertools.pairwise(numbered):
        if following == number + 1:
            assert j == i + 1, (
                f"lines {number} and {following} are shown, so they are printed next to each "
                f"other, numbered like read, with nothing in between: {text_of(out)!r}"
            )
    return [number for _, number in numbered]


def lines_file(workspace: Path, name: str, text: str) -> ToolRegistry:
    (workspace / name).write_text(text)
    tools = session(workspace)
    read(tools, name)
    return tools


SIXTY = "".join(f"line {n}\n" for n in range(1, 61))
TWENTY_NEW = "".join(f"new {n}\n" for n in range(1, 21))


def span(first: int, last: int) -> list[int]:
    return list(range(first, last + 1))


def test_replace_all_shows_each_multi_line_replacement_with_its_context_only(
    workspace: Path,
) -> None:
    text = SIXTY
    for number in (10, 30, 50):
        text = text.replace(f"line {number}\n", "MARK\n")
    tools = lines_file(workspace, "marks.txt", text)
    new = "first\nsecond\nthird\n"
    out = edit(tools, "marks.txt", old_text="MARK\n", new_text=new, replace_all=True)
    assert not out.is_error, text_of(out)
    assert (workspace / "marks.txt").read_text() == text.replace("MARK\n", new)
    # each replacement adds two lines: they land on lines 10-12, 32-34 and 54-56
    assert numbered_lines(out) == span(7, 15) + span(29, 37) + span(51, 59), (
        "invariant: the snippet shows every line of each replacement where it landed (earlier "
        "replacements that add lines move the later ones down), with 3 lines of context, and "
        "no other line; the new text's final newline ends its last line, it does not pull in "
        f"the next one. Track each replacement's position in the final text: {text_of(out)!r}"
    )


@pytest.mark.parametrize(
    ("edits", "expected", "why"),
    [
        (
            [
                {"old_text": "line 50", "new_text": "fifty\nfifty-b\nc"},
                {"old_text": "line 10\n", "new_text": "line 10\n" + TWENTY_NEW},
            ],
            span(7, 33) + span(67, 75),
            "the second edit (lines 10-30) inserts 20 lines above the first, whose three lines "
            "move from 50-52 to 70-72: all three are shown there",
        ),
        (
            [
                {"old_text": "line 50", "new_text": "fifty"},
                {"old_text": "line 49\n", "new_text": "line 49\n" + TWENTY_NEW},
            ],
            span(46, 73),
            "the second edit ends right where the first begins and inserts 20 lines: the "
            "first edit's line moves from 50 to 70",
        ),
        (
            [
                {"old_text": "line 50", "new_text": "fifty"},
                {
                    "old_text": "".join(f"line {n}\n" for n in range(51, 59)),
                    "new_text": "gone\n",
                },
            ],
            span(47, 53),
            "the second edit, right after the first, removes lines below it: the first edit "
            "stays on line 50",
        ),
    ],
    ids=["moved-down-by-a-later-edit", "later-edit-ends-where-it-begins", "later-edit-after-it"],
)
def test_the_result_shows_every_edit_of_a_batch_where_it_ended_up(
    workspace: Path, edits: list[dict[str, str]], expected: list[int], why: str
) -> None:
    tools = lines_file(workspace, "notes.txt", SIXTY)
    out = edit(tools, "notes.txt", edits=edits)
    assert not out.is_error, text_of(out)
    assert numbered_lines(out) == expected, (
        f"invariant: {why}. The snippet shows each edit's lines in the final text with 3 "
        "lines of context and no other line: move an earlier edit's region by exactly what "
        f"later edits inserted or removed before it: {text_of(out)!r}"
    )


def test_a_later_edit_may_match_across_an_earlier_edits_text(workspace: Path) -> None:
    tools = lines_file(workspace, "notes.txt", SIXTY)
    out = edit(
        tools,
        "notes.txt",
        edits=[
            {"old_text": "line 30\n", "new_text": "thirty\n"},
            {"old_text": "line 29\nthirty\nline 31", "new_text": "29 to 31"},
        ],
    )
    expected = SIXTY.replace("line 29\nline 30\nline 31", "29 to 31")
    assert not out.is_error and (workspace / "notes.txt").read_text() == expected, (
        "invariant: each edit applies to the text as the earlier edits left it, so an "
        "old_text may span an earlier edit's new text and the text around it (search the "
        "whole current text, never each piece apart). Got: " + text_of(out)
    )


def test_an_edit_inside_an_earlier_edits_text_does_not_move_it(workspace: Path) -> None:
    tools = lines_file(workspace, "notes.txt", SIXTY)
    out = edit(
        tools,
        "notes.txt",
        edits=[
            {"old_text": "line 50", "new_text": "fifty\n" + TWENTY_NEW + "end"},
            {"old_text": TWENTY_NEW, "new_text": "short\n"},
        ],
    )
    assert not out.is_error, text_of(out)
    shown = numbered_lines(out)
    assert set(span(47, 55)) <= set(shown) and min(shown) == 47, (
        "invariant: the second edit changes text inside the first one's new text (now lines "
        "50-52), which does not move where the first edit begins: the snippet starts 3 lines "
        f"above line 50 and shows lines 47-55: {text_of(out)!r}"
    )


def test_the_result_counts_a_leading_empty_line_and_shows_line_1(workspace: Path) -> None:
    text = "\n" + "".join(f"line {n}\n" for n in range(2, 61))
    tools = lines_file(workspace, "blank.txt", text)
    out = edit(
        tools,
        "blank.txt",
        edits=[
            {"old_text": "line 2\n", "new_text": "two\n"},
            {"old_text": "line 20\n", "new_text": "twenty\n"},
        ],
    )
    assert not out.is_error, text_of(out)
    assert numbered_lines(out) == span(1, 5) + span(17, 23), (
        "invariant: the snippet numbers lines like read, an empty first line included (it is "
        "line 1, and context reaches it), and shows 3 lines of context around each edit: "
        f"{text_of(out)!r}"
    )


@pytest.mark.parametrize(("deleted", "shown"), [(10, span(7, 13)), (1, span(1, 4))])
def test_a_deletion_shows_the_place_where_it_was_made(
    workspace: Path, deleted: int, shown: list[int]
) -> None:
    tools = lines_file(workspace, "sixty.txt", SIXTY)
    out = edit(tools, "sixty.txt", old_text=f"line {deleted}\n", new_text="")
    assert not out.is_error, text_of(out)
    assert numbered_lines(out) == shown, (
        f"a deletion leaves no line of its own: the result shows the line now where line "
        f"{deleted} was (numbered in the final text) with 3 lines of context on each side, "
        f"no other line: {text_of(out)!r}"
    )


def test_the_result_of_a_one_line_file_shows_one_line(workspace: Path) -> None:
    tools = lines_file(workspace, "one.txt", "x = 1\n")
    out = edit(tools, "one.txt", old_text="x = 1", new_text="x = 2")
    assert not out.is_error, text_of(out)
    assert numbered_lines(out) == [1], (
        "invariant: the final newline ends line 1, it does not start a line 2, also when the "
        f"file has a single line: {text_of(out)!r}"
    )


def test_the_result_numbers_lines_like_read_past_a_form_feed_and_a_line_separator(
    workspace: Path,
) -> None:
    text = "".join(f"line {n}\n" for n in range(1, 13))
    text = text.replace("line 2", "line\u2028two").replace("line 3", "line\x0cthree")
    tools = lines_file(workspace, "odd.txt", text)
    out = edit(
        tools,
        "odd.txt",
        edits=[
            {"old_text": "line 4\n", "new_text": "four\n"},
            {"old_text": "line 11\n", "new_text": "eleven\n"},
        ],
    )
    assert not out.is_error, text_of(out)
    shown = [line for line in text_of(out).split("\n") if "│" in line]
    assert shown == [
        "   1│ line 1",
        "   2│ line\u2028two",
        "   3│ line\x0cthree",
        "   4│ four",
        "   5│ line 5",
        "   6│ line 6",
        "   7│ line 7",
        "   8│ line 8",
        "   9│ line 9",
        "  10│ line 10",
        "  11│ eleven",
        "  12│ line 12",
    ], (
        "invariant: the snippet numbers lines like read: only \\n ends a line; a form feed "
        "or a \\u2028 stays part of its line (str.splitlines() splits on them: split on "
        f"\\n). Got: {shown!r}"
    )


def test_an_edit_that_adds_many_lines_applies(workspace: Path) -> None:
    tools = lines_file(workspace, "notes.txt", SIXTY)
    added = "".join(f"added {n}\n" for n in range(1, 101))
    out = edit(tools, "notes.txt", old_text="line 10\n", new_text="line 10\n" + added)
    assert not out.is_error, (
        "invariant: an edit whose region is long (100 new lines) applies like any other; "
        f"however the result shortens a long snippet, it must not fail: {text_of(out)!r}"
    )
    assert (workspace / "notes.txt").read_text() == SIXTY.replace("line 10\n", "line 10\n" + added)


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_the_result_shows_the_edited_region_where_the_edit_happened(
    workspace: Path, ending: str
) -> None:
    lines = [f"line {n}" for n in range(1, 61)]
    lines[2] = "value = 2"  # the new text already occurs near the top
    lines[49] = "value = 1"
    path = workspace / "config.py"
    # In a CRLF file too: where an edit landed is measured in the text it was applied to.
    path.write_bytes((ending.join(lines) + ending).encode())
    tools = session(workspace)
    read(tools, "config.py")
    out = edit(tools, "config.py", old_text="value = 1", new_text="value = 2")
    assert not out.is_error, text_of(out)
    shown = text_of(out)
    assert "  50│ value = 2" in shown, "the snippet shows the edited line, numbered like read"
    assert "  47│ line 47" in shown and "  53│ line 53" in shown, "with context around it"
    assert "   3│" not in shown, (
        "centred on where the edit landed, not on the first occurrence of the new text"
    )
    numbered = [line.split("│")[0].strip() for line in shown.splitlines() if "│" in line]
    assert numbered == [str(n) for n in range(47, 54)], (
        "the edited line with 3 lines of context on each side (in a CRLF file too: the "
        "places of the edits are offsets in the text they were applied to, so build the "
        f"snippet from that text, before the endings are restored). Got lines {numbered}"
    )
    out = edit(tools, "config.py", old_text="line 60", new_text="line sixty")
    numbered = [line.split("│")[0].strip() for line in text_of(out).splitlines() if "│" in line]
    assert numbered == [str(n) for n in range(57, 61)], (
        "at the end of the file the snippet stops at its last line: the final newline ends "
        "line 60, it does not start a line 61"
    )


# id: (lines turned into MARK, the later edit, the line "line fifty" lands on, a line also shown)
LATER_EDITS: dict[str, tuple[tuple[int, ...], dict[str, Any], int, str | None]] = {
    "one-insertion": (
        (),
        {"old_text": "line 10\n", "new_text": "line 10\n" + TWENTY_NEW},
        70,
        "  30│ new 20",
    ),
    "every-replacement": (
        (5, 10, 15),
        {"old_text": "MARK\n", "new_text": "MARK\n" + TWENTY_NEW[:30], "replace_all": True},
        65,
        None,
    ),
}


@pytest.mark.parametrize("later", list(LATER_EDITS))
def test_the_result_follows_an_edit_that_later_edits_moved(workspace: Path, later: str) -> None:
    marks, later_edit, lands, also_shown = LATER_EDITS[later]
    lines = [f"line {n}" for n in range(1, 61)]
    for number in marks:
        lines[number - 1] = "MARK"
    tools = lines_file(workspace, "notes.txt", "\n".join(lines) + "\n")
    out = edit(
        tools,
        "notes.txt",
        edits=[{"old_text": "line 50\n", "new_text": "line fifty\n"}, later_edit],
    )
    assert not out.is_error, text_of(out)
    shown = text_of(out)
    assert f"{lands:>4}│ line fifty" in shown, (
        "the first edit's line moved down by the lines the later edit inserted above it (a "
        "replace_all moves it once for every replacement above it, not only the first): the "
        f"snippet shows it where it is now, line {lands}: {shown!r}"
    )
    assert also_shown is None or also_shown in shown
