"""Lab 8.7 (optional) — look around: read-only ls and glob.

Both are registered with create_coding_tools(..., navigation=True), after the four core
tools; both go through the workspace resolver of Lab 8.2, and nothing they do writes.
"""

from __future__ import annotations

import asyncio
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from lab_helpers import (
    OVER_TIME_LIMIT,
    call,
    call_now,
    end_or_release,
    play_fifo_writer,
    run,
    snapshot,
    text_of,
)
from picourse.coding_tools import GlobDetails, ListDetails, create_coding_tools
from picourse.tool import ToolOutput, ToolRegistry

pytestmark = pytest.mark.lab8_7

HANG_BOUND_SECONDS = 2.0


def tools(workspace: Path) -> ToolRegistry:
    return create_coding_tools(workspace, navigation=True)


def ls(workspace: Path, **arguments: object) -> ToolOutput:
    return call_now(tools(workspace), "ls", **arguments)


def glob(workspace: Path, pattern: str, **arguments: object) -> ToolOutput:
    return call_now(tools(workspace), "glob", pattern=pattern, **arguments)


def lines_of(output: ToolOutput) -> list[str]:
    return text_of(output).splitlines()


@pytest.fixture
def project(workspace: Path) -> Path:
    """A small repository: sources, tests, docs, and the clutter glob must skip."""
    files = {
        "README.md": "# demo\n",
        "setup.py": "",
        "src/app/__init__.py": "",
        "src/app/core.py": "",
        "src/app/util/strings.py": "",
        "tests/test_core.py": "",
        "docs/guide.txt": "",
        ".env": "SECRET=1\n",
        ".github/workflows/ci.yml": "",
        "node_modules/left-pad/index.js": "",
        "node_modules/left-pad/setup.py": "",
        "env/pyvenv.cfg": "home = /usr\n",
        "env/lib/site.py": "",
        "build/out.py": "",
        "notes.log": "",
        ".gitignore": "build/\n*.log\n",
    }
    for name, content in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return workspace


# ---------------------------------------------------------------- ls


def test_ls_lists_folders_first_then_files_with_a_count(project: Path) -> None:
    out = ls(project)
    assert not out.is_error, text_of(out)
    lines = lines_of(out)
    assert lines[:-1] == [
        ".github/",
        "build/",
        "docs/",
        "env/",
        "node_modules/",
        "src/",
        "tests/",
        ".env",
        ".gitignore",
        "README.md",
        "notes.log",
        "setup.py",
    ], "folders first with a / suffix, then files, each group sorted by name"
    assert lines[-1] == "[12 entries]", "the listing ends with how many entries there are"
    assert out.details == ListDetails(str(project), 12, False)


def test_ls_caps_long_listings_with_a_notice(workspace: Path) -> None:
    for number in range(30):
        (workspace / f"file{number:02}.txt").write_text("")
    out = ls(workspace, limit=10)
    lines = lines_of(out)
    assert lines[:10] == [f"file{number:02}.txt" for number in range(10)]
    notice = lines[-1]
    assert len(lines) == 11 and notice.startswith("[Showing 10 of 30 entries"), (
        "a capped listing shows `limit` entries and ends with [Showing {limit} of {total} "
        "entries; ...], how many there are in all"
    )
    assert notice.endswith("]"), f"the notice is one bracketed line: {notice!r}"
    assert out.details == ListDetails(str(workspace), 30, True)
    exact = ls(workspace, limit=30)
    assert lines_of(exact)[-1] == "[30 entries]" and exact.details == ListDetails(
        str(workspace), 30, False
    ), "exactly `limit` entries are all shown: nothing is left out"


