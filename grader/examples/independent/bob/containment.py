"""Containment for the coding tools (independent version used by the similarity tests)."""

import os

from picourse.coding_tools.errors import WorkspaceEscapeError

SEP = os.sep


def _inside(candidate, root):
    root = root.rstrip(SEP) + SEP
    return (candidate + SEP).startswith(root)


def _nearest_existing(path):
    while path and not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def ensure_inside_workspace(workspace, target):
    root = os.path.normpath(os.path.abspath(workspace))
    full = os.path.normpath(os.path.join(root, target))
    if not _inside(full, root):
        raise WorkspaceEscapeError("path %r escapes the workspace %r" % (target, root))
    resolved_root = os.path.realpath(root)
    resolved = os.path.realpath(_nearest_existing(full))
    if not _inside(resolved, resolved_root):
        msg = "path %r escapes the workspace: a symlink leads to %r" % (target, resolved)
        raise WorkspaceEscapeError(msg)
