"""Links in a directory submission are refused before anything in it is read: the grader
(often root) would otherwise read a classmate's work or the solution through them."""

from __future__ import annotations

import os
from pathlib import Path

from grader._intake import InvalidSubmission, check_depth


def refuse_links(source: Path) -> None:
    """Raise InvalidSubmission for a link anywhere inside a directory submission. The entry
    itself may be a link: the submissions folder is the instructor's arrangement."""
    source = source.resolve()
    if not source.is_dir():
        return

    def unreadable(error: OSError) -> None:
        raise InvalidSubmission(f"cannot list {error.filename}: {error.strerror}")

    for root, dirs, files in os.walk(source, onerror=unreadable):
        check_depth(source, root)
        for name in [*dirs, *files]:
            path = Path(root, name)
            if path.is_symlink():
                raise InvalidSubmission(
                    f"{path.relative_to(source)} is a symbolic link; replace it with the file "
                    "itself and submit again"
                )