def test_ls_counts_every_entry_and_lists_links_that_lead_nowhere_with_the_files(
    workspace: Path,
) -> None:
    (workspace / "only.txt").write_text("")
    assert lines_of(ls(workspace)) in (["only.txt", "[1 entry]"], ["only.txt", "[1 entries]"])
    (workspace / "second.txt").write_text("")
    assert lines_of(ls(workspace)) == ["only.txt", "second.txt", "[2 entries]"]
    (workspace / "loop").symlink_to("loop")  # following it fails with ELOOP
    (workspace / "gone").symlink_to("missing")
    assert lines_of(ls(workspace)) == ["gone", "loop", "only.txt", "second.txt", "[4 entries]"], (
        "a link that leads nowhere (dangling, or a loop whose is_dir() raises OSError) is "
        "listed with the files: it cannot be listed in turn"
    )


def test_ls_lists_a_subfolder_and_refuses_a_file_or_a_missing_path(project: Path) -> None:
    assert lines_of(ls(project, path="src/app")) == [
        "util/",
        "__init__.py",
        "core.py",
        "[3 entries]",
    ]
    for path, says in (
        ("README.md", "README.md is a file, not a directory"),
        ("missing", "File not found"),
    ):
        out = ls(project, path=path)
        assert out.is_error and path in text_of(out) and says in text_of(out), (
            f"ls {path} must be an error that names it and says {says!r}: a missing path is "
            f"not found (describe_os_error), a file is a file. Got: {text_of(out)!r}"
        )


def test_ls_lists_a_symlink_to_a_folder_as_a_folder(project: Path) -> None:
    (project / "source").symlink_to(project / "src", target_is_directory=True)
    (project / "readme-link").symlink_to(project / "README.md")
    lines = lines_of(ls(project))
    assert "source/" in lines and "source" not in lines, (
        "a symlink to a folder is listed as a folder, with a / suffix (it can be listed in "
        "turn): ask whether the entry is a folder following the link"
    )
    assert "readme-link" in lines, "a symlink to a file is listed as a file"


def test_ls_stays_inside_the_workspace(workspace: Path, outside: Path) -> None:
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    for path in ("../outside", str(outside), "link"):
        out = ls(workspace, path=path)
        assert out.is_error and "escapes the workspace" in text_of(out), (
            f"ls {path!r} must be refused by the workspace resolver of Lab 8.2"
        )


# ---------------------------------------------------------------- glob


def test_glob_matches_stars_and_double_stars_sorted_and_relative(project: Path) -> None:
    assert lines_of(glob(project, "**/*.py")) == [
        "setup.py",
        "src/app/__init__.py",
        "src/app/core.py",
        "src/app/util/strings.py",
        "tests/test_core.py",
    ], "** spans any number of folders (none included); paths are relative and sorted"
    assert lines_of(glob(project, "src/*/*.py")) == [
        "src/app/__init__.py",
        "src/app/core.py",
    ], "* never crosses a /"
    assert lines_of(glob(project, "tests/test_?ore.py")) == ["tests/test_core.py"]
    assert "No paths match" in text_of(glob(project, "src?app/core.py")), (
        "? matches one character within a name, never a /"
    )
    assert lines_of(glob(project, "src/*")) == ["src/app/"], "a matching folder ends with /"
    assert lines_of(glob(project, "src/**/*.py")) == [
        "src/app/__init__.py",
        "src/app/core.py",
        "src/app/util/strings.py",
    ], "**/ may stand in the middle of a pattern"
    assert lines_of(glob(project, "src/**")) == [
        "src/app/",
        "src/app/__init__.py",
        "src/app/core.py",
        "src/app/util/",
        "src/app/util/strings.py",
    ], "a final ** matches everything below"
    out = glob(project, "**/*.py")
    assert out.details == GlobDetails("**/*.py", 5, False)


