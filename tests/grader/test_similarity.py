"""`grader similarity`: planted copies are found however they are disguised; independently
written implementations of the same stage are not flagged."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT, solution_root
from grader._similarity import THRESHOLD, find_similar

LAB = load_lab("08")
SOLUTION = solution_root(LAB.root.name)
INDEPENDENT = COURSE_ROOT / "grader" / "examples" / "independent"
PACKAGE = Path("src/picourse/coding_tools")


class _Rename(ast.NodeTransformer):
    """Every argument and local name gets another name, consistently."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _new(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}_{name[::-1].strip('_')}")

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self._new(node.arg)
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names or isinstance(node.ctx, ast.Store):
            node.id = self._new(node.id)
        return node


def renamed(source: str) -> str:
    return ast.unparse(_Rename().visit(ast.parse(source)))


def reordered_and_recommented(source: str) -> str:
    tree = ast.parse(source)
    definitions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    others = [n for n in tree.body if n not in definitions]
    tree.body = others + list(reversed(definitions))
    for node in definitions:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body[0].value.value = "Rewritten in my own words, honestly."
    lines = ast.unparse(tree).splitlines()
    return "\n".join(f"{line}  # checked" if line.strip() else line for line in lines) + "\n"


def student(root: Path, name: str, modules: dict[str, str]) -> None:
    package = root / name / PACKAGE
    package.mkdir(parents=True)
    for module, source in modules.items():
        (package / module).write_text(source, encoding="utf-8")


def solution_sources(*names: str) -> dict[str, str]:
    return {name: (SOLUTION / PACKAGE / name).read_text() for name in names}


@pytest.mark.skipif(not SOLUTION.is_dir(), reason="needs the reference solution")
def test_planted_copies_are_found_however_disguised(tmp_path: Path) -> None:
    modules = ["read.py", "edit.py", "bash.py", "write.py", "glob.py"]
    original = solution_sources(*modules)
    submissions = tmp_path / "subs"
    student(submissions, "original", original)
    student(submissions, "renamed", {m: renamed(s) for m, s in original.items()})
    student(
        submissions, "reordered", {m: reordered_and_recommented(s) for m, s in original.items()}
    )
    student(
        submissions,
        "both",
        {m: reordered_and_recommented(renamed(s)) for m, s in original.items()},
    )
    pairs = find_similar(submissions, tmp_path / "out")
    found = {(p.first, p.second, p.module): p.score for p in pairs}
    for copy in ("renamed", "reordered", "both"):
        for module in modules:
            key = tuple(sorted(("original", copy)))
            assert (key[0], key[1], module) in found, (
                f"{copy}'s {module} is a copy of original's and must be found: {pairs}"
            )
    report = json.loads((tmp_path / "out" / "similarity.json").read_text())
    assert report["threshold"] == THRESHOLD and len(report["pairs"]) == len(pairs)
    assert sorted(p.name for p in (tmp_path / "out").glob("*.html")) == report["reports"]
    assert "similarity-read.html" in report["reports"]


@pytest.mark.skipif(not SOLUTION.is_dir(), reason="needs the reference solution")
def test_independent_implementations_and_starter_code_are_not_flagged(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    for person in ("alice", "bob"):
        sources = {p.name: p.read_text() for p in (INDEPENDENT / person).glob("*.py")}
        student(submissions, person, sources)
    student(submissions, "reference", solution_sources("containment.py", "mutation_queue.py"))
    partial = COURSE_ROOT / "grader" / "examples" / "submissions" / "partial" / PACKAGE
    student(submissions, "partial", {"read.py": (partial / "read.py").read_text()})
    student(submissions, "reference-read", solution_sources("read.py"))
    # Two students who submitted the untouched stubs share only what they were given.
    for name in ("stub-1", "stub-2"):
        shutil.copytree(COURSE_ROOT / "scaffold" / "template" / "src", submissions / name / "src")
    pairs = find_similar(submissions, tmp_path / "out")
    assert pairs == [], f"independent work flagged as similar: {pairs}"


@pytest.mark.skipif(not SOLUTION.is_dir(), reason="needs the reference solution")
def test_a_name_that_is_markup_never_reaches_the_report_as_markup(tmp_path: Path) -> None:
    # copydetect writes the folder names into its HTML as they are.
    markup = "<img src=x onerror=alert(1)>"
    submissions = tmp_path / "subs"
    for name in ("alice", markup, "student-1"):
        student(submissions, name, solution_sources("read.py"))
    pairs = find_similar(submissions, tmp_path / "out", jobs=1)
    found = {frozenset((p.first, p.second)) for p in pairs}
    assert found == {
        frozenset(pair)
        for pair in [("alice", markup), ("alice", "student-1"), (markup, "student-1")]
    }, "the pairs name the students, whatever folder copydetect saw"
    report = (tmp_path / "out" / "similarity-read.html").read_text(encoding="utf-8")
    assert "onerror" not in report and "alice" in report and "student-2" in report
