"""Lab 8.4 — edit applies a batch of exact replacements, all or nothing."""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab_helpers import (
    AbortsOnceLookedAt,
    assert_names_the_file_it_could_not_resolve,
    call,
    call_now,
    call_without_threads,
    end_or_release,
    fifo_target,
    opened_on_this_thread,
    play_fifo_writer,
    raise_task_failures,
    refers_to,
    resolving_fails_for,
    run,
    snapshot,
    text_of,
    watch_opens,
)
from picourse.abort import AbortController
from picourse.coding_tools import DEFAULT_MUTATION_QUEUE, EditDetails, create_coding_tools
from picourse.tool import ToolOutput
from queue_probe import QueueProbe, hold_lane

pytestmark = pytest.mark.lab8_4

SOURCE = "def greet(name):\n    return 'hello ' + name\n\nprint(greet('world'))\n"


def edit(workspace: Path, path: str = "app.py", **arguments: Any) -> ToolOutput:
    return call_now(create_coding_tools(workspace), "edit", path=path, **arguments)


@pytest.fixture
def app(workspace: Path) -> Path:
    path = workspace / "app.py"
    path.write_text(SOURCE)
    return path


def unchanged(app: Path, before: bytes, inode: int) -> None:
    assert app.read_bytes() == before, "a refused edit must leave the file byte for byte unchanged"
    assert app.stat().st_ino == inode, "a refused edit must not rewrite the file at all"


def test_a_single_edit_replaces_exactly_its_text(workspace: Path, app: Path) -> None:
    out = edit(workspace, old_text="'hello '", new_text="'hi, '")
    assert not out.is_error, f"a unique match must be replaced, got: {text_of(out)}"
    assert app.read_text() == SOURCE.replace("'hello '", "'hi, '")
    assert out.details == EditDetails(str(app), len(SOURCE), len(SOURCE) - 2, 1), (
        "details: path, UTF-8 bytes before and after, and the number of edits"
    )


def test_a_batch_applies_in_order_and_later_edits_see_earlier_ones(
    workspace: Path, app: Path
) -> None:
    out = edit(
        workspace,
        edits=[
            {"old_text": "def greet(name):", "new_text": "def welcome(name):"},
            {
                "old_text": "def welcome(name):\n",
                "new_text": "def welcome(name):\n    '''Say hi.'''\n",
            },
            {"old_text": "print(greet(", "new_text": "print(welcome("},
        ],
    )
    assert not out.is_error, f"edits[1] matches only after edits[0] is applied: {text_of(out)}"
    assert app.read_text() == (
        "def welcome(name):\n    '''Say hi.'''\n    return 'hello ' + name\n\n"
        "print(welcome('world'))\n"
    )
    assert out.details.edits == 3


@pytest.mark.parametrize("alone", [False, True], ids=["with-the-rest", "alone"])
def test_an_edit_that_restates_its_text_applies_with_the_rest(
    workspace: Path, app: Path, alone: bool
) -> None:
    same = "def greet(name):"
    edits = [{"old_text": same, "new_text": same}]
    if not alone:
        edits.append({"old_text": "'world'", "new_text": "'class'"})
    # Held open, the old file keeps its inode number: a new file can never be given it.
    with open(app, "rb") as old:
        inode = os.fstat(old.fileno()).st_ino
        out = edit(workspace, edits=edits)
        replaced = app.stat().st_ino != inode
    expected = SOURCE if alone else SOURCE.replace("'world'", "'class'")
    summary = "Applied 1 edit to app.py." if alone else "Applied 2 edits to app.py."
    assert not out.is_error and app.read_text() == expected and text_of(out) == summary, (
        "the plain edit applies every exact replacement in order, also one whose new_text "
        "equals its old_text, and also a batch that leaves the bytes as they were (refusing "
        "that as 'identical' is Lab 8.9's careful edit, with careful_edits=True only); it "
        f"counts as an applied edit: {summary!r}. Got: {text_of(out)!r}"
    )
    assert isinstance(out.details, EditDetails) and out.details.edits == len(edits), (
        f"EditDetails.edits counts every edit of the batch that applied, {len(edits)} here, "
        f"also one whose new_text equals its old_text. Got: {out.details}"
    )
    assert replaced, (
        "a batch that applies is written once through write_atomic (a new file renamed over "
        "the old one), also when it leaves the bytes as they were: the plain edit never "
        "skips the write (writing nothing for identical content is Lab 8.8's gate)"
    )


@pytest.mark.parametrize(
    ("same", "message"),
    [("goodbye", "no match"), ("greet", "matches 2 times")],
    ids=["no-match", "two-matches"],
)
def test_an_edit_that_restates_its_text_must_still_match_once(
    workspace: Path, app: Path, same: str, message: str
) -> None:
    before, inode = app.read_bytes(), app.stat().st_ino
    out = edit(
        workspace,
        edits=[
            {"old_text": same, "new_text": same},
            {"old_text": "'world'", "new_text": "'class'"},
        ],
    )
    assert out.is_error and "edits[0]" in text_of(out) and message in text_of(out), (
        "an edit whose new_text equals its old_text is still an edit: its old_text must "
        f"match exactly once like any other (never skip it), so this batch is refused with "
        f"'edits[0]' and {message!r}. Got: {text_of(out)!r}"
    )
    unchanged(app, before, inode)


@pytest.mark.parametrize(
    "new_text",
    ['print("a\\n")', 'pattern = r"\\d+\\s*"', 'path = "C:\\temp\\x"', "group \\1 and \\g<0>"],
    ids=["escaped-newline", "raw-regex", "windows-path", "group-references"],
)
def test_new_text_is_written_exactly_backslashes_included(workspace: Path, new_text: str) -> None:
    code = workspace / "code.py"
    code.write_text("x = 1\ny = 2\n")
    out = edit(workspace, path="code.py", old_text="x = 1", new_text=new_text)
    assert not out.is_error and code.read_text() == new_text + "\ny = 2\n", (
        "new_text is written byte for byte: a backslash, '\\1' or '\\g<0>' is text, not a "
        "replacement template (never re.sub with new_text as the replacement). "
        f"Got: {code.read_text()!r}"
    )