def test_glob_searches_below_a_path_and_answers_relative_to_the_workspace(
    project: Path,
) -> None:
    assert lines_of(glob(project, "*.py", path="src/app")) == [
        "src/app/__init__.py",
        "src/app/core.py",
    ], "the pattern is relative to path; the answer is relative to the workspace"


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("aab.py", ["aab.py"]),
        ("test_*.py", ["test_a.py"]),
        ("*a*bc*c", ["abcbc"]),
        ("*s", ["docs/", "tests/"]),
        ("*test*", ["test_a.py", "tests/"]),
        ("*p", ["app"]),
        ("**.md", ["a.md", "docs/x.md"]),
        ("*a**/b.py", ["aab.py", "ab.py"]),
        ("*b**/c", ["abcbc"]),
        ("??.py", ["ab.py"]),
        ("*.PY", ["B.PY"]),
        ("***a**a", ["banana"]),
    ],
)
def test_glob_patterns_mean_exactly_what_they_say(
    workspace: Path, pattern: str, expected: list[str]
) -> None:
    for name in (
        "aab.py",
        "ab.py",
        "test_a.py",
        "best_a.py",
        "abcbc",
        "app",
        "a.md",
        "amd",
        "B.PY",
        "banana",
    ):
        (workspace / name).write_text("")
    for folder in ("docs", "tests"):
        (workspace / folder).mkdir()
    (workspace / "docs" / "x.md").write_text("")
    assert sorted(lines_of(glob(workspace, pattern))) == sorted(expected), (
        f"{pattern!r}: '*' is any characters within a name (none included), a '**' not "
        "followed by '/' any characters, '/' included; letters match themselves and nothing "
        "else: a regular expression that merges, drops or reorders parts of the pattern "
        "matches the wrong names. A '**/' may match no folder at all ('*a**/b.py' matches "
        "'aab.py' as '*ab.py' would), so it cannot absorb what a later place of the fixed "
        "text before it would have skipped: take the first place atomically only when another "
        "'*' or a '**' not followed by '/' comes next ('***' is '**' then '*': any characters, "
        "as '**' alone). Each '?' is one character ('??' two), "
        f"and case counts ('*.PY' is not '*.py'). Expected {expected}"
    )


TREE = (
    *("src/a.py", "src/pkg/b.py", "src/pkg/test_c.py", "src/src/i.py", "src/test_a/b.py"),
    *("src/x/k.py", "src/pkg/x/m.py", "src/g.txt", "src/z.pyc"),
    *("lib/src/c.py", "lib/src/deep/er/d.py", "lib/src/x/n.py", "lib/src/xak.py", "lib/f.py"),
    *("a/src/b/src/h.py", "srcx/e.py", "xsrc/e.py", "src.py", "s/c/p.py"),
)
ONE_LETTER_UNDER_SRC = [
    *("src/a.py", "src/pkg/b.py", "src/src/i.py", "src/test_a/b.py", "src/x/k.py"),
    *("src/pkg/x/m.py", "lib/src/c.py", "lib/src/deep/er/d.py", "lib/src/x/n.py"),
    "a/src/b/src/h.py",
]
UNDER_SRC = [*ONE_LETTER_UNDER_SRC, "src/pkg/test_c.py", "lib/src/xak.py"]


# Patterns with two '**/' (or more wildcards that can take any share of a path): the
# handout's state-set matcher is one way to keep them fast; whatever the way, they mean
# exactly what each part says.
@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("**/src/**/*.py", UNDER_SRC),
        ("**/src/**/src/*.py", ["a/src/b/src/h.py", "src/src/i.py"]),
        ("**/*src/**/*.py", [*UNDER_SRC, "xsrc/e.py"]),
        ("src/**/x/**/*.py", ["src/pkg/x/m.py", "src/x/k.py"]),
        ("**/src/**/test_*.py", ["src/pkg/test_c.py"]),
        ("**/src/**/?.py", ONE_LETTER_UNDER_SRC),
        ("**/src/**/x?k.py", ["lib/src/xak.py"]),
        ("**/s?c/**/*.py", UNDER_SRC),
    ],
)
def test_several_double_star_folders_in_one_pattern_mean_what_each_says(
    workspace: Path, pattern: str, expected: list[str]
) -> None:
    for name in TREE:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("")
    assert sorted(lines_of(glob(workspace, pattern))) == sorted(expected), (
        f"{pattern!r}: each '**/' is any number of whole folders (none included), wherever it "
        "stands and however many there are; 'src/' is a folder named exactly src, '*' and "
        "'?' never match a '/', and the whole path must match, to its last character. "
        f"Expected {sorted(expected)}"
    )


