"""A static look at the student's modules for reaching into the test machinery.

Some in-process tricks cannot be undone after the fact (patching pytest, the grader's
plugin, frames); a submission that reaches for these tools is flagged for a human to
look at rather than silently credited.
"""

from __future__ import annotations

import ast

SUSPECT_MODULES = {
    "pytest",
    "_pytest",
    "pluggy",
    "grader",
    "grader_plugin",
    "ctypes",
    "gc",
    "inspect",
    "importlib",
    "runpy",
    "builtins",
    "faulthandler",
    "sysconfig",
    "tracemalloc",
    "unittest",
}
SUSPECT_CALLS = {"exec", "eval", "compile", "__import__", "globals", "setattr", "delattr"}
SUSPECT_ATTRIBUTES = {
    "modules",
    "_getframe",
    "settrace",
    "setprofile",
    "meta_path",
    "path_hooks",
    "f_back",
    "f_globals",
    "f_locals",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "__code__",
    "__globals__",
    "__builtins__",
    "__subclasses__",
    "_exit",
    "addaudithook",
}
SUSPECT_STRINGS = (
    "solutions/",
    "/solutions",
    "conftest.py",
    "results.json",
    "/autograder",
    "junit",
)


def suspicious(modules: dict[str, bytes]) -> list[str]:
    reasons = []
    for name, source in sorted(modules.items()):
        try:
            tree = ast.parse(source.decode("utf-8", "replace"))
        except SyntaxError:
            continue  # it simply fails its tests
        for node in ast.walk(tree):
            found = _finding(node)
            if found:
                reasons.append(f"{name}:{getattr(node, 'lineno', '?')}: {found}")
    return reasons


def _finding(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] in SUSPECT_MODULES:
                return f"imports {alias.name}"
    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in SUSPECT_MODULES:
        return f"imports from {node.module}"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and (node.func.id in SUSPECT_CALLS)
    ):
        return f"calls {node.func.id}()"
    if isinstance(node, ast.Attribute) and node.attr in SUSPECT_ATTRIBUTES:
        return f"uses .{node.attr}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        lowered = node.value.lower()
        for word in SUSPECT_STRINGS:
            if word in lowered:
                return f"mentions {word!r}"
    return None
