"""The one path resolver that read, write and edit share.

Given: joining a path argument onto the workspace. Lab 8.2 (``containment.py``) decides
whether the result may be used in workspace mode.
"""

from __future__ import annotations

import os

from picourse.coding_tools.containment import ensure_inside_workspace
from picourse.coding_tools.errors import PathError
from picourse.coding_tools.options import CodingToolOptions


def resolve_path(options: CodingToolOptions, path: str) -> str:
    """Return the absolute path the tool works on, or raise ``PathError``."""
    if not path.strip():
        raise PathError("path must not be empty: give a file path relative to the workspace")
    if "\0" in path:
        raise PathError("path must not contain NUL characters")
    absolute = os.path.normpath(os.path.join(options.cwd, path))
    if options.containment == "workspace":
        ensure_inside_workspace(options.cwd, absolute)
    return absolute