# Each wrong translation is slow but finite here (seconds to a minute; a regular expression
# cannot be stopped, and it holds the interpreter while it runs), the right one instant.
SLOW_MATCHES = {
    "stars-around-text": (
        90,
        "*a*a*a*a*a*a*b",
        "the regular expression backtracks through every way to split the name among the "
        "stars. Let a * followed by fixed text and another * take the first place that text "
        "occurs, atomically, (?>[^/]*?a), as the handout says",
    ),
    "a-run-of-double-stars": (
        250,
        "**********b",
        "five '**' in a row backtrack through every way to share the name among them. Count "
        "a run of the same wildcard once, as the handout says: '**********' is one '**'",
    ),
}


@pytest.mark.parametrize("case", list(SLOW_MATCHES))
def test_glob_matching_stays_fast_on_any_name(workspace: Path, case: str) -> None:
    length, pattern, why = SLOW_MATCHES[case]
    (workspace / ("a" * length)).write_text("")
    started = time.monotonic()
    out = glob(workspace, pattern)
    took = time.monotonic() - started
    assert "No paths match" in text_of(out)
    # A bound on a hang, not a speed target: a linear match takes milliseconds here.
    assert took < HANG_BOUND_SECONDS, (
        f"{OVER_TIME_LIMIT}glob took {took:.0f} s to find that no name of {length} a's "
        f"matches {pattern}: {why}"
    )


def test_glob_takes_every_other_character_literally(workspace: Path) -> None:
    for name in ("notes.md", "notes-md", "a+b.py", "aab.py", "(x).txt", "x.txt", "[ab].py", "a.py"):
        (workspace / name).write_text("")
    assert lines_of(glob(workspace, "notes.md")) == ["notes.md"], ". is a dot, not any character"
    assert lines_of(glob(workspace, "a+b.py")) == ["a+b.py"], "+ is a plus sign"
    assert lines_of(glob(workspace, "(x).txt")) == ["(x).txt"], "( and ) are parentheses"
    assert lines_of(glob(workspace, "[ab].py")) == ["[ab].py"], (
        "[ and ] are brackets, not a character class: only *, ** and ? are wildcards"
    )


def test_glob_reads_gitignore_from_the_workspace_root_wherever_it_searches(
    project: Path,
) -> None:
    (project / ".gitignore").write_text("build/\n*.log\n/src/app/generated.py\n/src/app/util/\n")
    for name in ("generated.py", "debug.log"):
        (project / "src" / "app" / name).write_text("")
    (project / "generated.py").write_text("")
    assert lines_of(glob(project, "*", path="src/app")) == [
        "src/app/__init__.py",
        "src/app/core.py",
    ], (
        "the workspace root's .gitignore applies below any search path, and its patterns "
        "are relative to the root: match the path relative to the workspace"
    )
    assert lines_of(glob(project, "generated.py")) == ["generated.py"], (
        "/src/app/generated.py is anchored at the root: it ignores that one file only"
    )


def test_a_gitignore_that_is_a_fifo_never_stalls_glob(project: Path) -> None:
    fifo = project / ".gitignore"
    fifo.unlink()
    os.mkfifo(fifo)

    async def search() -> ToolOutput:
        task = asyncio.ensure_future(call(tools(project), "glob", {"pattern": "*"}))
        return await end_or_release(
            task,
            lambda: play_fifo_writer(fifo),
            within=10,
            failure="glob waited for a writer on a .gitignore that is a FIFO: open it with "
            "files.open_regular_file, which refuses what is not a regular file without waiting",
        )

    out = run(search(), timeout=60)
    assert not out.is_error and "README.md" in lines_of(out), (
        f"a .gitignore that cannot be read is ignored: glob still answers. Got: {text_of(out)!r}"
    )


