"""Every sample submission's lab functions take what the stubs take: a sample whose
function the tools cannot call fails on a TypeError and never performs its attack (a fork
bomb that never forks proves nothing about the sandbox)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from coursekit.layout import COURSE_ROOT, SCAFFOLD

SAMPLES = COURSE_ROOT / "grader" / "examples" / "submissions"
PACKAGE = Path("src/picourse/coding_tools")


def parameters(source: str) -> dict[str, list[str]]:
    """Top-level (and nested) function names with their parameter names, in order."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith(
            "_"
        ):
            arguments = node.args
            names = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
            names += [f"*{a.arg}" for a in arguments.kwonlyargs]
            found[node.name] = names
    return found


def sample_modules() -> list[Path]:
    return sorted(p for p in SAMPLES.glob(f"*/{PACKAGE}/*.py") if not p.is_symlink())


@pytest.mark.parametrize("module", sample_modules(), ids=lambda p: p.relative_to(SAMPLES).parts[0])
def test_a_sample_defines_the_stubs_functions_with_their_parameters(module: Path) -> None:
    stub = parameters((SCAFFOLD / "template" / PACKAGE / module.name).read_text())
    mine = parameters(module.read_text())
    for name, expected in stub.items():
        if name in mine:
            assert mine[name] == expected, (
                f"{module.relative_to(COURSE_ROOT)}: {name}{tuple(mine[name])} but the stub "
                f"takes {tuple(expected)}; update the sample to the stub's signature"
            )