def test_an_empty_new_text_deletes(workspace: Path, app: Path) -> None:
    edit(workspace, old_text="\nprint(greet('world'))\n", new_text="")
    assert app.read_text() == "def greet(name):\n    return 'hello ' + name\n"


@pytest.mark.parametrize(
    ("old_text", "new_text"), [("\n\n", "\n"), ("    ", "\t")], ids=["blank-line", "indent"]
)
def test_an_old_text_of_whitespace_alone_is_an_edit_like_any_other(
    workspace: Path, app: Path, old_text: str, new_text: str
) -> None:
    out = edit(workspace, old_text=old_text, new_text=new_text)
    assert not out.is_error, (
        f"old_text {old_text!r} is not empty: only '' is refused (never judge it after "
        f"strip()); it occurs once and must be replaced. Got: {text_of(out)!r}"
    )
    assert app.read_text() == SOURCE.replace(old_text, new_text)


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ([], "edits must not be empty"),
        (
            [{"old_text": "def greet", "new_text": "def g"}, {"old_text": "", "new_text": "x"}],
            "edits[1]: old_text must not be empty",
        ),
        (
            [
                {"old_text": "def greet", "new_text": "def g"},
                {"old_text": "goodbye", "new_text": "x"},
            ],
            "edits[1]",
        ),
        ([{"old_text": "name", "new_text": "who"}], "edits[0]"),
        (
            [
                {"old_text": "goodbye", "new_text": "x"},
                {"old_text": "def greet", "new_text": "def g"},
            ],
            "edits[0]",
        ),
        (
            [
                {"old_text": "def greet", "new_text": "def g"},
                {"old_text": "def greet", "new_text": "def g"},
            ],
            "edits[1]",
        ),
    ],
    ids=[
        "empty-batch",
        "empty-old-text",
        "no-match",
        "several-matches",
        "first-of-two-fails",
        "the-same-edit-twice",
    ],
)
def test_a_bad_batch_is_refused_whole(
    workspace: Path, app: Path, edits: list[dict[str, str]], message: str
) -> None:
    before, inode = app.read_bytes(), app.stat().st_ino
    out = edit(workspace, edits=edits)
    assert out.is_error, "a batch with a bad edit must be an error result"
    others = [f"edits[{i}]" for i in range(len(edits)) if not message.startswith(f"edits[{i}]")]
    assert message in text_of(out) and not any(o in text_of(out) for o in others), (
        f"the error must name the failing edit, {message!r}, by its own position in the "
        f"batch (and no other edit). Got: {text_of(out)!r}"
    )
    unchanged(app, before, inode)


@pytest.mark.parametrize(
    ("path", "edits", "message"),
    [
        ("missing.py", [], "edits must not be empty"),
        (
            "missing.py",
            [{"old_text": "def greet", "new_text": "def g"}, {"old_text": "", "new_text": "x"}],
            "edits[1]: old_text must not be empty",
        ),
        (
            "app.py",
            [{"old_text": "goodbye", "new_text": "x"}, {"old_text": "", "new_text": "x"}],
            "edits[1]: old_text must not be empty",
        ),
        ("../app.py", [], "edits must not be empty"),
        ("../app.py", [{"old_text": "", "new_text": "x"}], "edits[0]: old_text must not be empty"),
    ],
    ids=[
        "empty-batch-missing-file",
        "empty-old-text-missing-file",
        "empty-old-text-after-no-match",
        "empty-batch-path-outside",
        "empty-old-text-path-outside",
    ],
)
def test_an_empty_batch_or_old_text_is_refused_before_the_file_is_read(
    workspace: Path, app: Path, path: str, edits: list[dict[str, str]], message: str
) -> None:
    before, inode = app.read_bytes(), app.stat().st_ino
    out = call_now(create_coding_tools(workspace), "edit", path=path, edits=edits)
    assert out.is_error and message in text_of(out), (
        f"invariant: an empty batch and an empty old_text are refused first, before the path "
        f"is checked, the file opened or any edit tried: the error must say {message!r} "
        f"whatever the path, the file or whether it exists. Got: {text_of(out)!r}"
    )
    unchanged(app, before, inode)
    assert not (workspace / "missing.py").exists()


def test_new_text_is_written_byte_for_byte_with_its_own_line_endings(
    workspace: Path, app: Path
) -> None:
    before = app.read_bytes()
    out = edit(workspace, old_text="def greet", new_text="# a\r\n# b\r\ndef greet")
    assert not out.is_error and app.read_bytes() == before.replace(
        b"def greet", b"# a\r\n# b\r\ndef greet", 1
    ), (
        "invariant: new_text is written byte for byte, its \\r\\n too: the plain edit "
        f"normalises no line ending. Got {app.read_bytes()!r}"
    )
    dos = workspace / "dos.txt"
    dos.write_bytes(b"one\r\ntwo\r\n")
    out = edit(workspace, path="dos.txt", old_text="two", new_text="2\nII")
    assert not out.is_error and dos.read_bytes() == b"one\r\n2\nII\r\n", (
        "invariant: new_text is written byte for byte, its \\n too, also into a file whose "
        "lines end with \\r\\n: the plain edit never adapts new_text to the file's line "
        f"endings (that is 8.9's careful edit). Got {dos.read_bytes()!r}"
    )


def test_an_edit_of_a_file_in_a_missing_folder_creates_nothing(workspace: Path) -> None:
    out = edit(workspace, path="newdir/app.py", old_text="x", new_text="y")
    assert out.is_error and "not found" in text_of(out), text_of(out)
    assert not (workspace / "newdir").exists(), (
        "invariant: a refused edit changes nothing, not even a folder: lock the folder of a "
        "file that exists (the missing file is refused first), never create one to lock"
    )


