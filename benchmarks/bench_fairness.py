"""CPU fairness between grading jobs: how much a job that spins many busy processes slows a
neighbouring job that runs beside it.

    python benchmarks/bench_fairness.py [--spinners 60] [--work 4]

The honest job's one test does a fixed amount of CPU work (``--work`` seconds of it on an
idle core). Its test process time (``RunOutcome.process_seconds``) is measured alone, then
while a second job runs ``--spinners`` busy processes in a session of their own, both jobs
started by the grader's sandbox from one user pool (as root: a uid and cgroups each).

- Slowdown = honest job's time beside the spinners / its time alone, in the same run.
  Where each job has a cpu cgroup (root, writable cgroups) the scheduler shares the cores
  between the two jobs, whatever their process counts: on 2 cores the target is under 1.5.
  Without one (a normal user) the honest job gets about 1/(spinners + 1) of the cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from grader._sandbox import Limits, RunOutcome, UserPool, run_tests
from grader._sandbox._users import describe

LIMITS = Limits(wall_seconds=600, test_seconds=600)
TARGET = 1.5

HONEST = """
def test_fixed_work():
    total = 0
    for n in range(@loops@):
        total += n * n
    assert total > 0
"""

SPINNERS = """
import os, time

def test_spin_in_the_background():
    ready, told = os.pipe()
    for _ in range(@spinners@):
        if os.fork() == 0:
            os.setsid()
            os.write(told, b"!")
            while True:
                pass
    for _ in range(@spinners@):
        os.read(ready, 1)
    while not os.path.exists("stop"):  # the benchmark's word, in the job's own folder
        time.sleep(0.1)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spinners", type=int, default=60)
    parser.add_argument("--work", type=float, default=4, help="CPU-seconds of honest work")
    options = parser.parse_args()
    loops = int(options.work * 10_000_000)  # about 10 M loop steps per CPU-second
    with tempfile.TemporaryDirectory(prefix="bench-fairness-") as scratch, UserPool(2) as pool:
        root = Path(scratch)
        root.chmod(0o711)
        with pool.user() as user:
            isolation = describe(user) if user is not None else "a user namespace of its own"
            shared = user is not None and "cpu" in user.limited
            alone = _run(root / "alone", HONEST, user, loops=loops)
        beside: list[RunOutcome] = []
        with pool.user() as hog_user, pool.user() as user:
            hog = threading.Thread(
                target=_run,
                args=(root / "hog", SPINNERS, hog_user),
                kwargs={"spinners": options.spinners},
                daemon=True,
            )
            hog.start()
            try:
                beside.append(_run(root / "beside", HONEST, user, loops=loops))
            finally:
                (root / "hog" / "work" / "stop").touch()  # the spinners end with their job
                hog.join()
    for outcome in (alone, *beside):
        passed = [r["passed"] for r in outcome.records if r.get("type") == "test"]
        if passed != [True]:
            print(outcome.output_tail, file=sys.stderr)
            return 1
    ratio = beside[0].process_seconds / alone.process_seconds
    print(f"each job: {isolation}")
    print(f"honest job alone:                       {alone.process_seconds:7.1f} s")
    print(
        f"honest job beside {options.spinners} spinners:          "
        f"{beside[0].process_seconds:7.1f} s"
    )
    if not shared:
        print(f"slowdown (beside / alone):              {ratio:7.2f}  (no cpu cgroup: no target)")
        return 0
    print(f"slowdown (beside / alone), <= {TARGET}:     {ratio:7.2f}")
    return 0 if ratio <= TARGET else 1


def _run(directory: Path, source: str, user: object, **values: object) -> RunOutcome:
    workdir = directory / "work"
    (workdir / "tests").mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    text = textwrap.dedent(source)
    for key, value in values.items():
        text = text.replace(f"@{key}@", repr(value))
    (workdir / "tests" / "test_job.py").write_text(text)
    scratch = directory / "scratch"
    scratch.mkdir()
    for folder in (directory, workdir, workdir / "tests"):
        folder.chmod(0o755)
    return run_tests(workdir, scratch, LIMITS, "bwrap", user)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
