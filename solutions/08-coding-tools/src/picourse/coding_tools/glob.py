"""Lab 8.7 (reference): find paths by pattern, read-only.

``*`` and ``?`` match within one name, ``**`` matches any number of folders. The walk
never follows symlinked folders (so it cannot leave the workspace through one), prunes
hidden paths, dependency folders and what the workspace's .gitignore ignores before
descending into them (unless asked), and returns paths relative to the workspace, sorted,
capped with a notice.
"""

from __future__ import annotations

import os
import re
from typing import Protocol

import pathspec

from picourse.coding_tools.details import GlobDetails
from picourse.coding_tools.errors import PathError, describe_os_error, unusable_path
from picourse.coding_tools.files import open_regular_file
from picourse.coding_tools.options import (
    DEFAULT_GLOB_LIMIT,
    DEPENDENCY_FOLDERS,
    CodingToolOptions,
)
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.threads import in_thread
from picourse.tool import ToolOutput

_MAX_GITIGNORE_BYTES = 1 << 20


async def find_paths(
    options: CodingToolOptions,
    pattern: str,
    path: str = ".",
    *,
    include_hidden: bool = False,
    limit: int | None = None,
) -> ToolOutput:
    if not pattern.strip():
        return ToolOutput.error("pattern must not be empty: try '**/*.py' or 'src/*'.")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        return ToolOutput.error(
            "pattern must be relative and stay below path: give the folder as path and a "
            "pattern such as '**/*.py'."
        )
    try:
        root = resolve_path(options, path)
        matches, unreadable = await in_thread(
            _walk, options.cwd, root, _compile(pattern), include_hidden
        )
    except PathError as error:
        return ToolOutput.error(str(error))
    except _NotAFolder:
        return ToolOutput.error(f"{path} is a file, not a directory: give the folder to search.")
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="search"))
    except ValueError:  # a lone surrogate cannot be a file name on this system
        return ToolOutput.error(unusable_path(path))
    except RecursionError:  # os.walk recurses per folder level on Python 3.11
        return ToolOutput.error(
            f"{path} holds folders nested too deep to search (about a thousand levels); "
            "give a folder further down as path."
        )
    cap = limit or DEFAULT_GLOB_LIMIT
    truncated = len(matches) > cap
    lines = matches[:cap]
    if truncated:
        lines.append(f"[Showing {cap} of {len(matches)} matches; use a narrower pattern or path]")
    elif not matches:
        lines.append(f"No paths match {pattern!r}.")
    if unreadable:  # a search that could not look everywhere says so
        lines.append(_unreadable_notice(unreadable))
    return ToolOutput.of_text("\n".join(lines), GlobDetails(pattern, len(matches), truncated))


class _Matcher(Protocol):
    def fullmatch(self, path: str, /) -> object: ...


# Each wildcard is the regular expression it becomes; any other token is one character.
_FOLDERS, _ANYTHING, _STAR, _ONE = "(?:[^/]+/)*", ".*", "[^/]*", "[^/]"
_WILDCARDS = frozenset({_FOLDERS, _ANYTHING, _STAR})
# A wildcard may take the first place the fixed text after it occurs when the next wildcard
# can absorb whatever a later place would have skipped: never before a '**/' (it may match
# no folder at all), and a '**' never before a '*' (that one cannot cross a '/').
_ATOMIC_BEFORE = {_STAR: (_STAR, _ANYTHING), _ANYTHING: (_ANYTHING,)}


def _compile(pattern: str) -> _Matcher:
    """A glob as a matcher of '/'-separated relative paths ('**' crosses any character,
    a newline too: re.DOTALL)."""
    tokens: list[str] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            tokens.append(_FOLDERS)  # any number of folders, none included
            index += 3
        elif pattern.startswith("**", index):
            tokens.append(_ANYTHING)
            index += 2
        else:
            tokens.append({"*": _STAR, "?": _ONE}.get(pattern[index], pattern[index]))
            index += 1
    # A run of one wildcard counts once: '**/**/' is '**/'.
    merged = [t for i, t in enumerate(tokens) if not (i and t in _WILDCARDS and tokens[i - 1] == t)]
    expression, loose = _without_backtracking(merged)
    return re.compile(expression, re.DOTALL) if loose <= 1 else _StateSet(merged)


def _without_backtracking(tokens: list[str]) -> tuple[str, int]:
    """The tokens as a regular expression, and how many of its wildcards still backtrack.
    Python's re backtracks through every way to split a name among several wildcards
    (``*a*a*a*b`` against a long name of a's, or ``**/**/**/x`` against a deep path, would
    run for hours in a thread nobody can stop, holding the GIL). So a wildcard followed by
    fixed text and a wildcard that absorbs anything a later place would have skipped takes
    the first place that text occurs, atomically, as fnmatch does. The last wildcard (only
    fixed text after it) is tried once per attempt of those before it. With at most one
    other wildcard left to backtrack, re stays quadratic, in C; with more
    (``**a*a**a*b``, ``**/a/**/a/**/b``), _compile uses a state-set matcher instead."""
    parts, loose, index = [], 0, 0
    while index < len(tokens):
        wildcard, end = tokens[index], index + 1
        while end < len(tokens) and tokens[end] not in _WILDCARDS:
            end += 1
        fixed = "".join(re.escape(t) if len(t) == 1 else t for t in tokens[index + 1 : end])
        if wildcard not in _WILDCARDS:  # fixed text at the start
            parts.append(re.escape(wildcard) if len(wildcard) == 1 else wildcard)
            parts.append(fixed)
        elif fixed and end < len(tokens) and tokens[end] in _ATOMIC_BEFORE.get(wildcard, ()):
            parts.append(f"(?>{wildcard}?{fixed})")
        else:
            parts.append(wildcard + fixed)
            loose += end < len(tokens)
        index = end
    return "".join(parts), loose


