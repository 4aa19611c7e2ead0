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
        matches = await in_thread(_walk, options.cwd, root, _compile(pattern), include_hidden)
    except PathError as error:
        return ToolOutput.error(str(error))
    except _NotAFolder:
        return ToolOutput.error(f"{path} is a file, not a directory: give the folder to search.")
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="search"))
    except ValueError:  # a lone surrogate cannot be a file name on this system
        return ToolOutput.error(unusable_path(path))
    cap = limit or DEFAULT_GLOB_LIMIT
    truncated = len(matches) > cap
    lines = matches[:cap]
    if truncated:
        lines.append(f"[Showing {cap} of {len(matches)} matches; use a narrower pattern or path]")
    elif not matches:
        lines.append(f"No paths match {pattern!r}.")
    return ToolOutput.of_text("\n".join(lines), GlobDetails(pattern, len(matches), truncated))


def _compile(pattern: str) -> re.Pattern[str]:
    """A glob as a regular expression over '/'-separated relative paths."""
    parts, index = [], 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            parts.append("(?:[^/]+/)*")  # any number of folders, none included
            index += 3
        elif pattern.startswith("**", index):
            parts.append(".*")
            index += 2
        elif pattern[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            parts.append("[^/]")
            index += 1
        else:
            parts.append(re.escape(pattern[index]))
            index += 1
    return re.compile(_without_backtracking(parts))


_WILDCARDS = frozenset({"(?:[^/]+/)*", ".*", "[^/]*"})


def _without_backtracking(parts: list[str]) -> str:
    """Join the parts so that matching stays fast on any path. Python's re backtracks
    through every way to split a name among several wildcards (``*a*a*a*b`` against a long
    name of a's, or ``**/**/**/x`` against a deep path, would run for hours in a thread
    nobody can stop). So a run of one wildcard counts once, and a ``*`` followed by fixed
    text and another ``*`` takes the first place that text occurs, atomically, as fnmatch
    does: the next ``*`` can absorb anything a later place would have skipped."""
    merged: list[str] = []
    for part in parts:
        if not (merged and part in _WILDCARDS and merged[-1] == part):
            merged.append(part)
    joined, index = [], 0
    while index < len(merged):
        end = index + 1
        if merged[index] == "[^/]*":
            while end < len(merged) and merged[end] not in _WILDCARDS:
                end += 1
            if end > index + 1 and end < len(merged) and merged[end] == "[^/]*":
                joined.append(f"(?>[^/]*?{''.join(merged[index + 1 : end])})")
                index = end
                continue
        joined.append(merged[index])
        index += 1
    return "".join(joined)


class _NotAFolder(Exception):
    """The path to search exists and is not a folder."""


def _walk(workspace: str, root: str, pattern: re.Pattern[str], include_hidden: bool) -> list[str]:
    if not os.path.isdir(root):
        os.stat(root)  # missing, or below a file: its OSError says which
        raise _NotAFolder(root)
    ignored = _gitignore(workspace) if not include_hidden else None
    found = []
    for folder, folders, files in os.walk(root):  # never follows symlinked folders
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
    return sorted(found)


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