def test_a_huge_gitignore_is_read_only_up_to_its_first_mib(project: Path) -> None:
    with open(project / ".gitignore", "wb") as file:
        file.write(b"*.log\n#")
        for _ in range(64):
            file.write(b"x" * 2**20)
    tracemalloc.start()
    try:
        out = glob(project, "*")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, (
        f"glob held {peak / 2**20:.0f} MiB for a 64 MiB .gitignore: read at most its first "
        "MiB (file.read(1 << 20)), so a huge file there cannot fill memory"
    )
    assert "README.md" in lines_of(out) and "notes.log" not in lines_of(out), (
        "the lines within the first MiB still count: *.log still ignores notes.log"
    )


def test_a_gitignore_line_git_cannot_read_is_skipped_and_the_others_still_count(
    project: Path,
) -> None:
    (project / ".gitignore").write_text("*.log\n!\n[z-a]\nfoo\\\nbuild/\n")
    out = glob(project, "*")
    assert not out.is_error, (
        "a .gitignore line that git cannot read ('!', '[z-a]', 'foo\\') is skipped, as git "
        "does: pathspec raises for it, so build the spec from the lines it accepts. "
        f"Got: {text_of(out)!r}"
    )
    assert "README.md" in lines_of(out) and "notes.log" not in lines_of(out), (
        "the lines that can be read still count: *.log still ignores notes.log"
    )


def test_a_gitignore_negation_brings_a_file_back(project: Path) -> None:
    (project / ".gitignore").write_text("*.log\n!keep.log\n")
    (project / "keep.log").write_text("")
    (project / "drop.log").write_text("")
    assert lines_of(glob(project, "*.log")) == ["keep.log"], (
        "'!keep.log' after '*.log' brings keep.log back, as git does: give pathspec every "
        "line it accepts, negations included (only a bare '!' is a line git cannot read)"
    )


def test_a_gitignore_changed_since_the_last_search_counts_now(project: Path) -> None:
    assert "notes.log" not in lines_of(glob(project, "*.log")), "*.log ignores notes.log"
    (project / ".gitignore").write_text("build/\n")
    assert lines_of(glob(project, "*.log")) == ["notes.log"], (
        "invariant: each search reads the workspace root's .gitignore afresh; it no longer "
        "ignores *.log, so notes.log is found now. Keep no parsed .gitignore from an "
        "earlier search (no cache by workspace)"
    )


def test_a_gitignore_line_that_is_not_utf8_voids_only_itself(project: Path) -> None:
    (project / ".gitignore").write_bytes(b"*.log\ncaf\xe9/\nbuild/\n")
    out = glob(project, "**")
    assert not out.is_error and "README.md" in lines_of(out), (
        f"a .gitignore line that is not UTF-8 is no reason to fail the search: {text_of(out)!r}"
    )
    assert "notes.log" not in lines_of(out) and "build/out.py" not in lines_of(out), (
        "one .gitignore line that is not UTF-8 must not void the others (decode with "
        f"errors='replace'): *.log and build/ still count. Got: {lines_of(out)}"
    )


def test_a_gitignore_cut_at_its_first_mib_drops_its_partial_last_line(project: Path) -> None:
    head = b"#"
    last_whole = b"\n*.log\n"  # the last whole line before the cut still counts
    cut = b"README"  # the first MiB ends inside the line README.orig
    filler = b"x" * (2**20 - len(head) - len(last_whole) - len(cut))
    (project / ".gitignore").write_bytes(head + filler + last_whole + cut + b".orig\n")
    for name in ("README", "R"):
        (project / name).write_text("kept\n")
    out = glob(project, "*")
    assert {"README", "R"} <= set(lines_of(out)) and "notes.log" not in lines_of(out), (
        "a .gitignore cut at its first MiB ends in half a line: 'README' of 'README.orig' "
        "(or any start of it, such as 'R') would ignore a file that is not ignored. Drop the "
        "part after the last newline when the read was cut; every whole line before it "
        f"still counts ('*.log', the last one). Got: {lines_of(out)}"
    )