_MAX_REMEMBERED = 1 << 20  # states kept in remembered steps: a bound on memory


class _StateSet:
    """Follows every place in the pattern the path read so far can have reached, all at
    once: len(path) steps over at most 2 * len(tokens) + 1 states, whatever the pattern.
    State 2*i is "before token i"; 2*i + 1 is "inside a folder name of the '**/' at i".
    Steps are remembered per set of states, so a path mostly costs a lookup per character."""

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = tokens
        self._end = 2 * len(tokens)
        self._start = self._closed({0})
        self._steps: dict[tuple[frozenset[int], str], frozenset[int]] = {}
        self._room = _MAX_REMEMBERED

    def fullmatch(self, path: str, /) -> bool:
        states = self._start
        for char in path:
            after = self._steps.get((states, char))
            if after is None:
                after = self._step(states, char)
                if self._room > len(after):
                    self._steps[states, char] = after
                    self._room -= len(after) + 1
            if not after:
                return False
            states = after
        return self._end in states

    def _step(self, states: frozenset[int], char: str) -> frozenset[int]:
        after = set()
        for state in states:
            index, inside = divmod(state, 2)
            token = self._tokens[index] if state < self._end else ""
            if inside:  # a folder name of '**/' goes on, or ends at its '/'
                after.add(state - 1 if char == "/" else state)
            elif token == _ANYTHING or (token == _STAR and char != "/"):
                after.add(state)
            elif token == _FOLDERS and char != "/":
                after.add(state + 1)
            elif token == char or (token == _ONE and char != "/"):
                after.add(state + 2)
        return self._closed(after)

    def _closed(self, states: set[int]) -> frozenset[int]:
        """The states plus those reached by letting wildcards match nothing."""
        closed: set[int] = set()
        for state in states:
            while state not in closed:
                closed.add(state)
                if state % 2 or state == self._end or self._tokens[state // 2] not in _WILDCARDS:
                    break
                state += 2
        return frozenset(closed)


class _NotAFolder(Exception):
    """The path to search exists and is not a folder."""


_NAMED_UNREADABLE = 5


def _unreadable_notice(folders: list[str]) -> str:
    named = ", ".join(folders[:_NAMED_UNREADABLE])
    more = (
        f" and {len(folders) - _NAMED_UNREADABLE} more" if len(folders) > _NAMED_UNREADABLE else ""
    )
    return (
        f"[Could not read {len(folders)} folder{'s' if len(folders) > 1 else ''} ({named}{more}): "
        "what they hold is not listed; ls one to see why]"
    )


def _walk(
    workspace: str, root: str, pattern: _Matcher, include_hidden: bool
) -> tuple[list[str], list[str]]:
    """The matches, and the folders that could not be listed (os.walk skips them quietly)."""
    if not os.path.isdir(root):
        os.stat(root)  # missing, or below a file: its OSError says which
        raise _NotAFolder(root)
    ignored = _gitignore(workspace) if not include_hidden else None
    found: list[str] = []
    unreadable: list[str] = []

    def skipped_folder(error: OSError) -> None:
        unreadable.append(_relative(workspace, os.fsdecode(error.filename or root)) + "/")

    for folder, folders, files in os.walk(root, onerror=skipped_folder):  # no symlinked folders
        kept = []
        for name in folders:
            inside = _relative(workspace, os.path.join(folder, name)) + "/"
            virtualenv = os.path.exists(os.path.join(folder, name, "pyvenv.cfg"))
            if include_hidden or not (virtualenv or _skipped(name, inside, ignored)):
                kept.append(name)
        folders[:] = sorted(kept)  # pruned in place: os.walk does not descend
        for name in [*kept, *files]:
            full = os.path.join(folder, name)
            relative = _relative(root, full)
            shown = _relative(workspace, full)
            is_folder = name in kept
            if not is_folder and not include_hidden and _skipped(name, shown, ignored):
                continue
            if pattern.fullmatch(relative):
                found.append(shown + ("/" if is_folder else ""))
    return sorted(found), sorted(unreadable)


def _skipped(name: str, relative: str, ignored: pathspec.GitIgnoreSpec | None) -> bool:
    if name.startswith(".") or name in DEPENDENCY_FOLDERS:
        return True
    return ignored is not None and ignored.match_file(relative)


def _gitignore(workspace: str) -> pathspec.GitIgnoreSpec | None:
    """The workspace root's .gitignore: its patterns are relative to the root, whatever
    folder the search starts in. A FIFO or a huge file there must not stall the walk."""
    try:
        with open_regular_file(os.path.join(workspace, ".gitignore")) as file:
            data = file.read(_MAX_GITIGNORE_BYTES)
    except OSError:
        return None
    if len(data) == _MAX_GITIGNORE_BYTES:  # cut: its last line may be half a pattern
        data = data[: data.rfind(b"\n") + 1]
    # One undecodable line must not void the others: it becomes a pattern nothing matches.
    lines = data.decode("utf-8", errors="replace").splitlines()
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        # As git does, skip the patterns that cannot be read (`!`, `foo\`, `[z-a]`).
        return pathspec.GitIgnoreSpec.from_lines(line for line in lines if _readable(line))


def _readable(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error):
        return False
    return True


def _relative(start: str, path: str) -> str:
    return os.path.relpath(path, start).replace(os.sep, "/")
