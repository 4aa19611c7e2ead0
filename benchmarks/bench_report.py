"""How long report.html takes for a class of 200 (class insight, overview, every student's
section): the median of 5 renders against the target of 2 seconds.

    python benchmarks/bench_report.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coursekit import load_lab
from grader.report import html
from tests.grader.class_sample import synthetic_class

TARGET_SECONDS = 2.0
STUDENTS = 200


def main() -> int:
    lab = load_lab("08")
    results = synthetic_class(STUDENTS)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        page = html.render(lab, results)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    ok = median < TARGET_SECONDS
    print(
        f"{'ok  ' if ok else 'MISS'} report.html for {STUDENTS} students: median {median:.3f} s "
        f"({len(page) >> 10} KiB; target < {TARGET_SECONDS:g} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
