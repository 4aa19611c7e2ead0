"""Does the grader fail every catalogued mistake exactly as the lab suite does?

    .venv/bin/python tools/grader_agreement.py                 # every mutant (about 50 min)
    .venv/bin/python tools/grader_agreement.py --stage 8.2 --stage 8.5 --jobs 2

The lab suite's verdict on each catalogued mutant (``lab.toml`` lists them, the solution's
``mutants.toml`` patches them) is recorded in ``mistakes.json``
(``python -m grader signatures``): the tests of its stage that it fails, run by plain
pytest in a practice directory. The grader runs the same tests differently (the judge and
the host, sandboxed, under time and memory limits), so a test could pass there that fails
in a practice directory. This tool grades one submission per mutant (every stage up to the
mutant's solved, the mutant applied, later stages left as their stubs, so the grader skips
them) as one class, and compares, per mutant:

- the failing tests: the grader's against the signature's. A test the signature lists that
  passes in the grader is a mistake the grader misses; one the grader fails beyond the
  signature may be the machine's load (a time limit), the run's limits (a whole file read
  into 1 GiB of address space) or a test the grader runs unfairly;
- the stage's score (below its maximum unless only challenge tests catch the mutant) and
  the mistake the grader diagnoses (the mutant itself, among others on a tie).

A mutant that patches a given module (``command_scope.py``, not one ``lab.toml`` lists for
any stage) is listed apart: the grader takes only the students' modules, so it grades the
given file as shipped, and such a mutant is a lesson for ``practice.py break``, never a
submission. The exit status is 1 when a signature test passes in the grader or a mutant
fails no test there. Not part of the test suite: it grades about 200 submissions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from coursekit import load_lab
from coursekit.assemble import assemble_practice_dir
from coursekit.lab import Lab, Mutant
from coursekit.mistakes import load_signatures, test_key
from grader import GradeOptions, grade_submissions
from grader.model import SubmissionResult


@dataclass(frozen=True)
class Agreement:
    mutant: Mutant
    status: str
    score: float
    max_score: float
    missed: frozenset[str]  # the lab suite fails them, the grader passes them
    extra: frozenset[str]  # the grader fails them, the lab suite passes them
    diagnosed: bool
    failed: frozenset[str]  # the tests of its stage the grader failed

    @property
    def trusted(self) -> bool:
        return bool(self.failed) and not self.missed


def submission_name(mutant: Mutant) -> str:
    return f"{mutant.stage}-{mutant.name}"


def stage_submissions(lab: Lab, mutants: list[Mutant], folder: Path) -> None:
    for mutant in mutants:
        solved = [s.id for s in lab.stages_before(mutant.stage)] + [mutant.stage]
        assemble_practice_dir(
            lab, folder / submission_name(mutant), solved_stages=solved, mutant=mutant
        )


def compare(mutant: Mutant, result: SubmissionResult, signature: frozenset[str]) -> Agreement:
    stage = next((s for s in result.stages if s.stage == mutant.stage), None)
    failed = frozenset(
        test_key(t.nodeid) for t in result.tests if t.stage == mutant.stage and t.status != "passed"
    )
    return Agreement(
        mutant=mutant,
        status=result.status,
        score=stage.score if stage else 0.0,
        max_score=stage.max_score if stage else 0.0,
        missed=signature - failed,
        extra=failed - signature,
        diagnosed=any(mutant.name in d.mistakes for d in result.diagnoses),
        failed=failed,
    )


def report(agreements: list[Agreement]) -> None:
    for row in agreements:
        mark = "ok " if row.trusted else "BAD"
        print(
            f"{mark} {row.mutant.stage} {row.mutant.name:40s} {row.status:8s} "
            f"{row.score:5.1f}/{row.max_score:<5.1f} diagnosed={'yes' if row.diagnosed else 'no'}"
        )
        for test in sorted(row.missed):
            print(f"      passes in the grader, fails in the lab suite: {test}")
        for test in sorted(row.extra):
            print(f"      fails in the grader only: {test}")
    stages = sorted({row.mutant.stage for row in agreements})
    print()
    for stage in stages:
        rows = [row for row in agreements if row.mutant.stage == stage]
        same = sum(1 for row in rows if not row.missed and not row.extra)
        print(
            f"{stage}: {len(rows)} mutants, {sum(r.trusted for r in rows)} failing every "
            f"signature test, {same} the very same tests, "
            f"{sum(r.score < r.max_score for r in rows)} below full credit, "
            f"{sum(r.diagnosed for r in rows)} diagnosed as themselves"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", action="append", help="only this stage's mutants (repeat)")
    parser.add_argument("--mutant", action="append", help="only this mutant (repeat)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--workdir", type=Path, help="keep the submissions and results here")
    args = parser.parse_args()
    lab = load_lab("08")
    signatures = load_signatures(lab)
    if signatures is None:
        print("mistakes.json is missing or stale: run `python -m grader signatures` first.")
        return 2
    chosen = [
        m
        for s in lab.stages
        if not args.stage or s.id in args.stage
        for m in s.mutants
        if not args.mutant or m.name in args.mutant
    ]
    students = set(lab.lab_modules)
    mutants = [m for m in chosen if m.module in students]
    for m in chosen:
        if m.module not in students:
            print(f"--  {m.stage} {m.name}: patches {m.module}, a given module (not graded)")
    if not mutants:
        print(f"No student-module mutants chosen; stages: {[s.id for s in lab.stages]}")
        return 2
    with tempfile.TemporaryDirectory(prefix="grader-agreement-") as scratch:
        work = args.workdir or Path(scratch)
        stage_submissions(lab, mutants, work / "submissions")
        done = 0

        def progress(result: SubmissionResult) -> None:
            nonlocal done
            done += 1
            print(f"[{done}/{len(mutants)}] {result.student}: {result.status}", flush=True)

        results = grade_submissions(
            work / "submissions", work / "out", GradeOptions(jobs=args.jobs), on_done=progress
        )
        by_student = {r.student: r for r in results}
        agreements = [
            compare(m, by_student[submission_name(m)], signatures[m.stage][m.name]) for m in mutants
        ]
    report(agreements)
    return 0 if all(row.trusted for row in agreements) else 1


if __name__ == "__main__":
    sys.exit(main())
