"""Grading throughput: parallel efficiency over 40 copies of the full solution, and the
overhead per submission (build, isolate, report) over running the same tests directly.

    python benchmarks/bench_grader.py [--count 40] [--jobs 2]

Efficiency = (count x seconds per submission at -j 1) / (jobs x wall time at -j jobs). The
per-submission time at -j 1 is measured between consecutive completions over 8 submissions,
so the batch's one-time setup (about a second) is not charged to each submission.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from coursekit import assemble_practice_dir, load_lab
from coursekit.layout import solution_root
from grader import GradeOptions, grade_submissions

SEQUENTIAL_SAMPLE = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args()
    lab = load_lab("08")
    with tempfile.TemporaryDirectory(prefix="bench-grader-") as scratch:
        root = Path(scratch)
        solved = assemble_practice_dir(
            lab, root / "solved", solved_stages=[s.id for s in lab.stages]
        )
        direct = statistics.median(_time_direct(solved) for _ in range(3))
        submissions = root / "submissions"
        for n in range(options.count):
            for module in lab.lab_modules:
                target = submissions / f"student{n:03d}" / module
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(solution_root(lab.root.name) / module, target)
        sample = root / "sample"
        sample.mkdir()
        for entry in sorted(submissions.iterdir())[:SEQUENTIAL_SAMPLE]:
            shutil.copytree(entry, sample / entry.name)
        # Steady state: the time between consecutive completions. The batch's one-time setup
        # (rendering the scaffold, collecting the test inventory) is not a per-submission cost.
        finished: list[float] = []
        grade_submissions(
            sample,
            root / "out-1",
            GradeOptions(jobs=1),
            on_done=lambda _: finished.append(time.perf_counter()),
        )
        per_submission = (finished[-1] - finished[0]) / (len(finished) - 1)
        start = time.perf_counter()
        results = grade_submissions(submissions, root / "out-n", GradeOptions(jobs=options.jobs))
        parallel = time.perf_counter() - start
    assert all(r.score == 100 for r in results), [r.status for r in results]
    efficiency = options.count * per_submission / (options.jobs * parallel)
    overhead = per_submission - direct
    print(
        f"{'ok  ' if efficiency >= 0.75 else 'MISS'} parallel efficiency at -j {options.jobs}, "
        f"{options.count} submissions: {efficiency:.0%} (target >= 75%; {parallel:.1f}s wall, "
        f"{per_submission:.2f}s per submission at -j 1)"
    )
    print(
        f"{'ok  ' if overhead <= 0.5 else 'MISS'} overhead per submission over running the "
        f"tests directly: {overhead:+.2f}s (target <= 0.5s; direct run {direct:.2f}s)"
    )
    return 0 if efficiency >= 0.75 and overhead <= 0.5 else 1


def _time_direct(directory: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=directory,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