def test_glob_skips_hidden_dependency_and_ignored_paths_unless_asked(project: Path) -> None:
    # A virtual environment deeper down, with a name of its own: its pyvenv.cfg says what it is.
    (project / "src/app/localenv/lib").mkdir(parents=True)
    (project / "src/app/localenv/pyvenv.cfg").write_text("home = /usr\n")
    (project / "src/app/localenv/lib/site.py").write_text("")
    everything = text_of(glob(project, "**/*"))
    for skipped in (".env", ".github", "node_modules", "env/", "build/", "notes.log"):
        assert skipped not in everything, (
            f"{skipped} must be skipped: hidden paths, dependency folders (node_modules, "
            "virtual environments) and what .gitignore ignores"
        )
    assert "localenv" not in everything, (
        "src/app/localenv holds a pyvenv.cfg: a virtual environment at any depth is skipped "
        "(look for pyvenv.cfg in the folder being walked, os.path.join(folder, name), not "
        f"below the search root). Got: {everything!r}"
    )
    asked = lines_of(glob(project, "**/setup.py", include_hidden=True))
    assert asked == ["node_modules/left-pad/setup.py", "setup.py"], (
        "include_hidden=true searches everything"
    )
    assert "notes.log" in lines_of(glob(project, "*.log", include_hidden=True))


