"""Lab 8.4 — edit applies a batch of exact replacements, all or nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lab_helpers import call_now, snapshot, text_of
from picourse.coding_tools import DEFAULT_MUTATION_QUEUE, EditDetails, create_coding_tools
from picourse.tool import ToolOutput
from queue_probe import QueueProbe

pytestmark = pytest.mark.lab8_4

SOURCE = "def greet(name):\n    return 'hello ' + name\n\nprint(greet('world'))\n"


def edit(workspace: Path, **arguments: Any) -> ToolOutput:
    return call_now(create_coding_tools(workspace), "edit", path="app.py", **arguments)


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


def test_an_empty_new_text_deletes(workspace: Path, app: Path) -> None:
    edit(workspace, old_text="\nprint(greet('world'))\n", new_text="")
    assert app.read_text() == "def greet(name):\n    return 'hello ' + name\n"


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
    ],
    ids=["empty-batch", "empty-old-text", "no-match", "several-matches"],
)
def test_a_bad_batch_is_refused_whole(
    workspace: Path, app: Path, edits: list[dict[str, str]], message: str
) -> None:
    before, inode = app.read_bytes(), app.stat().st_ino
    out = edit(workspace, edits=edits)
    assert out.is_error, "a batch with a bad edit must be an error result"
    assert message in text_of(out), f"the error must name the failing edit: {message!r}"
    unchanged(app, before, inode)


def test_no_match_and_several_matches_say_which(workspace: Path, app: Path) -> None:
    out = edit(workspace, old_text="goodbye", new_text="x")
    assert "edits[0]" in text_of(out) and "no match" in text_of(out)
    out = edit(workspace, old_text="greet", new_text="x")
    assert "edits[0]" in text_of(out) and "matches 2 times" in text_of(out), (
        "more than one match must be refused with the count"
    )


def test_overlapping_occurrences_count_as_several(workspace: Path) -> None:
    (workspace / "app.py").write_text("xaaax\n")
    before = (workspace / "app.py").read_bytes()
    out = edit(workspace, old_text="aa", new_text="b")
    assert out.is_error and "matches 2 times" in text_of(out), (
        "'aa' occurs twice in 'aaa' (overlapping): replacing the first would be a guess"
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


def test_untouched_bytes_stay_exactly_as_they_were(workspace: Path) -> None:
    path = workspace / "app.py"
    path.write_bytes(b"first\r\nsecond \xc3\xa9\r\nthird\r\n")
    out = edit(workspace, old_text="second", new_text="2nd")
    assert not out.is_error, text_of(out)
    assert path.read_bytes() == b"first\r\n2nd \xc3\xa9\r\nthird\r\n", (
        "edit must not change line endings or anything outside its match (read bytes, decode "
        "UTF-8 yourself; text mode turns \\r\\n into \\n)"
    )


def test_a_missing_file_is_an_error_that_suggests_write(workspace: Path) -> None:
    out = edit(workspace, old_text="a", new_text="b")
    assert out.is_error and "not found" in text_of(out).lower()
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


def test_edit_runs_in_the_default_queue_even_when_it_fails(
    workspace: Path, app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    edit(workspace, old_text="'world'", new_text="'you'")
    edit(workspace, old_text="not there", new_text="x")
    assert [(id(q), k) for q, k in probe.calls] == [
        (id(DEFAULT_MUTATION_QUEUE), os.path.realpath(app))
    ] * 2, "every edit that passed path resolution must run in DEFAULT_MUTATION_QUEUE"
