"""Lab 8.2 — one resolver keeps read, write and edit inside the workspace.

Write and edit arrive in 8.3 and 8.4; their own tests prove they use this resolver too.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest

from lab_helpers import call_now, text_of
from picourse.coding_tools import CodingToolOptions, WorkspaceEscapeError, create_coding_tools
from picourse.coding_tools.containment import ensure_inside_workspace
from picourse.coding_tools.paths import resolve_path
from picourse.tool import ToolOutput

pytestmark = pytest.mark.lab8_2


def refused(out: ToolOutput, why: str = "escapes the workspace", *, not_why: str = "") -> None:
    assert out.is_error, "a path that leaves the workspace must be refused"
    # Judge the words, not the paths quoted in them: a test's directory is named after
    # the test and may contain the very word looked for.
    words = re.sub(r"\S*/\S*", "", text_of(out))
    for required in dict.fromkeys(("escapes the workspace", why)):
        assert required in words, f"the refusal must say {required!r}, got: {text_of(out)}"
    assert not not_why or not_why not in words, (
        f"the refusal must not say {not_why!r} here: no {not_why} is involved, and a wrong "
        f"reason misleads the model (check lexically first). Got: {text_of(out)}"
    )
    assert "TOP SECRET" not in text_of(out), "nothing outside the workspace may be read"


def assert_inside(workspace: str, target: str, why: str) -> None:
    """``ensure_inside_workspace`` lets ``target`` pass; else fail saying ``why``."""
    try:
        ensure_inside_workspace(workspace, target)
    except WorkspaceEscapeError as error:
        raise AssertionError(f"{why} Got: {error}") from error


def test_relative_and_absolute_paths_inside_the_workspace_are_allowed(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.txt").write_text("inside\n")
    registry = create_coding_tools(workspace)
    for path in ("sub/a.txt", str(workspace / "sub" / "a.txt"), "sub/../sub/a.txt"):
        out = call_now(registry, "read", path=path)
        assert not out.is_error and "inside" in text_of(out), (
            f"{path!r} stays inside the workspace and must be readable"
        )


@pytest.mark.parametrize("name", ["..notes", "...", "..d/a.txt", "sub/..notes"])
def test_a_name_that_only_starts_with_two_dots_is_inside(workspace: Path, name: str) -> None:
    target = workspace / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("inside\n")
    os.symlink(target, workspace / "alias")
    registry = create_coding_tools(workspace)
    for path in (name, "alias"):
        out = call_now(registry, "read", path=path)
        assert not out.is_error and "inside" in text_of(out), (
            f"{name!r} is a name inside the workspace that only starts with '..': compare "
            "whole path components (os.path.commonpath), not a string prefix such as "
            f"os.path.relpath(...).startswith('..'). Reading {path!r} got: {text_of(out)}"
        )


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "sub/../../outside/secret.txt", "..", "sub/../.."]
)
def test_dot_dot_out_of_the_workspace_is_refused(workspace: Path, outside: Path, path: str) -> None:
    # ".." alone is the workspace's parent: outside, though os.path.relpath gives exactly
    # "..", which does not start with "../".
    (workspace / "sub").mkdir()
    refused(call_now(create_coding_tools(workspace), "read", path=path), not_why="symlink")


def test_dot_dot_out_and_back_in_through_a_symlink_is_refused(
    workspace: Path, outside: Path
) -> None:
    # The real path of ../outside/back/notes.txt is inside the workspace, but the path
    # itself leaves it: the lexical check judges the path as given, before any symlink.
    (workspace / "notes.txt").write_text("inside\n")
    os.symlink(workspace, outside / "back")
    out = call_now(create_coding_tools(workspace), "read", path="../outside/back/notes.txt")
    assert out.is_error, (
        "invariant: the lexical check comes first: a path whose `..` leads out of the "
        "workspace is refused even when a symlink outside leads back in (check with "
        "os.path.commonpath on the joined path, then on the real path)"
    )
    refused(out, not_why="symlink")


def test_an_absolute_path_outside_is_refused(workspace: Path, outside: Path) -> None:
    out = call_now(create_coding_tools(workspace), "read", path=str(outside / "secret.txt"))
    refused(out, not_why="symlink")


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_a_sibling_that_shares_the_workspace_name_prefix_is_outside(
    workspace: Path, form: str
) -> None:
    evil = workspace.parent / (workspace.name + "-evil")
    evil.mkdir()
    (evil / "secret.txt").write_text("TOP SECRET\n")
    path = str(evil / "secret.txt") if form == "absolute" else f"../{evil.name}/secret.txt"
    # No symlink is involved: the lexical check refuses it, by whole components
    # (os.path.commonpath). str.startswith lets it through to the real-path check, whose
    # reason ("through a symlink") is false here.
    refused(call_now(create_coding_tools(workspace), "read", path=path), not_why="symlink")


@pytest.mark.parametrize("name", ["innocent.txt", "notes ", " lead.txt"])
def test_a_symlinked_file_pointing_out_is_refused(
    workspace: Path, outside: Path, name: str
) -> None:
    # A name may begin or end with a space: judge the path as given, never stripped.
    os.symlink(outside / "secret.txt", workspace / name)
    refused(call_now(create_coding_tools(workspace), "read", path=name), "symlink")


def test_a_chain_of_symlinks_that_leads_out_is_refused(workspace: Path, outside: Path) -> None:
    os.symlink(outside / "secret.txt", workspace / "last-hop.txt")
    os.symlink("last-hop.txt", workspace / "first-hop.txt")  # a link to a link, inside
    out = call_now(create_coding_tools(workspace), "read", path="first-hop.txt")
    assert out.is_error, (
        "first-hop.txt links to last-hop.txt, which leads out: follow every hop (the real "
        "path, os.path.realpath), not only the first link (os.readlink)"
    )
    refused(out, "symlink")
    # A long chain (the system follows 40 links before it calls it a loop): still an escape.
    previous = "last-hop.txt"
    for hop in range(12):
        os.symlink(previous, workspace / f"hop-{hop}.txt")
        previous = f"hop-{hop}.txt"
    out = call_now(create_coding_tools(workspace), "read", path=previous)
    assert out.is_error and "TOP SECRET" not in text_of(out), (
        f"{previous} leads out through a chain of 13 links: follow it to its end as the "
        "system does (os.path.realpath), never a few hops by hand. Got: "
        f"{text_of(out)!r}"
    )
    refused(out, "symlink")


def test_a_link_whose_target_climbs_through_another_link_is_followed_as_the_system_does(
    workspace: Path, outside: Path
) -> None:
    # d -> outside/a/b, so d/.. is outside/a for the system, not the workspace (normpath of
    # the link's text would say ws/x).
    (outside / "a" / "b").mkdir(parents=True)
    (outside / "a" / "x").write_text("TOP SECRET\n")
    os.symlink(outside / "a" / "b", workspace / "d")
    os.symlink("d/../x", workspace / "l")
    refused(call_now(create_coding_tools(workspace), "read", path="l"), "symlink")


@pytest.mark.parametrize("name", ["a\\b", "..\\x"])
def test_a_backslash_is_part_of_a_name(workspace: Path, outside: Path, name: str) -> None:
    os.symlink(outside / "secret.txt", workspace / name)
    refused(call_now(create_coding_tools(workspace), "read", path=name), "symlink")


def test_a_workspace_whose_name_is_not_utf8_is_compared_as_it_is(tmp_path: Path) -> None:
    workspace = tmp_path / os.fsdecode(b"ws\xff")  # a name of bytes, as Linux allows
    ensure_inside_workspace(str(workspace), str(workspace / "a.txt"))
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        ensure_inside_workspace(str(workspace), str(tmp_path / "a.txt"))
    # A sibling whose name differs in an undecodable byte only is another folder: compare
    # the names as they are (str, or os.fsencode for bytes), never with errors="replace".
    sibling = tmp_path / os.fsdecode(b"ws\xfe")
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        ensure_inside_workspace(str(workspace), str(sibling / "a.txt"))


def test_a_symlinked_directory_pointing_out_is_refused(workspace: Path, outside: Path) -> None:
    os.symlink(outside, workspace / "docs")
    out = call_now(create_coding_tools(workspace), "read", path="docs/secret.txt")
    refused(out, "symlink")
    assert "escapes the workspace" in text_of(out)
    # Deeper below the link: every component counts, not only the file's own folder.
    (outside / "sub").mkdir()
    (outside / "sub" / "secret.txt").write_text("TOP SECRET\n")
    refused(call_now(create_coding_tools(workspace), "read", path="docs/sub/secret.txt"), "symlink")
    # The folder itself, as a listing or a search would be given it: folders are checked
    # like files.
    with pytest.raises(WorkspaceEscapeError) as raised:
        ensure_inside_workspace(str(workspace), str(workspace / "docs"))
    refused(ToolOutput.error(str(raised.value)), "symlink")


def test_a_new_file_behind_a_symlinked_directory_is_refused(workspace: Path, outside: Path) -> None:
    os.symlink(outside, workspace / "docs")
    options = CodingToolOptions(str(workspace))
    with pytest.raises(WorkspaceEscapeError) as raised:
        resolve_path(options, "docs/new-dir/new.txt")  # judged by its nearest existing ancestor
    refused(ToolOutput.error(str(raised.value)), "symlink")


def test_a_dangling_symlink_that_stays_inside_is_allowed(workspace: Path) -> None:
    os.symlink("new.txt", workspace / "later.txt")  # new.txt does not exist yet
    assert_inside(
        str(workspace),
        str(workspace / "later.txt"),
        "invariant: a dangling symlink whose target lies inside the workspace is inside: "
        "os.path.realpath follows it as far as it leads (to new.txt here), and that is "
        "what you compare.",
    )
    # resolve_path, which write and edit go through, lets it pass too (8.3 writes its target).
    resolve_path(CodingToolOptions(str(workspace)), "later.txt")


def test_a_dangling_symlink_pointing_out_is_refused(workspace: Path, outside: Path) -> None:
    os.symlink(outside / "not-yet.txt", workspace / "later.txt")
    with pytest.raises(WorkspaceEscapeError) as raised:
        resolve_path(CodingToolOptions(str(workspace)), "later.txt")
    refused(ToolOutput.error(str(raised.value)), "symlink")


def test_symlinks_that_stay_inside_are_allowed(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "a.txt").write_text("inside\n")
    os.symlink(workspace / "real", workspace / "alias")
    os.symlink("../real/a.txt", workspace / "real" / "up-and-back.txt")  # text with ..
    for path in ("alias/a.txt", "real/up-and-back.txt"):
        out = call_now(create_coding_tools(workspace), "read", path=path)
        assert not out.is_error, (
            f"a symlink to a place inside the workspace must be allowed ({path}), also one "
            f"whose text goes up with '..': judge where it leads. Got: {text_of(out)}"
        )


def reads_inside(workspace: str | Path, paths: tuple[str, ...], rule: str) -> None:
    """Each of ``paths`` reads the file ``a.txt`` (``inside``) of ``workspace``."""
    for path in paths:
        out = call_now(create_coding_tools(workspace), "read", path=path)
        assert not out.is_error and "inside" in text_of(out), (
            f"{rule}. Reading {path!r} got: {text_of(out)}"
        )


def under_a_symlinked_folder(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """``name`` in a real folder that is reached through a symlink: its real path, and the
    path through the link (neither is made)."""
    (tmp_path / "real-parent").mkdir()
    os.symlink(tmp_path / "real-parent", tmp_path / "parent-link")
    return tmp_path / "real-parent" / name, tmp_path / "parent-link" / name


@pytest.mark.parametrize("linked", ["the-workspace", "a-folder-above-it"])
def test_a_workspace_reached_through_a_symlink_still_works(tmp_path: Path, linked: str) -> None:
    if linked == "the-workspace":
        real = tmp_path / "real-ws"
        real.mkdir()
        os.symlink(real, tmp_path / "ws-link")
        given = tmp_path / "ws-link"
    else:  # like /tmp -> /private/tmp on macOS: the workspace is no link, a folder above is
        real, given = under_a_symlinked_folder(tmp_path, "ws")
        real.mkdir()
    (real / "a.txt").write_text("inside\n")
    reads_inside(
        given,
        ("a.txt", str(given / "a.txt")),
        f"a workspace reached through a symlink ({linked}) must work: compare real paths "
        "on both sides, the workspace's always resolved with os.path.realpath (a symlink "
        "anywhere along it counts)",
    )
    # The lexical check judges a path against the workspace as given: an absolute path
    # through the workspace's real path is outside it, though the file is the same.
    out = call_now(create_coding_tools(given), "read", path=str(real / "a.txt"))
    assert out.is_error, (
        "the lexical check compares the joined path with the workspace as given, not with "
        f"its real path: {str(real / 'a.txt')!r} does not lie under {str(given)!r}"
    )
    refused(out, not_why="symlink")
    # Resolving the workspace is no reason to stop resolving its symlinks.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("TOP SECRET\n")
    os.symlink(tmp_path / "elsewhere" / "secret.txt", real / "innocent.txt")
    out = call_now(create_coding_tools(given), "read", path="innocent.txt")
    assert out.is_error and "TOP SECRET" not in text_of(out), (
        f"a workspace reached through a symlink ({linked}) still refuses a symlink in it that "
        "leads out: its real path differs from the path given, so compare the target's real "
        "path with the workspace's real path, always"
    )
    refused(out, "symlink")


def test_a_workspace_link_pointed_elsewhere_is_resolved_again(tmp_path: Path) -> None:
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.txt").write_text(f"{name}\n")
    link = tmp_path / "ws-link"
    os.symlink(tmp_path / "first", link)
    registry = create_coding_tools(link)
    assert "first" in text_of(call_now(registry, "read", path="a.txt"))
    link.unlink()
    os.symlink(tmp_path / "second", link)
    out = call_now(registry, "read", path="a.txt")
    assert not out.is_error and "second" in text_of(out), (
        "the workspace's link now leads to another folder: resolve the workspace's real path "
        f"on every check, never from a cache. Got: {text_of(out)!r}"
    )


def test_the_filesystem_root_as_the_workspace_holds_every_path(workspace: Path) -> None:
    (workspace / "a.txt").write_text("inside\n")
    path = str(workspace / "a.txt")
    assert resolve_path(CodingToolOptions(os.sep), path) == path, (
        "with the workspace '/', every path is inside: compare whole components "
        "(os.path.commonpath); a prefix of root + os.sep is '//' there and refuses everything"
    )
    out = call_now(create_coding_tools(os.sep), "read", path=path)
    assert not out.is_error and "inside" in text_of(out), (
        f"with the workspace '/', reading {path!r} must work, got: {text_of(out)}"
    )


# Other spellings of one workspace folder. POSIX leaves a leading "//" to the system; Linux
# and macOS read it as "/", yet os.path.abspath keeps it and os.path.commonpath drops it.
WORKSPACE_SPELLINGS = {
    "trailing-slash": "{ws}/",
    "trailing-dot": "{ws}/.",
    "dot-dot-back-in": "{ws}/sub/..",
    "leading-double-slash": "/{ws}",
    "relative": "{name}",  # from the folder above it
    # Read lexically, as the tools join paths onto it: the workspace, though link leads away.
    "dot-dot-through-a-link": "{ws}/link/..",
}


@pytest.mark.parametrize("spelling", list(WORKSPACE_SPELLINGS))
def test_any_spelling_of_the_workspace_holds_its_files(
    workspace: Path, spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "a.txt").write_text("inside\n")
    away = workspace.parent / "elsewhere" / "deep"
    away.mkdir(parents=True)
    (workspace / "link").symlink_to(away, target_is_directory=True)
    if spelling == "relative":
        monkeypatch.chdir(workspace.parent)
    given = WORKSPACE_SPELLINGS[spelling].format(ws=workspace, name=workspace.name)
    rule = (
        f"the workspace spelt {given!r} ({spelling}) is the same folder: normalise both "
        "sides the same way before comparing (os.path.commonpath of the workspace's "
        "os.path.abspath is how commonpath spells it)"
    )
    reads_inside(given, ("a.txt", str(workspace / "a.txt")), rule)
    # ensure_inside_workspace itself, given the workspace as spelt (the tools hand it an
    # absolute one): its file is inside, its sibling's is not.
    try:
        ensure_inside_workspace(given, str(workspace / "a.txt"))
    except (WorkspaceEscapeError, ValueError) as error:
        raise AssertionError(f"{rule}. ensure_inside_workspace raised {error!r}") from error
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        ensure_inside_workspace(given, str(workspace.parent / "a.txt"))


def test_a_target_given_with_dotdot_is_judged_lexically_when_called_directly(
    workspace: Path, outside: Path
) -> None:
    # resolve_path hands over a normalised absolute path; a direct call may not.
    for target in (f"{workspace}/../outside/secret.txt", f"{workspace}/sub/../../outside"):
        with pytest.raises(WorkspaceEscapeError) as raised:
            ensure_inside_workspace(str(workspace), target)
        refused(ToolOutput.error(str(raised.value)), not_why="symlink")


def test_a_target_through_a_link_and_back_is_read_lexically_when_called_directly(
    workspace: Path, outside: Path
) -> None:
    (workspace / "a.txt").write_text("inside\n")
    os.symlink(outside, workspace / "away")
    target = f"{workspace}/away/../a.txt"  # a.txt of the workspace, as resolve_path joins it
    assert_inside(
        str(workspace),
        target,
        f"invariant: {target} is the workspace's a.txt, read lexically (os.path.abspath "
        "the target first, then resolve symlinks of that): the tools open it so.",
    )


def test_a_relative_target_is_read_from_the_current_folder(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace.parent)
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        # The a.txt beside the workspace: a relative target is relative to the current
        # folder, as os.path.abspath reads it, never joined onto the workspace.
        ensure_inside_workspace(str(workspace), "a.txt")
    ensure_inside_workspace(str(workspace), f"{workspace.name}/a.txt")


def test_a_relative_target_is_resolved_from_the_current_folder_too(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From the folder sub of the workspace, 'link' is sub/link, which leads outside; the
    # workspace has no 'link' of its own, so joined onto the workspace it would look fine.
    (workspace / "sub").mkdir()
    os.symlink(outside, workspace / "sub" / "link")
    monkeypatch.chdir(workspace / "sub")
    with pytest.raises(WorkspaceEscapeError) as raised:
        # Relative to the current folder (sub), as os.path.abspath reads it, for the
        # real-path check as for the lexical one: never joined onto the workspace.
        ensure_inside_workspace(str(workspace), "link/secret.txt")
    refused(ToolOutput.error(str(raised.value)), "symlink")


def test_a_link_that_leads_to_the_workspace_itself_is_inside(workspace: Path) -> None:
    (workspace / "self").symlink_to(".", target_is_directory=True)
    for target in (str(workspace / "self"), f"{workspace / 'self'}/"):
        assert_inside(
            str(workspace),
            target,
            f"{target!r} is a link to the workspace itself, which is inside (as '.' is): "
            "a real path equal to the workspace's is fine.",
        )


@pytest.mark.parametrize("shape", ["chain", "dotdot"], ids=["chain-of-links", "link-with-dotdot"])
def test_a_workspace_reached_through_links_of_any_shape_holds_its_files(
    tmp_path: Path, shape: str
) -> None:
    real = tmp_path / "real" / "ws"
    real.mkdir(parents=True)
    (real / "a.txt").write_text("inside\n")
    (tmp_path / "links").mkdir()
    if shape == "chain":  # links/ws -> hop -> real/ws: two hops
        (tmp_path / "links" / "hop").symlink_to(real, target_is_directory=True)
        (tmp_path / "links" / "ws").symlink_to("hop", target_is_directory=True)
    else:  # links/ws -> ../real/ws
        (tmp_path / "links" / "ws").symlink_to("../real/ws", target_is_directory=True)
    workspace = tmp_path / "links" / "ws"
    assert_inside(
        str(workspace),
        str(workspace / "a.txt"),
        f"a workspace reached through a link ({shape}) holds its own files: resolve the "
        "workspace's real path with os.path.realpath, which follows every hop and "
        "reads each link's text from the link's own folder.",
    )


def test_a_relative_target_that_leaves_by_dotdot_is_judged_lexically_when_called_directly(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "a.txt").write_text("inside\n")
    os.symlink(workspace, workspace.parent / "alias")  # outside, leading back in
    monkeypatch.chdir(workspace)
    for target in ("../outside/secret.txt", "../alias/a.txt"):
        with pytest.raises(WorkspaceEscapeError) as raised:
            # Relative to the current folder (the workspace), it leaves it by '..': the
            # lexical check applies to it as to an absolute path, and comes first.
            ensure_inside_workspace(str(workspace), target)
        refused(ToolOutput.error(str(raised.value)), not_why="symlink")


def test_a_relative_workspace_is_read_from_the_current_folder_on_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for parent in (first, second):
        (parent / "ws").mkdir(parents=True)
    monkeypatch.chdir(first)
    ensure_inside_workspace("ws", str(first / "ws" / "a.txt"))
    monkeypatch.chdir(second)
    assert_inside(
        "ws",
        str(second / "ws" / "a.txt"),
        "invariant: a relative workspace names a folder of the current folder at the time "
        "of the check: after a chdir, 'ws' is another folder. Make it absolute on every "
        "check; remember no root of an earlier one.",
    )
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        ensure_inside_workspace("ws", str(first / "ws" / "a.txt"))


def test_a_relative_workspace_reached_through_a_link_is_judged_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real" / "ws"
    real.mkdir(parents=True)
    (real / "a.txt").write_text("inside\n")
    (tmp_path / "ws-link").symlink_to(real, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for target in ("ws-link/a.txt", str(tmp_path / "ws-link" / "a.txt")):
        assert_inside(
            "ws-link",
            target,
            "invariant: a relative workspace is made absolute as given "
            "(os.path.abspath), like an absolute one, never by its real path "
            f"(os.path.realpath): 'ws-link' is {str(tmp_path / 'ws-link')!r} for the "
            f"lexical check, so {target!r} is inside.",
        )
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        # Through the real path, the lexical check compares with the workspace as given.
        ensure_inside_workspace("ws-link", str(real / "a.txt"))


# The workspace "café" (é as one code point, NFC) and a sibling spelt otherwise.
SIBLING_SPELLINGS = {"upper-case": "CAFÉ", "other-unicode-form": "cafe\u0301"}


@pytest.mark.parametrize("spelling", list(SIBLING_SPELLINGS))
def test_a_sibling_whose_name_is_spelt_otherwise_is_outside(tmp_path: Path, spelling: str) -> None:
    workspace = tmp_path / "caf\u00e9"
    workspace.mkdir()
    sibling = tmp_path / SIBLING_SPELLINGS[spelling]
    try:
        sibling.mkdir()
    except FileExistsError:  # a filesystem that folds case or Unicode forms (macOS): the
        pass  # name alone is judged
    else:
        (sibling / "secret.txt").write_text("TOP SECRET\n")
    path = f"../{sibling.name}/secret.txt"
    out = call_now(create_coding_tools(workspace), "read", path=path)
    assert out.is_error, (
        f"{path!r} names a sibling of the workspace: compare path components exactly, "
        "never case-folded or Unicode-normalised (on Linux CAFÉ, café and cafe+U+0301 are "
        "three folders)"
    )
    refused(out, not_why="symlink")


def test_a_path_outside_a_workspace_not_made_yet_is_refused_lexically(
    tmp_path: Path, outside: Path
) -> None:
    with pytest.raises(WorkspaceEscapeError) as raised:
        ensure_inside_workspace(str(tmp_path / "not-yet"), str(outside / "secret.txt"))
    refused(ToolOutput.error(str(raised.value)), not_why="symlink")


@pytest.mark.parametrize("spelling", list(SIBLING_SPELLINGS))
def test_a_link_to_a_sibling_spelt_otherwise_leads_outside(tmp_path: Path, spelling: str) -> None:
    workspace = tmp_path / "caf\u00e9"
    workspace.mkdir()
    sibling = tmp_path / SIBLING_SPELLINGS[spelling]
    with contextlib.suppress(FileExistsError):  # macOS folds case and Unicode forms
        sibling.mkdir()
    (sibling / "secret.txt").write_text("TOP SECRET\n")
    (workspace / "link").symlink_to(sibling, target_is_directory=True)
    target = str(workspace / "link" / "secret.txt")
    if os.path.samefile(sibling, workspace):  # one folder here: the link leads back in
        assert_inside(str(workspace), target, "the link leads into the workspace itself.")
        return
    with pytest.raises(WorkspaceEscapeError) as raised:
        # Compare real paths exactly, never case-folded or Unicode-normalised.
        ensure_inside_workspace(str(workspace), target)
    refused(ToolOutput.error(str(raised.value)), "symlink")


def test_each_check_sees_the_files_as_they_are_now(workspace: Path, outside: Path) -> None:
    registry = create_coding_tools(workspace)
    (workspace / "note.txt").write_text("inside\n")
    assert not call_now(registry, "read", path="note.txt").is_error
    (workspace / "note.txt").unlink()
    os.symlink(outside / "secret.txt", workspace / "note.txt")
    out = call_now(registry, "read", path="note.txt")
    assert out.is_error, (
        "note.txt was a file inside, and is now a symlink that leads out: resolve the real "
        "path on every check, never from a cache of earlier verdicts or real paths"
    )
    refused(out, "symlink")


@pytest.mark.parametrize("name", ["~", "$PROJ", "${HOME}"])
def test_a_path_is_judged_as_given_never_expanded(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The tools open the path as given: '~' and '$PROJ' are names there, here of a symlink
    # that leads out. The check must judge that same path, not one that expanduser or
    # expandvars made of it (which lies inside and does not exist).
    monkeypatch.setenv("HOME", str(workspace / "home"))
    monkeypatch.setenv("PROJ", str(workspace / "proj"))
    os.symlink(outside, workspace / name)
    out = call_now(create_coding_tools(workspace), "read", path=f"{name}/secret.txt")
    assert out.is_error and "TOP SECRET" not in text_of(out), (
        f"{name!r} is a symlink in the workspace that leads out, and reading through it "
        "leaked the secret: check the path the tool opens, as given (never "
        "os.path.expanduser or os.path.expandvars: the checked path and the opened one must "
        f"be the same). Got: {text_of(out)!r}"
    )
    refused(out, "symlink")


@pytest.mark.parametrize("name", ["~", "$HOME"])
def test_a_relative_target_named_like_an_expansion_is_judged_as_given(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # Called directly, a relative target is relative to the current folder, here the
    # workspace: '~/notes.txt' is a file in its folder named '~', never in the home folder.
    monkeypatch.setenv("HOME", str(outside))
    monkeypatch.chdir(workspace)
    assert_inside(
        str(workspace),
        f"{name}/notes.txt",
        f"{name + '/notes.txt'!r}, relative to the current folder (the workspace), is "
        "inside it, and was refused: judge the path as given, never what "
        "os.path.expanduser or os.path.expandvars makes of it.",
    )


@pytest.mark.parametrize("variable", ["HOME", "PATH"])
@pytest.mark.parametrize("spelling", ["${}", "${{{}}}"], ids=["dollar", "braces"])
def test_a_workspace_named_like_an_expansion_is_judged_as_given(
    tmp_path: Path, variable: str, spelling: str
) -> None:
    # HOME and PATH are set wherever the tools run; expandvars would turn this workspace's
    # name into another folder's, and every file in the workspace would then be "outside".
    named = tmp_path / spelling.format(variable)
    named.mkdir()
    assert_inside(
        str(named),
        str(named / "a.txt"),
        f"a file inside the workspace {named.name!r} was refused: the workspace "
        "is a path as given, like any other; never expand '$' or '~' in it "
        "(os.path.expandvars, os.path.expanduser).",
    )
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        ensure_inside_workspace(str(named), str(tmp_path / "elsewhere" / "a.txt"))


def test_a_workspace_whose_name_holds_wildcards_is_compared_exactly(tmp_path: Path) -> None:
    # A pattern match (fnmatch, glob) of "<workspace>/*" reads [12], * and ? as wildcards: it
    # refuses this workspace's own files and lets a sibling such as proj1ab through.
    named, sibling = tmp_path / "proj[12]*?", tmp_path / "proj1ab"
    named.mkdir()
    sibling.mkdir()
    (sibling / "secret.txt").write_text("TOP SECRET\n")
    os.symlink(sibling / "secret.txt", named / "alias.txt")
    assert_inside(
        str(named),
        str(named / "a.txt"),
        f"a file inside the workspace {named.name!r} was refused: compare whole path "
        "components exactly (os.path.commonpath), never as a pattern in which [ ], * and ? "
        "are wildcards.",
    )
    for target in (sibling / "secret.txt", named / "alias.txt"):
        with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
            ensure_inside_workspace(str(named), str(target))


def test_a_workspace_whose_name_ends_with_a_space_is_judged_as_given(tmp_path: Path) -> None:
    spaced = tmp_path / "ws "
    spaced.mkdir()
    (tmp_path / "ws").mkdir()
    ensure_inside_workspace(str(spaced), str(spaced / "a.txt"))
    with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
        ensure_inside_workspace(str(spaced), str(tmp_path / "ws" / "a.txt"))


@pytest.mark.parametrize("above", ["a-folder", "a-symlinked-folder"])
def test_a_workspace_that_does_not_exist_yet_raises_nothing(tmp_path: Path, above: str) -> None:
    if above == "a-folder":
        missing = tmp_path / "not-yet"
    else:  # its real path differs from its name, though it is not there to be resolved
        _, missing = under_a_symlinked_folder(tmp_path, "not-yet")
    try:
        resolved = resolve_path(CodingToolOptions(str(missing)), "new.txt")
    except NotImplementedError:
        raise  # an unfinished stage shows as itself
    except Exception as error:
        raise AssertionError(
            f"a workspace that does not exist yet ({above} above it) made the resolver raise "
            f"{error!r}: raise nothing but WorkspaceEscapeError, and resolve the workspace "
            "with os.path.realpath (without strict=True) whether or not it exists"
        ) from error
    assert resolved == str(missing / "new.txt")
    for leaving in ("../secret.txt", str(tmp_path / "secret.txt")):
        with pytest.raises(WorkspaceEscapeError, match="escapes the workspace"):
            resolve_path(CodingToolOptions(str(missing)), leaving)  # nothing there is no pass
    out = call_now(create_coding_tools(missing), "read", path="new.txt")
    assert out.is_error and "escapes the workspace" not in text_of(out), (
        f"reading from a workspace that does not exist is an error of its own: {text_of(out)}"
    )


def test_unrestricted_mode_does_not_check(workspace: Path, outside: Path) -> None:
    path = str(outside / "secret.txt")
    refused(call_now(create_coding_tools(workspace, "workspace"), "read", path=path))
    out = call_now(create_coding_tools(workspace, "unrestricted"), "read", path=path)
    assert not out.is_error and "TOP SECRET" in text_of(out), (
        "containment='unrestricted' must not refuse paths outside the workspace"
    )


@pytest.mark.parametrize("link", ["whole-folder", "file", "relative-file"])
def test_a_symlink_to_a_sibling_that_shares_the_workspace_name_prefix_is_refused(
    workspace: Path, link: str
) -> None:
    evil = workspace.parent / (workspace.name + "-evil")
    evil.mkdir()
    (evil / "secret.txt").write_text("TOP SECRET\n")
    if link == "whole-folder":
        os.symlink(evil, workspace / "peek")
        path = "peek/secret.txt"
    elif link == "file":
        os.symlink(evil / "secret.txt", workspace / "peek.txt")
        path = "peek.txt"
    else:
        os.symlink(f"../{evil.name}/secret.txt", workspace / "peek.txt")
        path = "peek.txt"
    out = call_now(create_coding_tools(workspace), "read", path=path)
    refused(out, "symlink")
    assert "escapes the workspace" in text_of(out), (
        f"{evil.name} only starts with the workspace's name: compare real paths by whole "
        "components (os.path.commonpath), not with str.startswith"
    )


@pytest.mark.parametrize("path", [".", "./", "sub/..", "<absolute>"])
def test_the_workspace_itself_is_inside(workspace: Path, path: str) -> None:
    (workspace / "sub").mkdir()
    path = str(workspace) if path == "<absolute>" else path
    assert resolve_path(CodingToolOptions(str(workspace)), path) == str(workspace), (
        f"{path!r} is the workspace itself: it is inside, not an escape"
    )
    out = call_now(create_coding_tools(workspace), "read", path=path)
    assert out.is_error and "directory" in text_of(out), (
        "reading the workspace itself fails because it is a directory, not because it "
        f"escapes: got {text_of(out)!r}"
    )


@pytest.mark.parametrize("loop", ["self", "pair", "folder"])
def test_a_symlink_loop_is_an_error_result_not_an_exception(workspace: Path, loop: str) -> None:
    if loop == "self":
        os.symlink("loop", workspace / "loop")
        path = "loop"
    elif loop == "pair":
        os.symlink("b", workspace / "a")
        os.symlink("a", workspace / "b")
        path = "a"
    else:
        os.symlink("loop", workspace / "loop")
        path = "loop/inside.txt"
    try:
        out = call_now(create_coding_tools(workspace), "read", path=path)
    except NotImplementedError:
        raise  # an unfinished stage shows as itself
    except Exception as error:
        raise AssertionError(
            f"a symlink loop made the tool raise {error!r}: ensure_inside_workspace may "
            "raise WorkspaceEscapeError only. os.path.realpath (not strict) does not raise on "
            "a loop; the read then fails on its own with an error result"
        ) from error
    assert out.is_error, "a symlink loop cannot be read: it must be an error result"
    assert "escapes the workspace" not in text_of(out), (
        "a loop inside the workspace does not escape it; the error must say what is wrong"
    )
    try:
        ensure_inside_workspace(str(workspace), str(workspace / path))
    except Exception as error:
        raise AssertionError(
            f"ensure_inside_workspace raised {error!r} for a symlink loop inside the "
            "workspace: a loop is no escape, so the check raises nothing (the read that "
            "follows reports it)"
        ) from error
