"""`python -m grader similarity SUBMISSIONS --out DIR`: which students' lab modules are
alike beyond what they were given.

Each student's lab modules (those changed from the stub) are compared pairwise, module by
module, with copydetect: code is tokenised with identifiers, strings and comments filtered
out, then fingerprinted by winnowing k-grams, so renamed variables, moved functions and new
comments do not hide a copy. The scaffold's stubs and given modules are boilerplate: what
everybody was handed never counts. A pair is reported when, for a module both wrote, at least
``THRESHOLD`` of either side's fingerprints occur in the other. Writes ``similarity.json``
(every pair above the threshold, per module, with both directions' scores) and
``similarity-<module>.html`` (copydetect's side-by-side report of the matching regions, one
per module that has a pair).

The threshold was set on planted copies of the reference modules (renamed identifiers,
reordered functions, changed docstrings and comments: 0.69-0.98 for every module of 50
lines or more; 0.45 for the 44-line output_budget.py, too small to judge) against
independently written implementations of the same stage (0.0-0.37); see
tests/grader/test_similarity.py.
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from coursekit.lab import Lab, load_lab
from coursekit.layout import SCAFFOLD
from grader._intake import InvalidSubmission, discover, lab_modules

if TYPE_CHECKING:
    from copydetect import CopyDetector

THRESHOLD = 0.5
# Shorter k-grams find more in short modules; these fit modules of 50-400 lines.
NOISE_TOKENS = 25
GUARANTEE_TOKENS = 30


@dataclass(frozen=True)
class SimilarPair:
    first: str
    second: str
    module: str
    first_in_second: float  # the share of the first's fingerprints found in the second
    second_in_first: float

    @property
    def score(self) -> float:
        return max(self.first_in_second, self.second_in_first)


def find_similar(
    submissions: Path,
    out: Path,
    *,
    threshold: float = THRESHOLD,
    chapter: str = "08",
    jobs: int = os.cpu_count() or 1,
) -> list[SimilarPair]:
    lab = load_lab(chapter)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="similarity-") as scratch_dir:
        scratch = Path(scratch_dir)
        folders = _collect(lab, submissions, scratch / "students")
        students = list(folders.values())
        module_names = sorted({p.name for p in (scratch / "students").glob("*/*.py")})
        # One detector per module, in parallel: modules are only compared with their
        # namesakes, and tokenising is most of the work.
        with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
            found = pool.map(
                _compare_module,
                module_names,
                [scratch] * len(module_names),
                [out] * len(module_names),
                [threshold] * len(module_names),
            )
            pairs = [
                replace(pair, first=folders[pair.first], second=folders[pair.second])
                for module_pairs in found
                for pair in module_pairs
            ]
    pairs.sort(key=lambda p: (-p.score, p.first, p.second, p.module))
    (out / "similarity.json").write_text(
        json.dumps(
            {
                "threshold": threshold,
                "students": students,
                "reports": sorted({_report_name(p.module) for p in pairs}),
                "pairs": [asdict(p) for p in pairs],
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    return pairs


def _report_name(module: str) -> str:
    return f"similarity-{Path(module).stem}.html"


def _compare_module(module: str, scratch: Path, out: Path, threshold: float) -> list[SimilarPair]:
    """Every pair of students who both wrote ``module``; the report of those above it."""
    folder = scratch / "by-module" / module
    for path in (scratch / "students").glob(f"*/{module}"):
        (folder / path.parent.name).mkdir(parents=True)
        shutil.copyfile(path, folder / path.parent.name / module)
    if len(list(folder.iterdir())) < 2:
        return []
    boilerplate = scratch / "boilerplate" / module
    boilerplate.mkdir(parents=True)
    given = SCAFFOLD / "template" / "src" / "picourse" / "coding_tools" / module
    if given.is_file():
        shutil.copyfile(given, boilerplate / module)
    # Imported here: copydetect brings matplotlib, seconds that `grade` (which shares the
    # CLI module) should not pay on every start, once per submission on Gradescope.
    from copydetect import CopyDetector

    detector = CopyDetector(
        test_dirs=[str(folder)],
        boilerplate_dirs=[str(boilerplate)],
        extensions=["py"],
        noise_t=NOISE_TOKENS,
        guarantee_t=GUARANTEE_TOKENS,
        display_t=threshold,
        autoopen=False,
        silent=True,
        out_file=str(out / _report_name(module)),
    )
    pairs = _pairs(detector, threshold)
    if pairs:
        detector.generate_html_report()
    return pairs


def _collect(lab: Lab, submissions: Path, into: Path) -> dict[str, str]:
    """Each student's changed lab modules as students/<folder>/<module file name>; the
    folders and the students they hold. copydetect writes folder names into its HTML
    unescaped: a name that HTML would read as markup gets a neutral folder instead."""
    found: list[tuple[str, dict[str, bytes]]] = []
    for submission in discover(submissions):
        with tempfile.TemporaryDirectory(prefix="unpack-") as unpack:
            try:
                modules = lab_modules(submission, lab, Path(unpack))
            except InvalidSubmission:
                continue
        changed = {
            module: content
            for module, content in modules.items()
            if content != (SCAFFOLD / "template" / module).read_bytes()
        }
        if changed:
            found.append((submission.student, changed))
    taken = {student for student, _ in found}
    neutral = (f"student-{n}" for n in itertools.count(1) if f"student-{n}" not in taken)
    students: dict[str, str] = {}
    for student, changed in found:
        name = student if html.escape(student) == student else next(neutral)
        folder = into / name
        folder.mkdir(parents=True)
        for module, content in changed.items():
            (folder / Path(module).name).write_bytes(content)
        students[name] = student
    return students


def _pairs(detector: CopyDetector, threshold: float) -> list[SimilarPair]:
    detector.run()
    tests = [Path(name) for name in detector.test_files]
    refs = [Path(name) for name in detector.ref_files]
    found = []
    for i, first in enumerate(tests):
        for j, second in enumerate(refs):
            # Each unordered pair once; never a student with themselves.
            if str(second) <= str(first) or first.parent == second.parent:
                continue
            one, two = detector.similarity_matrix[i, j]
            if max(one, two) >= threshold:
                found.append(
                    SimilarPair(
                        first.parent.name,
                        second.parent.name,
                        first.name,
                        round(float(one), 3),
                        round(float(two), 3),
                    )
                )
    return found


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "similarity", help="find students whose lab modules are alike beyond the starter code"
    )
    parser.add_argument("submissions", type=Path, help="the same folder `grade` takes")
    parser.add_argument("--out", type=Path, default=Path("similarity"), help="report folder")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help=f"default {THRESHOLD:g}")


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False, markup=False)
    pairs = find_similar(args.submissions, args.out, threshold=args.threshold)
    if not pairs:
        console.print(f"No pair of submissions is alike above {args.threshold:g}.")
        return 0
    for pair in pairs:
        console.print(
            f"{pair.score:.2f}  {pair.first} ~ {pair.second}  ({pair.module}: "
            f"{pair.first_in_second:.2f} / {pair.second_in_first:.2f})"
        )
    reports = ", ".join(sorted({_report_name(p.module) for p in pairs}))
    console.print(f"Matching regions: {reports} in {args.out}. Similar is not copied: look first.")
    return 0