def test_no_match_and_several_matches_say_which(workspace: Path, app: Path) -> None:
    out = edit(workspace, old_text="goodbye", new_text="x")
    assert "edits[0]" in text_of(out) and "no match" in text_of(out)
    out = edit(workspace, old_text="greet", new_text="x")
    assert "edits[0]" in text_of(out) and "matches 2 times" in text_of(out), (
        "more than one match must be refused with the count"
    )


@pytest.mark.parametrize(
    ("content", "count"),
    [("xaaax\n", 2), ("xaaaax\n", 3), ("aa-aa-aa\n", 3), ("aa-aa-aa-aa\n", 4)],
    ids=["overlapping-2", "overlapping-3", "apart-3", "apart-4"],
)
def test_every_occurrence_is_counted(workspace: Path, content: str, count: int) -> None:
    (workspace / "app.py").write_text(content)
    before = (workspace / "app.py").read_bytes()
    out = edit(workspace, old_text="aa", new_text="b")
    assert out.is_error and f"matches {count} times" in text_of(out), (
        f"'aa' occurs {count} times in {content!r}, overlapping ones included: count them all "
        "(find again from one past the last match); replacing the first would be a guess"
    )
    assert (workspace / "app.py").read_bytes() == before


def test_giving_edits_and_old_text_together_is_an_error(workspace: Path, app: Path) -> None:
    assert not edit(workspace, old_text="'world'", new_text="'class'").is_error
    before, inode = app.read_bytes(), app.stat().st_ino
    out = edit(
        workspace, old_text="greet", new_text="x", edits=[{"old_text": "name", "new_text": "y"}]
    )
    assert out.is_error and "not both" in text_of(out)
    unchanged(app, before, inode)


def test_edit_commits_through_an_atomic_rename(workspace: Path, app: Path) -> None:
    os.link(app, workspace / "witness.py")
    edit(workspace, old_text="'hello '", new_text="'hi '")
    assert (workspace / "witness.py").read_text() == SOURCE, (
        "edit wrote in place: commit through write_atomic (temp file + rename)"
    )
    assert sorted(p.name for p in workspace.iterdir()) == ["app.py", "witness.py"], (
        "no temp file may be left behind"
    )


@pytest.mark.parametrize(
    "content",
    [
        b"first\r\nsecond \xc3\xa9\r\nthird\r\n",
        b"first\nsecond\nthird",
        b"first\nsecond  \t\n\n\n",
        b"\xef\xbb\xbffirst\n\tsecond\x0c\r",
    ],
    ids=["crlf-endings", "no-final-newline", "blank-lines-and-spaces-at-the-end", "bom-tab-cr"],
)
def test_untouched_bytes_stay_exactly_as_they_were(workspace: Path, content: bytes) -> None:
    path = workspace / "app.py"
    path.write_bytes(content)
    out = edit(workspace, old_text="second", new_text="2nd")
    assert not out.is_error, text_of(out)
    assert path.read_bytes() == content.replace(b"second", b"2nd"), (
        "invariant: edit changes its matches and nothing else: no line endings converted, no "
        "final newline added or trailing space stripped, no byte order mark dropped (read "
        "bytes, decode UTF-8 yourself; text mode turns \\r\\n into \\n)"
    )


@pytest.mark.parametrize(
    "near_miss",
    [
        "  return 'hello ' + name  ",
        "\nprint(greet('world'))\n\n",
        "def greet(name):\n  return",
        "DEF GREET(name)",
        "def greet(name):\r\n",
        "return 'hello '  + name",
    ],
    ids=["spaces-around", "newline-more", "other-indent", "case", "crlf-for-lf", "space-inside"],
)
def test_a_near_miss_is_no_match(workspace: Path, app: Path, near_miss: str) -> None:
    before, inode = app.read_bytes(), app.stat().st_ino
    out = edit(workspace, old_text=near_miss, new_text="x")
    assert out.is_error and "no match" in text_of(out), (
        f"invariant: old_text matches exactly or not at all. {near_miss!r} occurs nowhere in "
        "the file, so the edit says 'no match': no stripping, no case folding, no loose "
        f"whitespace or line endings (the model reads the file again). Got: {text_of(out)!r}"
    )
    unchanged(app, before, inode)


@pytest.mark.parametrize(
    ("in_file", "in_old_text"),
    [("cafe\u0301", "caf\u00e9"), ("caf\u00e9", "cafe\u0301")],
    ids=["file-decomposed", "file-composed"],
)
def test_another_unicode_form_is_no_match(workspace: Path, in_file: str, in_old_text: str) -> None:
    menu = workspace / "menu.txt"
    menu.write_text(f"{in_file} au lait\n")  # decomposed is how macOS names files
    before, inode = menu.read_bytes(), menu.stat().st_ino
    out = edit(workspace, path="menu.txt", old_text=in_old_text, new_text="tea")
    assert out.is_error and "no match" in text_of(out), (
        f"invariant: old_text matches exactly or not at all: {in_old_text!r} occurs nowhere "
        f"in a file that holds {in_file!r} (the other Unicode form), so the edit says 'no "
        "match': no Unicode normalisation of the file or of old_text (the model reads the "
        f"file again). Got: {text_of(out)!r}"
    )
    unchanged(menu, before, inode)


def test_an_edit_of_an_empty_file_is_no_match_like_any_other(workspace: Path) -> None:
    (workspace / "empty.txt").write_bytes(b"")
    out = edit(workspace, path="empty.txt", old_text="x", new_text="y")
    said = text_of(out)
    assert out.is_error and "edits[0]" in said and "no match" in said, (
        "an empty file holds no match for old_text like any other file: `edits[0]: no match "
        f"for old_text in empty.txt`, never a message of its own. Got: {said!r}"
    )
    assert (workspace / "empty.txt").read_bytes() == b""


