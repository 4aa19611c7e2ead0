"""Every text a lab test requires in a tool's output is written down for the student.

A student who implements a stage from the handout alone must pass its tests, so each
literal the tests require (what counts is defined in ``literals.py``: the positive
assertions about tool output, minus the test's own data) must appear in the handout, in
English (``README.md``) and in Chinese (``README.zh-CN.md``, where code-format text stays
untranslated), in the section of its stage or of an earlier one, or in the docstring of
the stage's stub module, or be said by a given module (registry, errors). Numbers in a literal stand
for any value, so ``[Showing lines 3-6 of 10; ...]`` is stated by ``[Showing lines a-b of
total; ...]``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from coursekit import load_lab
from coursekit.layout import SCAFFOLD

from .literals import Requirement, extract

LAB = load_lab("08")
HANDOUTS = {"README.md": "English", "README.zh-CN.md": "Chinese"}


def lab_test_sources() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(LAB.tests_dir.glob("*.py"))}


def docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [
        tree,
        *(
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        ),
    ]
    return "\n".join(filter(None, (ast.get_docstring(n, clean=False) for n in nodes)))


def section(handout: str, stage_id: str) -> str:
    """The stage's section of a handout: from its heading ("## Stage 8.1 —", "### 阶段 8.7 —",
    not "stages 8.7–8.9") to the next heading of the same or a higher level."""
    heading = re.compile(rf"^(#+) [^\n]*(?<![\d.])({re.escape(stage_id)})(?![\d.–-])", re.M)
    found = heading.search(handout)
    if found is None:
        return ""
    level = len(found.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(handout, found.end())
    return handout[found.start() : end.start() if end else len(handout)]


def given_texts() -> str:
    """The strings of the given modules (registry, errors, ...): what they say, the student's
    code says without writing it (the registry's "not both")."""
    lab_modules = {SCAFFOLD / "template" / m for m in LAB.lab_modules}
    texts = []
    for path in sorted((SCAFFOLD / "template" / "src").rglob("*.py")):
        if path in lab_modules:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
    return "\n".join(texts)


def where_stated(requirement: Requirement, handouts: dict[str, str], stubs: str) -> list[str]:
    """The documents that still lack the literal (empty when it is stated)."""
    pattern = requirement.pattern()
    if pattern.search(stubs) or pattern.search(GIVEN):
        return []
    return [name for name, text in handouts.items() if not pattern.search(text)]


GIVEN = given_texts()


def test_every_literal_a_lab_test_requires_is_in_the_handout_or_the_stub() -> None:
    handouts = {name: (LAB.root / name).read_text(encoding="utf-8") for name in HANDOUTS}
    stage_of = {stage.tests: stage for stage in LAB.stages}
    requirements = extract(lab_test_sources())
    assert len(requirements) >= 30, "the extraction found too few literals: is it broken?"
    missing = []
    for requirement in requirements:
        stage = stage_of.get(requirement.test_file)
        if stage is None:
            continue  # a shared helper: its assertions are reached through a stage's tests
        stubs = [SCAFFOLD / "template" / module for module in stage.modules]
        # a stage builds on the earlier ones: what their sections state holds for it too
        ids = [*(s.id for s in LAB.stages_before(stage.id)), stage.id]
        sections = {
            name: "\n".join(section(text, i) for i in ids) for name, text in handouts.items()
        }
        lacking = where_stated(requirement, sections, "\n".join(map(docstrings, stubs)))
        if lacking:
            missing.append(
                f"- {requirement.shown!r} (test {requirement.function}, "
                f"{requirement.test_file}:{requirement.line}) is not in {', '.join(lacking)}: "
                f"write it in the Stage {stage.id} section of labs/{LAB.root.name}/README.md "
                f"and README.zh-CN.md (code-format text untranslated), or in the docstring "
                f"of {', '.join(str(s.relative_to(SCAFFOLD.parent)) for s in stubs)}"
            )
    assert not missing, (
        "The lab tests require texts that a student cannot know from the handout:\n"
        + "\n".join(sorted(set(missing)))
    )


# ------------------------------------------------------------------ the extraction itself


HELPERS = {"lab_helpers.py": (LAB.tests_dir / "lab_helpers.py").read_text(encoding="utf-8")}


def required(source: str) -> set[str]:
    return {r.shown for r in extract({**HELPERS, "test_x.py": textwrap.dedent(source)})}


def test_literals_compared_with_tool_output_are_required() -> None:
    assert required(
        """
        import re, pytest
        def test_a(tools):
            out = call_now(tools, "read", path="f.txt")
            text = text_of(out)
            assert out.is_error and "is beyond the end" in text
            assert text_of(out).endswith("[output truncated]")
            assert re.search(r"no match\\b", text)
            with pytest.raises(ValueError, match="escapes the workspace"):
                pass
        """
    ) == {"is beyond the end", "[output truncated]", "no match", "escapes the workspace"}


def test_parametrized_and_helper_arguments_are_followed() -> None:
    assert required(
        """
        import pytest
        def refused(out, why="escapes the workspace", *words):
            assert why in text_of(out)
            for word in words:
                assert word in text_of(out)
        @pytest.mark.parametrize(("make", "expect"), [(1, "binary"), (2, "directory")],
                                 ids=["guardrail", "x"])
        def test_b(tools, make, expect):
            assert expect.lower() in text_of(call_now(tools, "read", path="f")).lower()
            refused(call_now(tools, "read", path="g"))
            refused(call_now(tools, "read", path="g"), "symlink", "Read", "changed")
        """
    ) == {"binary", "directory", "escapes the workspace", "symlink", "Read", "changed"}


def test_test_data_numbers_and_negations_are_not_required() -> None:
    assert required(
        """
        def test_c(tools, path):
            path.write_text("alpha\\nbeta\\n")
            out = call_now(tools, "bash", command="echo hello; echo oops >&2")
            assert "hello" in text_of(out) and "oops" in text_of(out)
            assert text_of(out) == "   1│ alpha\\n   2│ beta"
            assert "TOP SECRET" not in text_of(out)
            assert path.read_text() == "new content"
            assert out.details == Details("f.txt", 3)
            for name in ("missing.txt",):
                listed = call_now(tools, "ls", path=name)
                assert name in text_of(listed)
            assert text_of(out).startswith("xxxx")
            assert text_of(out) == f"[Showing lines 1-{n} of 50]", "a message is not required"
        """
    ) == {"[Showing lines 1-… of 50]"}


def test_numbers_in_a_literal_match_placeholders_in_the_prose() -> None:
    source = 'def test_d(o):\n    assert "offset=6 is beyond (5 lines)" in text_of(o)\n'
    (requirement,) = extract({**HELPERS, "test_x.py": source})
    assert requirement.pattern().search("`offset=N is beyond (T lines)`")
    assert requirement.pattern().search("offset={offset} is\n   beyond ({total} lines)")
    assert not requirement.pattern().search("offset=6 is past (5 lines)")


@pytest.mark.parametrize("document", list(HANDOUTS))
def test_every_stage_has_a_section_in_each_handout(document: str) -> None:
    text = (LAB.root / document).read_text(encoding="utf-8")
    for stage in LAB.stages:
        found = section(text, stage.id)
        assert found and stage.id in found.splitlines()[0], (
            f"{document} needs a heading for stage {stage.id}: the literal check reads it"
        )
