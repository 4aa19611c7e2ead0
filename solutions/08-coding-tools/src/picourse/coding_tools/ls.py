"""Lab 8.7 (reference): list one directory, read-only.

Folders first (with a / suffix), then everything else, each group sorted by name; a
count at the end, and a cap with a notice that says how to see the rest. The directory
goes through the workspace resolver of Lab 8.2 like every other path; nothing here can
write.
"""

from __future__ import annotations

import os

from picourse.coding_tools.details import ListDetails
from picourse.coding_tools.errors import PathError, describe_os_error, unusable_path
from picourse.coding_tools.options import DEFAULT_LIST_LIMIT, CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.threads import in_thread
from picourse.tool import ToolOutput


async def list_directory(
    options: CodingToolOptions, path: str = ".", *, limit: int | None = None
) -> ToolOutput:
    try:
        absolute = resolve_path(options, path)
        names = await in_thread(_entries, absolute)
    except PathError as error:
        return ToolOutput.error(str(error))
    except _NotAFolder:
        return ToolOutput.error(f"{path} is a file, not a directory: read it with read.")
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="list"))
    except ValueError:  # a lone surrogate cannot be a file name on this system
        return ToolOutput.error(unusable_path(path))
    cap = limit or DEFAULT_LIST_LIMIT
    shown = names[:cap]
    truncated = len(names) > cap
    if truncated:
        footer = (
            f"[Showing {cap} of {len(names)} entries; use glob with a pattern to find "
            "what you need]"
        )
    else:
        footer = f"[{len(names)} entr{'y' if len(names) == 1 else 'ies'}]"
    body = "\n".join([*shown, footer]) if shown else footer
    return ToolOutput.of_text(body, ListDetails(absolute, len(names), truncated))


class _NotAFolder(Exception):
    """The path to list exists and is not a folder."""


def _entries(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        os.stat(directory)  # missing, or below a file: its OSError says which
        raise _NotAFolder(directory)
    folders: list[str] = []
    files: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                is_folder = entry.is_dir()  # a symlink to a folder lists as a folder
            except OSError:
                is_folder = False
            (folders if is_folder else files).append(entry.name)
    return [f"{name}/" for name in sorted(folders)] + sorted(files)
