"""How long `python practice.py 08 DIR` takes: the median of 5 runs, interpreter start
included, against the target of 2 seconds.

    python benchmarks/bench_practice.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRACTICE = Path(__file__).resolve().parent.parent / "practice.py"
TARGET_SECONDS = 2.0


def main() -> int:
    times = []
    with tempfile.TemporaryDirectory(prefix="bench-practice-") as scratch:
        for run in range(5):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, str(PRACTICE), "08", f"{scratch}/lab{run}"],
                check=True,
                capture_output=True,
            )
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    ok = median <= TARGET_SECONDS
    runs = ", ".join(f"{t:.2f}" for t in times)
    print(
        f"{'ok  ' if ok else 'MISS'} practice.py 08 DIR: median {median:.2f}s "
        f"(target <= {TARGET_SECONDS:g}s; runs {runs})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
