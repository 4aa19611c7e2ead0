"""The one path resolver that read, write and edit share.

Given: joining a path argument onto the workspace. Lab 8.2 (``containment.py``) decides
whether the result may be used in workspace mode.

Whatever the model sends, the answer is a path or a ``PathError`` that says what to do:
text the OS cannot take as a file name (a NUL, a lone surrogate) and paths longer than
the OS accepts are refused here, before any system call could raise something else.
"""

from __future__ import annotations

import os

from picourse.coding_tools.containment import ensure_inside_workspace
from picourse.coding_tools.errors import PathError, path_in_flux
from picourse.coding_tools.options import CodingToolOptions

_FALLBACK_PATH_MAX = 4096  # Linux; macOS allows 1024, pathconf tells where it is known


def resolve_path(options: CodingToolOptions, path: str) -> str:
    """Return the absolute path the tool works on, or raise ``PathError``."""
    if not path.strip():
        raise PathError("path must not be empty: give a file path relative to the workspace")
    if "\0" in path:
        raise PathError("path must not contain NUL characters")
    try:
        # Tools quote the path in their results and count results in UTF-8 bytes.
        path.encode("utf-8")
        encoded = os.fsencode(absolute := os.path.normpath(os.path.join(options.cwd, path)))
    except UnicodeEncodeError as error:
        bad = error.object[error.start : error.end]
        raise PathError(
            f"path contains {bad!r}, a lone surrogate that is not text; give the path as "
            "plain UTF-8 text (list odd names with bash `ls`)"
        ) from None
    if len(encoded) >= _path_max(options.cwd):
        raise PathError(
            f"path is too long ({len(encoded)} bytes once joined onto the workspace); "
            "give a shorter path"
        )
    if options.containment == "workspace":
        try:
            ensure_inside_workspace(options.cwd, absolute)
        except RecursionError:
            raise PathError("path is nested too deeply to resolve; give a shorter path") from None
        except OSError as error:  # a symlink swapped for a file as realpath read it
            raise PathError(path_in_flux(path, error)) from None
    return absolute


def _path_max(directory: str) -> int:
    try:
        return os.pathconf(directory, "PC_PATH_MAX")
    except (OSError, ValueError):
        return _FALLBACK_PATH_MAX
