"""`grader similarity` on a class of 40: how long the pairwise comparison takes.

    python benchmarks/bench_similarity.py

The class: the reference solution's modules, disguised copies of it (renamed identifiers,
reordered functions) and independent implementations, 40 students in all. Target: under
30 seconds on 2 cores.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader._similarity import find_similar  # noqa: E402
from tests.grader.test_similarity import (  # noqa: E402
    INDEPENDENT,
    renamed,
    reordered_and_recommented,
    solution_sources,
    student,
)

TARGET_SECONDS = 30.0
STUDENTS = 40
MODULES = ["read.py", "containment.py", "write.py", "mutation_queue.py", "edit.py", "bash.py"]


def main() -> int:
    original = solution_sources(*MODULES)
    disguises: list[Callable[[str], str]] = [
        lambda s: s,
        renamed,
        reordered_and_recommented,
        lambda s: reordered_and_recommented(renamed(s)),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-similarity-") as scratch:
        submissions = Path(scratch) / "subs"
        for number in range(STUDENTS):
            if number % 5 == 4:  # every fifth student wrote their own queue and containment
                person = INDEPENDENT / ("alice", "bob")[number % 2]
                student(
                    submissions,
                    f"s{number:02}",
                    {p.name: p.read_text() for p in person.glob("*.py")},
                )
                continue
            disguise = disguises[number % len(disguises)]
            student(submissions, f"s{number:02}", {m: disguise(s) for m, s in original.items()})
        start = time.perf_counter()
        pairs = find_similar(submissions, Path(scratch) / "out")
        seconds = time.perf_counter() - start
    ok = seconds < TARGET_SECONDS
    print(
        f"{'ok  ' if ok else 'MISS'} similarity, {STUDENTS} students x {len(MODULES)} modules: "
        f"{seconds:.1f} s, {len(pairs)} pairs flagged (target < {TARGET_SECONDS:g} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