def test_lf_text_is_no_match_in_a_crlf_file(workspace: Path) -> None:
    dos = workspace / "dos.txt"
    dos.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    before, inode = dos.read_bytes(), dos.stat().st_ino
    out = edit(workspace, path="dos.txt", old_text="one\ntwo", new_text="ONE\nTWO")
    assert out.is_error and "no match" in text_of(out), (
        "invariant: old_text matches exactly or not at all: 'one\\ntwo' occurs nowhere in a "
        "file whose lines end with \\r\\n, so the edit says 'no match' (never try again "
        "with other line endings: matching them loosely is 8.9's careful edit). Got: "
        f"{text_of(out)!r}"
    )
    unchanged(dos, before, inode)


def test_a_missing_file_is_an_error_that_suggests_write(workspace: Path) -> None:
    out = edit(workspace, old_text="a", new_text="b")
    assert out.is_error and "not found" in text_of(out).lower()
    assert "write" in text_of(out), (
        "a missing file is an error that points the model to the write tool, which creates "
        "files: describe_os_error(path, error, action='edit') words it so"
    )
    assert not (workspace / "app.py").exists(), "a failed edit must not create the file"


def test_edit_refuses_to_leave_the_workspace(workspace: Path, outside: Path) -> None:
    os.symlink(outside / "secret.txt", workspace / "link.txt")
    before = snapshot(outside)
    registry = create_coding_tools(workspace)
    for path in ("../outside/secret.txt", "link.txt", str(outside / "secret.txt")):
        out = call_now(registry, "edit", path=path, old_text="TOP", new_text="NO")
        assert out.is_error and "escapes the workspace" in text_of(out), (
            f"edit must use the workspace resolver and refuse {path!r}"
        )
    assert snapshot(outside) == before, "nothing outside the workspace may change"


