"""Errors the path resolver raises, and the wording of OS errors that tools report."""

from __future__ import annotations


class PathError(Exception):
    """A path argument that cannot be used; the message says what to do instead."""


class WorkspaceEscapeError(PathError):
    """The path leaves the workspace, lexically or through a symlink."""


class ChangeRefused(Exception):
    """A write or edit that cannot be applied as asked; the message says what to do
    instead. Raise it before anything is written."""


def describe_os_error(path: str, error: OSError, *, action: str) -> str:
    """One sentence a model can act on, for ``action`` ('read', 'write', 'edit')."""
    if isinstance(error, FileNotFoundError):
        advice = " Use write to create a new file." if action == "edit" else ""
        return (
            f"File not found: {path}. Check the path; relative paths start at the workspace."
            + advice
        )
    if isinstance(error, IsADirectoryError):
        return (
            f"{path} is a directory, not a file; give the path of a file (list it with bash `ls`)."
        )
    if isinstance(error, (NotADirectoryError, FileExistsError)):
        return f"Cannot {action} {path}: a parent of it is a file, not a directory."
    if isinstance(error, PermissionError):
        return f"Permission denied: cannot {action} {path}."
    return f"Cannot {action} {path}: {error.strerror or error}."


def path_in_flux(path: str, error: OSError) -> str:
    """The answer when resolving ``path`` failed because another program swapped a symlink
    in it meanwhile (``os.path.realpath`` lets readlink's error out)."""
    reason = error.strerror or str(error)
    return (
        f"Cannot resolve {path}: it changed while it was being resolved ({reason}); another "
        "program is replacing it. Try again once it has settled."
    )


def unusable_path(path: str) -> str:
    """The answer for a path the OS cannot take at all (a lone surrogate, for one)."""
    return (
        f"Cannot use the path {path!r}: it holds characters no file name can have here. "
        "Give the name exactly as ls or glob shows it."
    )
