"""The scaffold's lab modules are honest stubs, and the solved package is strictly typed."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit import load_lab
from coursekit.layout import SCAFFOLD, solution_root

from .labrun import build

LAB = load_lab("08")
STUB_ROOT = SCAFFOLD / "template"
SOLUTION_ROOT = solution_root(LAB.root.name)

# Names whose presence in a stub would hand out part of an answer.
FORBIDDEN = {
    "rename",
    "replace",
    "realpath",
    "commonpath",
    "subprocess",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "subprocess_exec",
    "killpg",
    "kill",
    "setsid",
    "psutil",
    "tempfile",
    "mkstemp",
    "fsync",
    "makedirs",
    "open",
    "Popen",
    "call_later",
    "find",
    "count",
}
MODULES = [(stage.id, module) for stage in LAB.stages for module in stage.modules]


def names_used(tree: ast.AST) -> set[str]:
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.update(node.name.split("."))
    return used


def public_surface(tree: ast.Module) -> dict[str, str]:
    """Top-level public functions and classes (with their public methods) and signatures."""
    surface: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith(
            "_"
        ):
            surface[node.name] = ast.unparse(node.args)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    not item.name.startswith("_") or item.name == "__init__"
                ):
                    surface[f"{node.name}.{item.name}"] = ast.unparse(item.args)
    return surface


@pytest.mark.parametrize(("stage_id", "module"), MODULES)
def test_a_stub_holds_no_algorithm_and_marks_its_lab(stage_id: str, module: str) -> None:
    tree = ast.parse((STUB_ROOT / module).read_text())
    leaked = names_used(tree) & FORBIDDEN
    assert not leaked, f"the stub {module} uses {sorted(leaked)}: that is part of the answer"
    raises = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and isinstance(node.exc.func, ast.Name)
        and node.exc.func.id == "NotImplementedError"
    ]
    assert raises, f"the stub {module} must raise NotImplementedError"
    for node in raises:
        message = ast.literal_eval(node.exc.args[0])  # type: ignore[union-attr]
        assert message.startswith(f"Lab {stage_id} ") and message.endswith("is not implemented yet")


@pytest.mark.parametrize(("stage_id", "module"), MODULES)
def test_a_stub_keeps_the_solutions_public_surface(stage_id: str, module: str) -> None:
    stub = public_surface(ast.parse((STUB_ROOT / module).read_text()))
    solution = public_surface(ast.parse((SOLUTION_ROOT / module).read_text()))
    assert stub == solution, (
        f"{module}: the stub and the solution must offer the same public functions, methods "
        "and signatures"
    )


@pytest.mark.slow
# An uncached mypy run is CPU-bound: on a busy 2-core machine it can take longer than the
# 120 s that guard the other tests against hangs.
@pytest.mark.timeout(600)
def test_the_solved_package_and_the_lab_tests_are_strictly_typed(
    practice_base: Path, tmp_path: Path
) -> None:
    solved = build(LAB, practice_base, tmp_path / "solved", [s.id for s in LAB.stages])
    # The openai SDK is not followed: it was two thirds of the run's CPU, and only the given
    # runtime's adapter uses it, which the project's own mypy checks against the SDK.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n[mypy-openai,openai.*]\nfollow_imports = skip\n")
    # One run for both: most of a run is reading the standard library's and pytest's types.
    result = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--no-incremental", "--strict"),
            *("--config-file", str(config), "src/picourse", "tests"),
        ],
        cwd=solved,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "MYPYPATH": "src"},  # the tests import picourse from src/
    )
    assert result.returncode == 0, result.stdout + result.stderr
