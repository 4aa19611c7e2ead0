"""The command lines of a grading run: bubblewrap's view of the filesystem."""

from __future__ import annotations

from pathlib import Path

from grader._sandbox._users import closed_ancestors, interpreter_paths


def bwrap_prefix(workdir: Path, plugin_dir: Path, hidden: list[Path]) -> list[str]:
    command = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
    ]
    for path in hidden:
        if path.exists():
            command += ["--tmpfs", str(path)]
    # A private directory on the way to the interpreter (a Python under /root, say): hide it
    # behind an empty tmpfs and bind just the interpreter's prefixes back, read-only.
    interpreter = interpreter_paths()
    for closed in closed_ancestors(interpreter):
        command += ["--tmpfs", str(closed)]
    for prefix in interpreter:
        command += [*_traversable(prefix), "--ro-bind", str(prefix), str(prefix)]
    command += [*_traversable(plugin_dir), "--ro-bind", str(plugin_dir), str(plugin_dir)]
    command += [*_traversable(workdir), "--bind", str(workdir), str(workdir)]
    return [*command, "--chdir", str(workdir), "--"]


def _traversable(path: Path) -> list[str]:
    """bwrap makes missing mount points 0700 (root's); the job's user must pass them."""
    options = []
    for ancestor in reversed(path.parents):
        if ancestor != Path("/"):
            options += ["--perms", "0711", "--dir", str(ancestor)]
    return options
