"""The reference glob with a root .gitignore that git itself would partly skip, and its
matching: right and fast on any pattern and path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.own_session import json_from_reference

pytestmark = pytest.mark.slow

GLOB = """
import asyncio, json, sys
from picourse.coding_tools import create_coding_tools
from picourse.tool import ToolContext

tool = create_coding_tools(sys.argv[1], navigation=True).get("glob")
arguments = tool.schema.validate({"pattern": sys.argv[2]})
out = asyncio.run(tool.execute(arguments, ToolContext("glob", None, None)))
print(json.dumps({"error": out.is_error, "text": out.content[0].text}))
"""


@pytest.mark.parametrize(
    "bad", ["!", "foo\\", "[z-a]"], ids=["bang", "trailing-backslash", "range"]
)
def test_a_gitignore_pattern_git_cannot_read_is_skipped(
    solved_src: Path, tmp_path: Path, bad: str
) -> None:
    (tmp_path / "keep.txt").write_text("")
    (tmp_path / "debug.log").write_text("")
    (tmp_path / ".gitignore").write_text(f"*.log\n{bad}\n")
    result = run_child(solved_src, GLOB, str(tmp_path), "**/*")
    assert not result["error"] and result["text"].splitlines()[0] == "keep.txt", (
        f"the other patterns still apply and the search answers: {result}"
    )


def run_child(solved_src: Path, script: str, *args: str) -> Any:
    return json_from_reference(
        solved_src,
        script,
        *args,
        timeout=CHILD_TIMEOUT_SECONDS,
        hung=f"still matching after {CHILD_TIMEOUT_SECONDS} s (a linear match takes "
        "milliseconds): some wildcards backtrack through every way to share the path",
    )


# Generous: the fixed matcher answers in milliseconds; the old one ran for hours or days.
CHILD_TIMEOUT_SECONDS = 60
DEEP = 500  # folders: a path of 1000 characters, well below PATH_MAX

# pattern, the files to create, the one path that matches
PATHOLOGICAL = {
    # '**' then fixed text then '**': atomic, as '*' before another '*' is
    "double-stars-around-text": ("**a**a**a**a**a**a**a**b", ["a" * 200, "aaaaaaab"], "aaaaaaab"),
    # a '**' then fixed text then a '*' cannot be atomic: several such junctions
    "double-star-then-star": ("*a**a*a**a*a**a*a**b", ["a" * 200, "aaaaaaab"], "aaaaaaab"),
    # several '**/' around fixed folder names on a deep path
    "folders-on-a-deep-path": ("**/a/**/a/**/a/**/a/**/b", ["a/" * DEEP + "b"], "a/" * DEEP + "b"),
}


@pytest.mark.parametrize("case", list(PATHOLOGICAL))
def test_glob_answers_at_once_on_patterns_that_backtrack(
    solved_src: Path, tmp_path: Path, case: str
) -> None:
    pattern, files, match = PATHOLOGICAL[case]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    result = run_child(solved_src, GLOB, str(tmp_path), pattern)
    assert not result["error"] and result["text"] == match, result["text"][-500:]


# Checks the reference's matcher against brute force: Python's re with no atomic group
# (exponential, so on short paths only) and, on long names, a memoized reading of the
# semantics. Prints the disagreements as JSON.
AGREEMENT = r"""
import functools, json, random, re
from picourse.coding_tools.glob import _compile

TOKENS = ["a", "b", "/", "?", "*", "**", "**/"]

def brute_force(pattern):
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i): out.append("(?:[^/]+/)*"); i += 3
        elif pattern.startswith("**", i): out.append(".*"); i += 2
        elif pattern[i] == "*": out.append("[^/]*"); i += 1
        elif pattern[i] == "?": out.append("[^/]"); i += 1
        else: out.append(re.escape(pattern[i])); i += 1
    return re.compile("".join(out), re.DOTALL)  # '**' matches any character

def reference(tokens, path):
    @functools.cache
    def rest(i, j):  # does tokens[i:] match path[j:]?
        if i == len(tokens):
            return j == len(path)
        token, here = tokens[i], path[j:j + 1]
        if token == "**/":
            end = path.find("/", j)
            return rest(i + 1, j) or (end > j and rest(i, end + 1))
        if token == "**":
            return rest(i + 1, j) or (here != "" and rest(i, j + 1))
        if token == "*":
            return rest(i + 1, j) or (here not in ("", "/") and rest(i, j + 1))
        if token == "?":
            return here not in ("", "/") and rest(i + 1, j + 1)
        return here == token and rest(i + 1, j + 1)
    return rest(0, 0)

rng = random.Random(87)
wrong = []
for case in range(3300):
    tokens = [rng.choice(TOKENS) for _ in range(rng.randint(1, 8))]
    if case >= 3000:  # many wildcards between a's: the shapes that backtrack
        tokens = [rng.choice(["a", "?", "*", "**", "**/"]) for _ in range(12)] + tokens[-1:]
    pattern = "".join(tokens)
    tokens = re.findall(r"\*\*/|\*\*|.", pattern)  # as the glob reads them
    if case < 3000:  # short, over {a, b, /}; now and then a newline, which '**' crosses
        path = "".join(rng.choice("aab/") for _ in range(rng.randint(0, 10)))
        if rng.random() < 0.05:
            path = path[:5] + "\n" + path[5:]
        expected = brute_force(pattern).fullmatch(path) is not None
        assert reference(tokens, path) == expected, (pattern, path)
    else:  # long names and deep paths, where brute force takes hours
        path = rng.choice(["a" * 200, "ab" * 100, "a/" * 100]) + rng.choice(["", "a", "b", "/"])
        expected = reference(tokens, path)
    if bool(_compile(pattern).fullmatch(path)) != expected:
        wrong.append([pattern, path, expected])
print(json.dumps(wrong))
"""


def test_glob_matching_agrees_with_brute_force(solved_src: Path) -> None:
    wrong = run_child(solved_src, AGREEMENT)
    assert wrong == [], f"{len(wrong)} [pattern, path, should match] cases disagree: {wrong[:10]}"