def test_a_path_that_changes_while_it_is_resolved_is_an_error_result_naming_it(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = app.read_bytes()
    resolving_fails_for(monkeypatch, "app.py")  # swapped after the workspace check
    out = edit(workspace, old_text="'hello '", new_text="'hi '")
    message = text_of(out)
    if not out.is_error:  # this edit never asked os.path.realpath about app.py
        assert app.read_text() == SOURCE.replace("'hello '", "'hi '"), message
        return
    assert_names_the_file_it_could_not_resolve(out, "app.py", workspace)
    assert app.read_bytes() == before, "an edit that failed changes nothing"


@pytest.mark.parametrize("name", ["app.py", "alias.py"], ids=["file", "symlink"])
def test_edit_runs_in_the_default_queue_even_when_it_fails(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    if name != app.name:
        (workspace / name).symlink_to(app.name)
    probe = QueueProbe().install(monkeypatch)
    edit(workspace, path=name, old_text="'world'", new_text="'you'")
    edit(workspace, path=name, old_text="not there", new_text="x")
    assert [(id(q), k) for q, k in probe.calls] == [
        (id(DEFAULT_MUTATION_QUEUE), os.path.realpath(app))
    ] * 2, (
        "every edit that passed path resolution must run in DEFAULT_MUTATION_QUEUE, keyed by "
        f"canonical_key(path): an edit of {name!r} and a write of {app.name!r} change one file "
        "and must take one lane"
    )


def test_details_count_utf8_bytes(workspace: Path) -> None:
    path = workspace / "app.py"
    path.write_text("naïve café ✓\n", encoding="utf-8")
    out = edit(workspace, old_text="café ✓", new_text="thé ✗✗")
    assert not out.is_error, text_of(out)
    assert path.read_text(encoding="utf-8") == "naïve thé ✗✗\n"
    assert out.details == EditDetails(str(path), 17, 19, 1), (
        "invariant: old_bytes and new_bytes are UTF-8 byte counts of the whole file before "
        "and after (len(data) of the bytes, not len(text) of the str)"
    )


@pytest.mark.parametrize("old_text", ["name", "goodbye"], ids=["would-apply", "would-fail"])
@pytest.mark.parametrize(
    "content", [b"name = '\xff\xfe'\n", b"name = 'caf\xc3"], ids=["bad-bytes", "cut-at-the-end"]
)
def test_invalid_utf8_is_refused_and_the_file_is_unchanged(
    workspace: Path, content: bytes, old_text: str
) -> None:
    path = workspace / "app.py"
    path.write_bytes(content)
    inode = path.stat().st_ino
    out = edit(workspace, old_text=old_text, new_text="title")
    assert out.is_error and "UTF-8" in text_of(out) and "no match" not in text_of(out), (
        "a file that is not valid UTF-8 text (also one that ends inside a character) must be "
        "refused with an error that says UTF-8, found while reading, before any edit is "
        f"applied (so also when the batch would not match). Got: {text_of(out)!r}"
    )
    unchanged(path, content, inode)


def test_a_bad_byte_past_the_first_mebibyte_is_refused_too(workspace: Path) -> None:
    path = workspace / "big.txt"
    data = bytearray(b"HELLO\n" + b"x" * (2 * 2**20))
    data[3 * 2**19] = 0xFF  # at 1.5 MiB: in the second chunk of any reader of 1 MiB chunks
    path.write_bytes(bytes(data))
    inode = path.stat().st_ino
    out = edit(workspace, path="big.txt", old_text="HELLO", new_text="HI")
    assert out.is_error and "UTF-8" in text_of(out), (
        "invariant: the whole file must be valid UTF-8, not only its first chunk: feed every "
        "chunk to the incremental decoder and finish it (final=True) at the end. Got: "
        f"{text_of(out)!r}"
    )
    unchanged(path, bytes(data), inode)


@pytest.mark.parametrize("earlier", ["changes", "creates"])
def test_edit_reads_the_file_inside_its_lane(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch, earlier: str
) -> None:
    if earlier == "creates":
        app.unlink()  # the write queued before the edit creates it
    probe = QueueProbe().install(monkeypatch)

    async def scenario() -> ToolOutput:
        gate = asyncio.Event()

        async def earlier_write() -> None:  # an operation queued before the edit
            await gate.wait()
            app.write_text(SOURCE.replace("'hello '", "'hey '"))

        holding = await hold_lane(DEFAULT_MUTATION_QUEUE, os.path.realpath(app), earlier_write)
        entered = probe.arm()
        editing = asyncio.create_task(
            call(
                create_coding_tools(workspace),
                "edit",
                {"path": "app.py", "old_text": "'hey '", "new_text": "'hi '"},
            )
        )
        waiting = asyncio.create_task(entered.wait())
        await asyncio.wait({editing, waiting}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        raise_task_failures(editing)
        assert entered.is_set(), (
            "edit must run inside DEFAULT_MUTATION_QUEUE.run and look at the file only there: "
            f"an operation queued earlier {earlier} it first"
            + (f". Got: {text_of(editing.result())!r}" if editing.done() else "")
        )
        gate.set()
        await holding
        return await editing

    out = run(scenario())
    assert not out.is_error, (
        "invariant: edit reads the file inside its queued operation, after every earlier "
        "operation on the file has finished (whether it exists, too); reading before "
        f"MutationQueue.run edits a stale copy and loses the earlier change. Got: {text_of(out)}"
    )
    assert app.read_text() == SOURCE.replace("'hello '", "'hi '")


def test_edit_does_its_file_work_in_a_worker_thread(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opens = watch_opens(monkeypatch)
    out = edit(workspace, old_text="'world'", new_text="'class'")
    assert not out.is_error, text_of(out)
    assert any(name.endswith("app.py") for name, _ in opens), (
        "edit must open app.py by name (the test sees every open by name)"
    )
    on_the_loop = opened_on_this_thread(opens, workspace)
    assert not on_the_loop, (
        "invariant: edit does its file work in a worker thread (threads.in_thread), never "
        "on the event loop's thread: opening and reading the file and write_atomic all "
        "block, and write_atomic waits for the folder's lock while a writer in another "
        "event loop or process holds it; meanwhile every other task of the loop would "
        f"stop. Opened on the loop's thread: {on_the_loop}"
    )


def test_edit_still_edits_when_no_thread_can_be_started(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = {"path": "app.py", "old_text": "'world'", "new_text": "'class'"}
    out = call_without_threads(monkeypatch, create_coding_tools(workspace), "edit", **arguments)
    assert not out.is_error and app.read_text() == SOURCE.replace("'world'", "'class'"), (
        "when no thread can be started, edit still edits: run its file work through "
        f"threads.in_thread, which runs it right there then. Got: {text_of(out)!r}"
    )


def test_each_edit_reads_the_file_as_it_is_now(workspace: Path) -> None:
    path = workspace / "conf.py"
    path.write_text("mode = 'fast'\n")
    stamp = path.stat().st_mtime_ns
    missed = edit(workspace, path="conf.py", old_text="'calm'", new_text="'done'")
    assert missed.is_error, "'calm' is not in the file yet: no match"
    with open(path, "r+") as same_file:  # same inode, same size, the mtime put back
        same_file.write("mode = 'calm'\n")
    os.utime(path, ns=(stamp, stamp))
    out = edit(workspace, path="conf.py", old_text="'calm'", new_text="'done'")
    assert not out.is_error and path.read_text() == "mode = 'done'\n", (
        "invariant: each edit reads the file as it is now, inside its lane: never from a copy "
        "kept by size and mtime (a change within one timestamp tick, or an mtime put back, "
        f"keeps both). Got: {text_of(out)!r}, the file: {path.read_text()!r}"
    )


def test_concurrent_edits_of_one_file_all_land(workspace: Path) -> None:
    path = workspace / "app.py"
    path.write_text("".join(f"line {n}\n" for n in range(20)))
    registry = create_coding_tools(workspace)

    async def scenario() -> list[ToolOutput]:
        return await asyncio.gather(
            *(
                call(
                    registry,
                    "edit",
                    {"path": "app.py", "old_text": f"line {n}\n", "new_text": f"LINE {n}\n"},
                )
                for n in range(20)
            )
        )

    outputs = run(scenario())
    assert not any(out.is_error for out in outputs), [text_of(o) for o in outputs if o.is_error]
    assert path.read_text() == "".join(f"LINE {n}\n" for n in range(20)), (
        "invariant: an edit that reports success is never lost: read, apply and write inside "
        "one queued operation, so concurrent edits of one file apply one after another"
    )


@pytest.mark.parametrize(
    ("old_text", "empty"),
    [("'hello '", False), ("not in the file", False), ("'hello '", True)],
    ids=["applicable-batch", "failing-batch", "empty-file"],
)
def test_an_aborted_edit_changes_nothing(
    workspace: Path, app: Path, old_text: str, empty: bool
) -> None:
    if empty:
        app.write_bytes(b"")
    controller = AbortController()
    controller.abort("user pressed stop")
    before, inode = app.read_bytes(), app.stat().st_ino
    tools = create_coding_tools(workspace)
    out = run(
        call(
            tools,
            "edit",
            {"path": "app.py", "old_text": old_text, "new_text": "'hi '"},
            signal=controller.signal,
        )
    )
    assert out.is_error and "aborted" in text_of(out), (
        "invariant: an edit whose abort signal has fired says 'aborted' and writes nothing, "
        "also when its batch would have failed or the file is empty: check signal.aborted "
        "before and while reading (before the batch is applied) and again before write_atomic"
    )
    unchanged(app, before, inode)


@pytest.mark.parametrize("batch", ["applies", "would-fail"])
@pytest.mark.parametrize("size", ["one-chunk", "many-chunks"])
def test_an_abort_that_fires_after_the_first_check_still_stops_the_edit(
    workspace: Path, size: str, batch: str
) -> None:
    # Many chunks: an edit that reads in chunks looks at the signal again while it reads.
    # One chunk: the read is over without another look, so the look before the batch (or,
    # for a batch that applies, the one right before write_atomic) must see the abort. A
    # batch that would fail must not hide the abort behind its "no match".
    lines = 120_000 if size == "many-chunks" else 0
    old_text = "'hello '" if batch == "applies" else "not in the file"
    body = "".join(f"line {n:07d} of a long file\n" for n in range(lines))
    path = workspace / "app.py"
    path.write_text(SOURCE + body)
    before, inode = path.read_bytes(), path.stat().st_ino
    out = run(
        call(
            create_coding_tools(workspace),
            "edit",
            {"path": "app.py", "old_text": old_text, "new_text": "'hi '"},
            signal=AbortsOnceLookedAt(),
        )
    )
    said = text_of(out)
    assert out.is_error and "aborted" in said and "app.py" in said and "no match" not in said, (
        "invariant: an abort that fires after edit first checked the signal (while it reads "
        "or applies the batch) still stops it: check the signal again while reading, before "
        "the batch is applied and right before write_atomic, and say 'aborted' and which file "
        f"is unchanged. Got: {said[:300]!r}"
    )
    unchanged(path, before, inode)


def test_an_edit_that_says_aborted_has_written_nothing_whenever_the_abort_comes(
    workspace: Path,
) -> None:
    # The abort comes right after the signal's first look, then right after its second,
    # and so on, until an edit ends without seeing it (the abort came after its last look).
    path = workspace / "app.py"
    for looks in range(1, 100):
        path.write_text(SOURCE)
        before, inode = path.read_bytes(), path.stat().st_ino
        arguments = {"path": "app.py", "old_text": "'hello '", "new_text": "'hi '"}
        signal = AbortsOnceLookedAt(looks)
        out = run(call(create_coding_tools(workspace), "edit", arguments, signal=signal))
        if "aborted" not in text_of(out):
            assert not out.is_error and path.read_bytes() == before.replace(b"'hello '", b"'hi '")
            break
        assert out.is_error and path.read_bytes() == before, (
            f"the abort came right after the signal's look number {looks}; the edit said "
            "'aborted' but the file was written all the same: look at the signal right before "
            "write_atomic, never after it (an edit that says aborted has written nothing). "
            f"Got: {text_of(out)[:200]!r}"
        )
        unchanged(path, before, inode)


EDIT_FIFO_WAIT = (
    "edit blocked on a FIFO with no writer: open with O_NONBLOCK and refuse anything but a "
    "regular file (os.fstat, stat.S_ISREG); files.open_existing does both"
)


@pytest.mark.parametrize("link", [None, "app.py"], ids=["fifo", "symlink-to-fifo"])
def test_a_fifo_is_refused_without_blocking(workspace: Path, link: str | None) -> None:
    fifo, name = fifo_target(workspace, link)
    tools = create_coding_tools(workspace)

    async def scenario() -> ToolOutput:
        editing = asyncio.create_task(
            call(tools, "edit", {"path": name, "old_text": "a", "new_text": "b"})
        )
        return await end_or_release(
            editing, lambda: play_fifo_writer(fifo), within=5, failure=EDIT_FIFO_WAIT
        )

    out = run(scenario(), timeout=15)
    assert out.is_error and "regular file" in text_of(out), (
        "invariant: edit changes only regular files; a FIFO is an error result that says "
        "'regular file'"
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO must still be there"


@pytest.mark.challenge
def test_edits_from_two_event_loops_are_never_lost(workspace: Path) -> None:
    # Each thread runs its own event loop, as two agents in one process would: the queue
    # orders operations inside one loop only, so the file itself must be locked
    # (files.directory_lock) around read, check and rename.
    path = workspace / "app.py"
    rounds = 15
    path.write_text("".join(f"a{n}\nb{n}\n" for n in range(rounds)))
    registry = create_coding_tools(workspace)
    failures: list[str] = []
    crashes: list[BaseException] = []

    def agent(prefix: str) -> None:
        try:
            edit_all(prefix)
        except BaseException as error:  # noqa: BLE001 (re-raised in the test thread)
            crashes.append(error)

    def edit_all(prefix: str) -> None:
        async def edits() -> None:
            for n in range(rounds):
                out = await call(
                    registry,
                    "edit",
                    {"path": "app.py", "old_text": f"{prefix}{n}\n", "new_text": f"{prefix}{n}!\n"},
                )
                if out.is_error:
                    failures.append(text_of(out))

        run(edits(), timeout=60)

    threads = [threading.Thread(target=agent, args=(prefix,)) for prefix in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    if crashes:
        raise crashes[0]
    assert not failures, failures[:3]
    text = path.read_text()
    lost = [line for line in text.splitlines() if not line.endswith("!")]
    assert not lost, (
        f"{len(lost)} edits reported success and were then lost (e.g. {lost[:3]}): lock the "
        "directory around read, check and rename"
    )


@pytest.mark.challenge
def test_an_edit_through_a_link_locks_the_folder_of_the_real_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "a").mkdir()
    (workspace / "b").mkdir()
    real = workspace / "a" / "real.txt"
    real.write_text("value: one\n")
    (workspace / "b" / "link.txt").symlink_to(os.path.join("..", "a", "real.txt"))
    folder = os.stat(workspace / "a")
    # The edit found a/'s lock held (files.directory_lock), or ended: a wrong edit, or a
    # stub, fails at once instead of after the wait.
    settled = threading.Event()
    real_flock = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        try:
            real_flock(fd, operation)
        except BlockingIOError:
            if refers_to(fd, folder):
                settled.set()
            raise

    monkeypatch.setattr(fcntl, "flock", flock)
    results: list[ToolOutput] = []
    crashes: list[BaseException] = []

    def edit_through_the_link() -> None:
        try:
            results.append(edit(workspace, path="b/link.txt", old_text="one", new_text="two"))
        except BaseException as error:  # noqa: BLE001 (re-raised in the test thread)
            crashes.append(error)
        finally:
            settled.set()

    # Another process's writer holds a/'s lock; the edit runs in a loop of its own meanwhile.
    gate = os.open(workspace / "a", os.O_RDONLY)
    try:
        real_flock(gate, fcntl.LOCK_EX)
        editor = threading.Thread(target=edit_through_the_link)
        editor.start()
        settled.wait(10)  # files.directory_lock retries without blocking: its wait is seen
        if crashes:
            raise crashes[0]
        assert not results, (
            "the edit finished while another writer held the lock of the folder of the file "
            f"it changes: {results and text_of(results[0])!r}"
        )
        (workspace / "a" / "other.tmp").write_text("value: three\n")
        os.replace(workspace / "a" / "other.tmp", real)  # that writer's change
    finally:
        os.close(gate)  # releases the lock
    editor.join(60)
    if crashes:
        raise crashes[0]
    assert real.read_text() == "value: three\n", (
        "invariant: an edit holds the lock of the folder of the file it really changes (the "
        "folder of its real path, as write_atomic locks it) from its read to its rename; "
        "through a symlink, the link's folder is another folder, so another writer's change "
        f"landed between the edit's read and its rename and was lost. Now: {real.read_text()!r}"
    )


def test_an_old_text_copied_with_the_byte_order_mark_matches(workspace: Path) -> None:
    path = workspace / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfhello\nworld\n")  # read shows line 1 as '\ufeffhello'
    out = edit(workspace, path="bom.txt", old_text="\ufeffhello", new_text="\ufeffhi")
    assert not out.is_error and path.read_bytes() == b"\xef\xbb\xbfhi\nworld\n", (
        "matches are exact on the file's bytes: a byte order mark is the character U+FEFF, "
        "as read shows it, so an old_text copied from line 1 with it must match (never "
        f"decode with 'utf-8-sig', which hides it). Got: {text_of(out)!r}"
    )


def test_an_edit_holds_the_folder_lock_from_its_read_to_its_rename(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each time a descriptor of app.py's folder is closed or unlocked between the edit's
    # first lock of that folder and its rename onto app.py, the test tries the lock itself:
    # if it gets it, a writer in another loop or process could have changed app.py in
    # that gap, and the edit's rename would then lose that change.
    folder = os.stat(workspace)
    real_flock, real_close, real_replace = fcntl.flock, os.close, os.replace
    window = {"locked": False, "renamed": False}
    gaps: list[str] = []

    def lock_is_free() -> bool:
        probe = os.open(workspace, os.O_RDONLY)
        try:
            real_flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            real_close(probe)  # releases the lock if the probe got it
        return True

    def released(how: str) -> None:
        if window["locked"] and not window["renamed"] and lock_is_free():
            gaps.append(how)

    def flock(fd: int, operation: int) -> None:
        real_flock(fd, operation)
        if refers_to(fd, folder):
            if operation & fcntl.LOCK_UN:
                released("flock(LOCK_UN)")
            elif operation & fcntl.LOCK_EX:
                window["locked"] = True

    def close(fd: int) -> None:
        folder_fd = refers_to(fd, folder)
        real_close(fd)
        if folder_fd:
            released("os.close")

    def replace(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        real_replace(source, target, *args, **kwargs)
        if os.fspath(target) == str(app):
            window["renamed"] = True

    monkeypatch.setattr(fcntl, "flock", flock)
    monkeypatch.setattr(os, "close", close)
    monkeypatch.setattr(os, "replace", replace)
    out = edit(workspace, old_text="'hello '", new_text="'hi '")
    assert not out.is_error and window["locked"] and window["renamed"], text_of(out)
    assert not gaps, (
        "invariant: an edit holds the lock of the file's folder (files.directory_lock, the one "
        "write_atomic takes) from its read to its rename, in one `with` around read, check "
        "and write_atomic: never release it after reading and let write_atomic take it "
        "again, or a writer in another event loop or process can change the file in that "
        f"gap and the edit's rename loses its change. The lock was free after: {gaps}"
    )


def test_a_file_of_several_megabytes_is_edited_whole(workspace: Path) -> None:
    path = workspace / "app.py"
    body = "".join(f"line {n:07d} of a long generated file\n" for n in range(80_000))  # 3 MiB
    path.write_text(body + "THE END\n")
    out = edit(workspace, old_text="THE END\n", new_text="the end\n")
    assert not out.is_error, f"a large file is read whole (in chunks, if you like): {text_of(out)}"
    assert path.read_text() == body + "the end\n", (
        "every byte of a large file must survive an edit: when reading in chunks, add up "
        "what each read returned"
    )


def test_a_character_split_between_two_chunks_is_still_valid_utf8(workspace: Path) -> None:
    path = workspace / "app.py"
    # 3-byte characters only: no power-of-two chunk size ends on a character boundary.
    data = ("€" * 1_048_576 + "THE END\n").encode()
    path.write_bytes(data)
    out = edit(workspace, old_text="THE END", new_text="the end")
    assert not out.is_error, (
        "invariant: a valid UTF-8 file is accepted whatever the chunk size; a character may "
        "straddle two chunks, so decode with an incremental decoder (or once, at the end), "
        f"never each chunk on its own. Got: {text_of(out)}"
    )
    assert path.read_bytes() == data.replace(b"THE END", b"the end")


def _app_in_a_folder(workspace: Path) -> str:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text(SOURCE)
    return "src/app.py"


def _app_by_a_loose_name(workspace: Path) -> str:
    _app_in_a_folder(workspace)
    return "./src//app.py"  # named as given, not as src/app.py


def _missing(workspace: Path) -> str:
    return "app.py"


def _not_utf8(workspace: Path) -> str:
    (workspace / "app.py").write_bytes(b"name = '\xff'\n")
    return "app.py"


def _not_utf8_in_a_folder(workspace: Path) -> str:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_bytes(b"name = '\xff'\n")
    return "src/app.py"


def _directory(workspace: Path) -> str:
    (workspace / "app.py").mkdir()
    return "app.py"


def _fifo(workspace: Path) -> str:
    return fifo_target(workspace, "app.py")[1]  # a symlink app.py to a FIFO


def _app(workspace: Path) -> str:
    (workspace / "app.py").write_text(SOURCE)
    return "app.py"


def _read_only(workspace: Path) -> str:
    (workspace / "app.py").write_text(SOURCE)
    (workspace / "app.py").chmod(0o444)  # no write bit: read-only even for root
    return "app.py"


NAMED_CASES: dict[str, tuple[Callable[[Path], str], dict[str, Any], bool]] = {
    # id: (prepare the workspace and return the path to give, edit arguments, abort first)
    "applied": (_app, {"old_text": "'hello '", "new_text": "'hi '"}, False),
    "applied-in-a-folder": (_app_in_a_folder, {"old_text": "'hello '", "new_text": "'hi '"}, False),
    "applied-by-a-loose-name": (
        _app_by_a_loose_name,
        {"old_text": "'hello '", "new_text": "'hi '"},
        False,
    ),
    "no-match": (_app, {"old_text": "goodbye", "new_text": "x"}, False),
    "several-matches": (_app, {"old_text": "greet", "new_text": "x"}, False),
    "not-utf8": (_not_utf8, {"old_text": "name", "new_text": "title"}, False),
    "not-utf8-in-a-folder": (_not_utf8_in_a_folder, {"old_text": "name", "new_text": "x"}, False),
    "missing": (_missing, {"old_text": "a", "new_text": "b"}, False),
    "fifo": (_fifo, {"old_text": "a", "new_text": "b"}, False),
    "directory": (_directory, {"old_text": "a", "new_text": "b"}, False),
    "aborted": (_app, {"old_text": "'hello '", "new_text": "'hi '"}, True),
    "unencodable-new-text": (_app, {"old_text": "'hello '", "new_text": "'\ud800'"}, False),
    "read-only": (_read_only, {"old_text": "'hello '", "new_text": "'hi '"}, False),
}


def test_an_edit_of_a_directory_says_so_not_that_the_file_is_missing(workspace: Path) -> None:
    (workspace / "pkg").mkdir()
    out = call_now(create_coding_tools(workspace), "edit", path="pkg", old_text="a", new_text="b")
    said = text_of(out)
    assert out.is_error and "directory" in said and "not found" not in said.lower(), (
        "invariant: an OSError other than a missing file is worded by describe_os_error(path, "
        "error, action='edit'), which says what the system said (here: a directory), never "
        f"'not found' for every error. Got: {said!r}"
    )


@pytest.mark.parametrize("case", list(NAMED_CASES))
def test_every_result_names_the_file(workspace: Path, case: str) -> None:
    prepare, arguments, abort_first = NAMED_CASES[case]
    path = prepare(workspace)
    before = snapshot(workspace)
    controller = AbortController()
    if abort_first:
        controller.abort("user pressed stop")

    async def edit() -> ToolOutput:
        tools = create_coding_tools(workspace)
        editing = asyncio.ensure_future(
            call(tools, "edit", {"path": path, **arguments}, signal=controller.signal)
        )
        if case != "fifo":
            return await editing
        fifo = workspace / path  # an edit that waits for a writer is released, and fails as such
        return await end_or_release(
            editing, lambda: play_fifo_writer(fifo), within=5, failure=EDIT_FIFO_WAIT
        )

    out = run(edit())
    message = text_of(out)
    assert path in message or repr(path) in message, (
        f"invariant: every result of edit names the file as the model gave it ({path!r}), "
        "so the model knows which file it is about; pass the path argument down to every "
        f"message, also the ones raised while reading. Got: {message!r}"
    )
    assert str(workspace) not in message, (
        f"invariant: the file is named as the model gave it ({path!r}), not as the absolute "
        f"path the tool made of it. Got: {message!r}"
    )
    if case.startswith("applied"):
        assert not out.is_error, message
        return
    assert out.is_error, f"{case}: expected an error result, got: {message!r}"
    assert snapshot(workspace) == before, f"{case}: a refused edit changes nothing"


@pytest.mark.parametrize("link", ["folder", "file"])
def test_edit_details_name_the_joined_path_not_the_resolved_one(workspace: Path, link: str) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "app.py").write_text(SOURCE)
    if link == "folder":
        os.symlink("real", workspace / "alias")
        path = "alias/app.py"
    else:
        os.symlink("real/app.py", workspace / "alias.py")
        path = "alias.py"
    out = call_now(
        create_coding_tools(workspace), "edit", path=path, old_text="'hello '", new_text="'hi '"
    )
    assert not out.is_error, (
        f"an edit through a symlink inside the workspace succeeds: {text_of(out)}"
    )
    assert (workspace / "real" / "app.py").read_text() == SOURCE.replace("'hello '", "'hi '")
    assert out.details == EditDetails(str(workspace / path), len(SOURCE), len(SOURCE) - 3, 1), (
        "invariant: EditDetails.path is what resolve_path returned (the working directory "
        "joined with path, symlinks NOT resolved), as in WriteDetails and ReadDetails; only "
        f"the queue key is the real path. Expected {str(workspace / path)!r}, got {out.details!r}"
    )
