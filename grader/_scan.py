"""A static look at the student's modules, parsed as Python itself would parse them.

Two kinds of finding. ``verdict``: reaching for the test machinery in ways no honest
solution of this lab does (importing or naming pytest's internals or the grader, walking
frames, installing trace hooks, searching the heap for other objects): the run's credit is
held until a person releases it. ``notes``: tools honest solutions do use now and then
(``inspect``, ``setattr``, ``gc``, ``importlib``, ``os._exit`` in a fork child, ``exec``, a
string naming ``conftest.py``): shown to the reviewer, never costing credit.
"""

from __future__ import annotations

import ast
import io
import threading
import tokenize
from collections.abc import Collection
from dataclasses import dataclass, field

# Names of the test machinery, as modules to import or as strings to look up at run time.
MACHINERY = ("_pytest", "pluggy", "grader", "grader_plugin", "grader_judge", "conftest")
MACHINERY_STRINGS = ("_pytest", "pluggy", "grader_plugin", "grader_judge", "grader_channel")
FRAME_AND_HEAP = {
    "_getframe",
    "_current_frames",
    "f_back",
    "f_globals",
    "f_locals",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "settrace",
    "setprofile",
    "addaudithook",
    "meta_path",
    "path_hooks",
    "__subclasses__",
    "get_referrers",
    "get_referents",
    "get_objects",
}
NOTED_MODULES = {
    "pytest",  # e.g. a `pytest.main()` under `if __name__ == "__main__"`
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
NOTED_CALLS = {"exec", "eval", "compile", "__import__", "globals", "setattr", "delattr"}
NOTED_ATTRIBUTES = {"modules", "__code__", "__globals__", "__builtins__", "_exit"}
NOTED_STRINGS = ("solutions/", "/solutions", "conftest.py", "results.json", "/autograder", "junit")

# CPython's parser is not safe to run from two threads at once (gh-106905).
_parser = threading.Lock()


@dataclass
class ScanReport:
    verdict: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def scan(modules: dict[str, bytes]) -> ScanReport:
    report = ScanReport()
    for name, source in sorted(modules.items()):
        encoding = _declared_encoding(source)
        if encoding not in ("utf-8", "utf-8-sig"):
            report.notes.append(f"{name}: declares the source encoding {encoding}")
        try:
            with _parser:
                tree = ast.parse(source)  # bytes: the coding cookie is honoured, as on import
        except (SyntaxError, ValueError):
            continue  # it does not import either: its tests fail on their own
        except (RecursionError, MemoryError):
            # Nested past what the parser can build: nothing the scan can vouch for. Held
            # for review rather than an error of the grader's (the tests still run).
            report.verdict.append(f"{name}: too deeply nested to be parsed and checked")
            continue
        for node in ast.walk(tree):
            if not isinstance(node, _CHECKED):
                continue  # most nodes: none of the checks below can match them
            where = f"{name}:{getattr(node, 'lineno', '?')}"
            if found := _machinery(node):
                report.verdict.append(f"{where}: {found}")
            elif found := _noted(node):
                report.notes.append(f"{where}: {found}")
    return report


# Every kind of node that _machinery or _noted looks at.
_CHECKED = (ast.Import, ast.ImportFrom, ast.Attribute, ast.Call, ast.Constant)


def suspicious(modules: dict[str, bytes]) -> list[str]:
    """The findings that hold credit back."""
    return scan(modules).verdict


def _declared_encoding(source: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        return "unknown"
    return encoding


def _import_of(node: ast.AST, modules: Collection[str]) -> str | None:
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""]
    return next((name for name in names if name.split(".")[0] in modules), None)


def _machinery(node: ast.AST) -> str | None:
    if module := _import_of(node, MACHINERY):
        return f"imports {module}"
    if isinstance(node, ast.Attribute) and node.attr in FRAME_AND_HEAP:
        return f"uses .{node.attr}"
    if word := _string_with(node, MACHINERY_STRINGS):
        return f"names {word!r}"
    return None


def _noted(node: ast.AST) -> str | None:
    if module := _import_of(node, NOTED_MODULES):
        return f"imports {module}"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and (node.func.id in NOTED_CALLS)
    ):
        return f"calls {node.func.id}()"
    if isinstance(node, ast.Attribute) and node.attr in NOTED_ATTRIBUTES:
        return f"uses .{node.attr}"
    if word := _string_with(node, NOTED_STRINGS):
        return f"mentions {word!r}"
    return None


def _string_with(node: ast.AST, words: tuple[str, ...]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        lowered = node.value.lower()
        return next((word for word in words if word in lowered), None)
    return None
