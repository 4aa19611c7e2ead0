"""Grading throughput and robustness on a realistic class: full solutions (folders, .tar.gz,
.zip), partial solutions, the attack samples of grader/examples and robustness samples (a
duplicate name, a 1 GiB name header, a 4 GiB data file, a ``./`` archive, a name with ``:``).

    nice python benchmarks/bench_grader.py [--count 200] [--jobs 2] [--wall 60]

It grades one submission of every kind at -j 1 (each kind's time), then all ``count`` at
-j ``jobs`` in one run, which must not abort and must give every submission a result.

- Parallel efficiency = (sum over the class of its kind's -j 1 time) / (jobs x wall time at
  -j jobs). Each kind's time is the grader's own measure (``result.seconds``).
- Grader overhead per submission = the time a submission costs outside its test process
  (intake, scan, copying, preparing the run, scoring, writing its reports, ending its uid),
  averaged over the class at -j 1. The test process lasts from its start until it and
  everything it started have ended (``RunOutcome.process_seconds``).
- Overhead over running the tests directly: the full solution graded at -j 1 against plain
  ``pytest`` in a solved practice directory (the sandbox's own cost included).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from coursekit import assemble_practice_dir, load_lab
from coursekit.lab import Lab
from coursekit.layout import COURSE_ROOT, solution_root
from grader import GradeOptions, _grade, _sandbox, _session, grade_submissions
from grader._sandbox import Limits

SAMPLES = COURSE_ROOT / "grader" / "examples" / "submissions"
MiB = 1 << 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--wall", type=float, default=60, help="wall limit per submission")
    options = parser.parse_args()
    lab = load_lab("08")
    limits = Limits(wall_seconds=options.wall, test_seconds=min(30, options.wall))
    with tempfile.TemporaryDirectory(prefix="bench-grader-") as scratch:
        root = Path(scratch)
        solved = assemble_practice_dir(
            lab, root / "solved", solved_stages=[s.id for s in lab.stages]
        )
        direct = statistics.median(_time_direct(solved) for _ in range(3))
        kinds = _kinds(lab, root / "kinds")
        one_each = root / "one-each"
        one_each.mkdir()
        for kind, make in kinds.items():
            make(one_each / kind)
        with _Timer() as timer:
            sequential = grade_submissions(one_each, root / "out-1", GradeOptions(1, limits=limits))
        seconds = {r.student.removesuffix(":x"): r.seconds for r in sequential}
        expected = {r.student.removesuffix(":x"): r.status for r in sequential}
        class_kinds = [list(kinds)[n % len(kinds)] for n in range(options.count)]
        everyone = root / "class"
        everyone.mkdir()
        for n, kind in enumerate(class_kinds):
            kinds[kind](everyone / f"s{n:03d}-{kind}")
        start = time.perf_counter()
        batch = GradeOptions(options.jobs, limits=limits)
        results = grade_submissions(everyone, root / "out-n", batch)
        parallel = time.perf_counter() - start
    statuses = Counter(r.status for r in results)
    # Every submission of a kind ends as that kind ended alone at -j 1: running beside
    # others changes nothing about a submission's outcome.
    differ = sorted(
        f"{r.student}: {r.status}, alone {expected[alone]}"
        for r in results
        if (alone := _kind_of(r.student, expected)) is not None and r.status != expected[alone]
    )
    complete = len(results) == options.count
    predicted = sum(seconds[kind] for kind in class_kinds)
    efficiency = predicted / (options.jobs * parallel)
    overhead = statistics.mean(timer.outside.values())
    over_direct = seconds["solution"] - direct
    checks = [
        (complete, f"no abort: {len(results)} of {options.count} results ({dict(statuses)})"),
        (not differ, "each kind's status as at -j 1" + (f": {differ[:5]}" if differ else "")),
        (
            efficiency >= 0.75,
            f"parallel efficiency at -j {options.jobs}: {efficiency:.0%} (target >= 75%; "
            f"{parallel:.0f}s wall, {predicted:.0f}s of -j 1 work)",
        ),
        (
            overhead <= 0.5,
            f"grader overhead per submission outside its test process: {overhead:.2f}s "
            f"(target <= 0.5s; the most for one kind {max(timer.outside.values()):.2f}s)",
        ),
        (
            over_direct <= 0.5,
            f"overhead over running the tests directly: {over_direct:+.2f}s (target <= 0.5s; "
            f"direct run {direct:.2f}s, graded {seconds['solution']:.2f}s)",
        ),
    ]
    for ok, line in checks:
        print(f"{'ok  ' if ok else 'MISS'} {line}")
    print("per kind at -j 1: " + ", ".join(f"{k} {s:.1f}s" for k, s in sorted(seconds.items())))
    return 0 if all(ok for ok, _ in checks) else 1


def _kind_of(student: str, kinds: Container[str]) -> str | None:
    """The kind of a class member named ``s012-KIND`` (a student's name may carry a suffix
    the grader adds, as ``:x``)."""
    name = student.split("-", 1)[-1].removesuffix(":x")
    return name if name in kinds else None


class _Timer:
    """While entered, per submission: the time inside its test process and outside it."""

    def __init__(self) -> None:
        self.inside: dict[int, float] = {}
        self.outside: dict[str, float] = {}
        self._saved = (_sandbox.run_tests, _session.GradingSession.grade, _grade._record)

    def __enter__(self) -> _Timer:
        run_tests, grade, record = self._saved

        def timed_run(*args: Any, **kwargs: Any) -> Any:
            # Only the test process's own life counts as inside: the grader's preparation
            # of the run (copying the judge, the plugin) is overhead.
            outcome = run_tests(*args, **kwargs)
            key = threading.get_ident()
            self.inside[key] = self.inside.get(key, 0) + outcome.process_seconds
            return outcome

        def timed_grade(session: Any, submission: Any) -> Any:
            self.inside[threading.get_ident()] = 0.0
            started = time.perf_counter()
            result = grade(session, submission)
            total = time.perf_counter() - started
            self.outside[result.student] = total - self.inside[threading.get_ident()]
            return result

        def timed_record(out: Path, store: Any, result: Any) -> Any:
            started = time.perf_counter()
            written = record(out, store, result)
            self.outside[result.student] += time.perf_counter() - started
            return written

        _sandbox.run_tests = timed_run
        _session.GradingSession.grade = timed_grade  # type: ignore[method-assign, assignment]
        _grade._record = timed_record
        return self

    def __exit__(self, *exc: object) -> None:
        _sandbox.run_tests, _session.GradingSession.grade, _grade._record = self._saved  # type: ignore[method-assign]


def _kinds(lab: Lab, templates: Path) -> dict[str, Callable[[Path], None]]:
    """Each kind of submission, as a function that makes one at a path (the student's name
    is the path's name; archives get their suffix added)."""
    solution = solution_root(lab.root.name)

    def practice(target: Path, stages: list[str] | None = None) -> None:
        for stage in lab.stages:
            if stages is None or stage.id in stages:
                for module in stage.modules:
                    (target / module).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(solution / module, target / module)
        (target / "src/picourse/coding_tools").mkdir(parents=True, exist_ok=True)

    full = templates / "full"
    practice(full)

    def tar_gz(target: Path) -> None:
        with tarfile.open(target.with_name(target.name + ".tar.gz"), "w:gz") as bundle:
            bundle.add(full, arcname=".")

    def zipped(target: Path) -> None:
        shutil.make_archive(str(target), "zip", full)

    def colon(target: Path) -> None:
        practice(target.with_name(target.name + ":x"))

    def duplicate(target: Path) -> None:
        practice(target)
        zipped(target)

    def name_bomb(target: Path) -> None:
        header = tarfile.TarInfo("././@LongLink")
        header.type, header.size = tarfile.GNUTYPE_LONGNAME, 1 << 30
        zeros = gzip.compress(bytes(MiB), compresslevel=9)
        target.with_name(target.name + ".tar.gz").write_bytes(
            gzip.compress(header.tobuf(tarfile.USTAR_FORMAT)) + zeros * 1024
        )

    def data_file(target: Path) -> None:
        practice(target, ["8.1", "8.2"])
        with open(target / "dataset.bin", "wb") as handle:
            handle.truncate(4 << 30)

    kinds: dict[str, Callable[[Path], None]] = {
        "solution": practice,
        "solution-tgz": tar_gz,
        "solution-zip": zipped,
        "name-with-colon": colon,
        "duplicate": duplicate,
        "name-bomb": name_bomb,
        "huge-data-file": data_file,
    }
    stage_ids = [s.id for s in lab.stages if not s.optional]
    for k in range(1, len(stage_ids)):
        kinds[f"partial-{k}"] = functools.partial(practice, stages=stage_ids[:k])
    for sample in sorted(SAMPLES.iterdir()):
        if sample.name != "full-solution":
            kinds[f"sample-{sample.name}"] = functools.partial(shutil.copytree, sample)
    return kinds


def _time_direct(directory: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=directory,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