def test_glob_never_lists_a_folder_it_skips(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (".git/objects/ab/cd.py", "node_modules/left-pad/lib/deep.py", "build/x/y.py"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("")
    (project / "src/app/__pycache__/core.cpython-311.pyc").parent.mkdir()
    (project / "src/app/__pycache__/core.cpython-311.pyc").write_text("")
    listed: list[str] = []  # the folders listed, relative to the workspace
    base = os.path.realpath(project)

    def spy(real: Any) -> Any:
        def listing(path: Any = ".") -> Any:
            shown = path
            if isinstance(path, int):  # os.fwalk lists by descriptor: which folder is it?
                try:
                    shown = os.readlink(f"/proc/self/fd/{path}")
                except OSError:  # no /proc (macOS): this listing cannot be told
                    return real(path)
            listed.append(os.path.relpath(os.path.realpath(os.fsdecode(shown)), base))
            return real(path)

        return listing

    monkeypatch.setattr(os, "scandir", spy(os.scandir))  # os.walk lists with os.scandir
    monkeypatch.setattr(os, "listdir", spy(os.listdir))
    out = glob(project, "**/*")
    assert not out.is_error, text_of(out)
    assert "." in listed and os.path.join("src", "app") in listed, (
        "this test watches which folders are listed through os.scandir and os.listdir: walk "
        f"with os.walk, as the handout says (it lists with os.scandir). Listed: {listed}"
    )
    skipped = {".git", ".github", "node_modules", "env", "build", "__pycache__"}
    inside = [p for p in listed if not p.startswith("..")]
    looked_into = sorted(p for p in inside if skipped & set(Path(p).parts))
    assert looked_into == [], (
        "invariant: glob prunes hidden paths, dependency folders, virtual environments and "
        "what .gitignore ignores before descending: it never lists a skipped folder (a "
        "node_modules or .git can hold hundreds of thousands of files). Remove them from "
        "os.walk's folder list in place (folders[:] = kept) instead of dropping their paths "
        f"after the walk. Listed: {looked_into}"
    )


def test_glob_caps_results_with_a_notice_suggesting_a_narrower_pattern(workspace: Path) -> None:
    for number in range(25):
        (workspace / f"m{number:02}.py").write_text("")
    out = glob(workspace, "*.py", limit=5)
    lines = lines_of(out)
    assert lines[:5] == [f"m{number:02}.py" for number in range(5)]
    assert len(lines) == 6 and "Showing 5 of 25" in lines[-1] and "narrower" in lines[-1]
    assert out.details == GlobDetails("*.py", 25, True)
    exact = glob(workspace, "*.py", limit=25)
    assert len(lines_of(exact)) == 25 and exact.details == GlobDetails("*.py", 25, False), (
        "exactly `limit` matches are all shown, without a notice"
    )


def test_glob_with_no_match_says_so_and_bad_patterns_are_errors(project: Path) -> None:
    out = glob(project, "**/*.rs")
    assert not out.is_error and "No paths match '**/*.rs'." in text_of(out), (
        f"no match is a result that says No paths match '{{pattern}}'. Got: {text_of(out)!r}"
    )
    assert out.details == GlobDetails("**/*.rs", 0, False)
    for pattern in ("it's*.md", "notes\t*.md"):
        said = text_of(glob(project, pattern))
        assert f"No paths match {pattern!r}." in said, (
            "the pattern in No paths match ... is written as repr writes it (its own quote "
            f"and control characters escaped): f'No paths match {{pattern!r}}.'. Got: {said!r}"
        )
    for pattern in ("", "../*", "/etc/*", "src/../../*", "src/../*", "**/../*.py"):
        refused = glob(project, pattern)
        assert refused.is_error and text_of(refused).strip(), (
            f"pattern {pattern!r} must be refused with a text that says what to give instead: "
            "a pattern that climbs with '..' is refused wherever the '..' stands, not only at "
            "its start"
        )
    for blank in ("   ", "\t"):
        refused = glob(project, blank)
        assert refused.is_error and "empty" in text_of(refused), (
            f"a pattern of whitespace alone ({blank!r}) is refused as empty, as the handout "
            f"says, never searched. Got: {text_of(refused)!r}"
        )
    for path, says in (
        ("README.md", "README.md is a file, not a directory"),
        ("missing", "File not found"),
    ):
        out = glob(project, "*", path=path)
        assert out.is_error and path in text_of(out) and says in text_of(out), (
            f"glob below {path!r} must be an error that names it and says {says!r}, as ls "
            "does: a missing path is not found (describe_os_error with its "
            f"FileNotFoundError), a file is a file; neither has a parent that is a file. "
            f"Got: {text_of(out)!r}"
        )


def test_a_pattern_whose_dots_are_not_a_part_of_their_own_is_not_refused(
    workspace: Path,
) -> None:
    for name in ("notes..old", "v1..2/a.txt", "a..b.py"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("")
    for pattern, expected in (
        ("notes..*", "notes..old"),
        ("v1..2/*", "v1..2/a.txt"),
        ("*..*.py", "a..b.py"),
    ):
        out = glob(workspace, pattern)
        assert not out.is_error and lines_of(out) == [expected], (
            f"{pattern!r} climbs nowhere: '..' is refused only as a whole part between "
            f"slashes (pattern.split('/')), as with paths ('..notes' is a name too). Got: "
            f"{text_of(out)!r}"
        )


def test_glob_never_leaves_the_workspace(workspace: Path, outside: Path) -> None:
    (outside / "leak.py").write_text("")
    (workspace / "inside.py").write_text("")
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    assert lines_of(glob(workspace, "**/*.py")) == ["inside.py"], (
        "the walk must not follow a symlinked folder out of the workspace"
    )
    out = glob(workspace, "*", path="../outside")
    assert out.is_error and "escapes the workspace" in text_of(out)


# ---------------------------------------------------------------- read-only


def test_looking_around_changes_nothing_and_the_tools_say_they_are_read_only(
    project: Path,
) -> None:
    before = snapshot(project)
    stamps = {path: os.stat(path).st_mtime_ns for path in (project, project / "src")}
    ls(project)
    glob(project, "**/*", include_hidden=True)
    assert snapshot(project) == before, "ls and glob must not change the workspace"
    assert {path: os.stat(path).st_mtime_ns for path in stamps} == stamps
    definitions = {d["name"]: d for d in tools(project).definitions()}
    assert list(definitions) == ["read", "write", "edit", "bash", "ls", "glob"], (
        "navigation=True adds ls and glob after the four core tools"
    )
    read_only = {
        name for name, d in definitions.items() if d.get("annotations", {}).get("readOnlyHint")
    }
    assert read_only == {"read", "ls", "glob"}, (
        "the looking tools are annotated read-only, so an agent can run them without asking"
    )
