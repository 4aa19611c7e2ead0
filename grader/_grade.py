"""Grade a folder of submissions: isolated runs in parallel, results written atomically per
submission, class reports rebuilt from every result in OUT. Rerunning resumes: a submission
whose input and grading key are unchanged is not graded again (unless ``regrade``). Where
the jobs' CPU use cannot be held apart, a timeout under CPU pressure is graded again alone,
and so is a job that ran while its uid's shared kernel counters were used up (a normal
user's jobs share one uid: _shared_counters.py).

No one submission stops the run: whatever goes wrong while grading it is recorded as its
result. The student's own failures are ``invalid``, ``crashed`` or ``timeout``; the grader's
(a job that never started, an unexpected exception) are ``error``, tried once more first, and
graded again by the next run. One grader at a time writes to an OUT.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import psutil

from coursekit.lab import load_lab
from grader import _sandbox
from grader._intake import InvalidSubmission, Submission, survey
from grader._session import GradingSession
from grader._shared_counters import SharedCounters
from grader._starvation import StallMeter, maybe_starved
from grader._store import ResultStore
from grader.model import SubmissionResult
from grader.report import write_class_reports, write_submission_reports

STAGING_PREFIX = "grader-staging-"


@dataclass
class GradeOptions:
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    regrade: bool = False
    sandbox: _sandbox.SandboxMode = "auto"
    limits: _sandbox.Limits = field(default_factory=_sandbox.Limits)


class OutputBusy(Exception):
    """Another grader is writing to the same OUT."""


LOCK_FILE = ".grader.lock"


def grade_submissions(
    submissions: Path,
    out: Path,
    options: GradeOptions | None = None,
    on_done: Callable[[SubmissionResult], None] | None = None,
) -> list[SubmissionResult]:
    """Grade what ``submissions`` holds into ``out``; returns every result in ``out``."""
    options = options or GradeOptions()
    lab = load_lab("08")
    found, skipped = survey(submissions)
    out.mkdir(parents=True, exist_ok=True)
    with _holding(out):
        _clean_leftovers(out / "submissions")
        store = ResultStore(out)
        _remove_stale_staging()
        staging = tempfile.TemporaryDirectory(prefix=f"{STAGING_PREFIX}{os.getpid()}-")
        with (
            _sandbox.UserPool(
                options.jobs, options.limits.processes, options.limits.job_memory_bytes
            ) as users,
            staging as directory,
        ):
            session = GradingSession.start(
                lab, options.sandbox, options.limits, Path(directory), users, store
            )
            pending = [
                s for s in found if options.regrade or not _up_to_date(store, s, session.key)
            ]
            # Without a cpu cgroup per job, a job that runs many busy processes can starve
            # its neighbours into a timeout: such a timeout is graded again, alone. Jobs of
            # one uid can use up what the kernel counts per uid: a job that ran meanwhile
            # is graded again, alone, too.
            side_by_side = min(options.jobs, len(pending)) > 1
            cpu_shared = side_by_side and not users.isolates_cpu
            again: list[Submission] = []
            with (
                SharedCounters(watched=side_by_side and users.shares_uid) as counters,
                ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool,
            ):
                futures = {pool.submit(_measured, session, s): s for s in pending}
                try:
                    for future in as_completed(futures):
                        run = future.result()
                        if (
                            cpu_shared and maybe_starved(run.result, run.stall_share)
                        ) or counters.used_up(run.started, run.ended):
                            again.append(futures[future])
                        else:
                            _finish(out, store, run.result, on_done)
                except BaseException:
                    pool.shutdown(cancel_futures=True)
                    raise
            for submission in again:  # one at a time, after the others: no neighbour
                _finish(out, store, session.grade(submission), on_done)
        results = stored_results(store)
        write_class_reports(out, lab, results, skipped)
    return results


@contextlib.contextmanager
def _holding(out: Path) -> Iterator[None]:
    """An exclusive lock on OUT for the whole run; the second grader refuses at once."""
    with open(out / LOCK_FILE, "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise OutputBusy(
                f"{out} is in use by another grader ({holder}); wait for it to finish, or "
                "grade into another --out"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, since {time.strftime('%H:%M:%S')}\n")
        lock.flush()
        yield


class _Run(NamedTuple):
    result: SubmissionResult
    stall_share: float | None  # the share of the run in which some task waited for a CPU
    started: float  # time.monotonic()
    ended: float


def _measured(session: GradingSession, submission: Submission) -> _Run:
    meter = StallMeter()
    started = time.monotonic()
    result = session.grade(submission)
    return _Run(result, meter.share(), started, time.monotonic())


def _finish(
    out: Path,
    store: ResultStore,
    result: SubmissionResult,
    on_done: Callable[[SubmissionResult], None] | None,
) -> None:
    recorded = _record(out, store, result)
    if on_done is not None:
        on_done(recorded)


def _record(out: Path, store: ResultStore, result: SubmissionResult) -> SubmissionResult:
    """Seal and write one submission's result; one that cannot be rendered becomes an error."""
    directory = out / "submissions" / result.student
    try:
        store.seal(result)
        write_submission_reports(directory, result)
    except Exception as error:  # noqa: BLE001 - a report the grader cannot write is its failure
        result = SubmissionResult(
            result.student,
            "error",
            f"the grader could not write this result ({type(error).__name__}: {error}); "
            "grade again",
            result.isolation,
            input_digest=result.input_digest,
            grading_key=result.grading_key,
        )
        store.seal(result)
        write_submission_reports(directory, result)
    return result


def release(out: Path, student: str) -> SubmissionResult:
    """Give a flagged submission, after review, the credit its run earned."""
    with _holding(out):
        store = ResultStore(out)
        current = store.load(student)
        if current is None:
            raise InvalidSubmission(f"no result for {student!r} in {out}: grade it first")
        if current.status != "flagged":
            raise InvalidSubmission(
                f"{student} is {current.status}, not flagged: nothing to release"
            )
        held = store.held(student)
        if held is None or (held.input_digest, held.grading_key) != (
            current.input_digest,
            current.grading_key,
        ):
            raise InvalidSubmission(
                f"no held credit for {student}'s current result: grade it again with --regrade"
            )
        store.seal(held)
        write_submission_reports(out / "submissions" / student, held)
        store.forget_held(student)
        write_class_reports(out, load_lab("08"), stored_results(store))
    return held


def _up_to_date(store: ResultStore, submission: Submission, key: str) -> bool:
    """Only a result the grader sealed can make a rerun skip a submission."""
    previous = store.load(submission.student)
    if (
        previous is None
        or previous.status == "error"
        or previous.input_digest == ""
        or previous.grading_key != key
    ):
        return False
    try:
        return previous.input_digest == submission.digest()
    except (InvalidSubmission, OSError):
        return False  # graded again, and recorded as invalid with the reason


def stored_results(store: ResultStore) -> list[SubmissionResult]:
    """Every sealed result in OUT, also of students not in this run's submissions folder (a
    run over late submissions keeps the class)."""
    loaded = (store.load(student) for student in store.students())
    return [result for result in loaded if result is not None]


def _remove_stale_staging() -> None:
    """The staging of a grader that was killed: its runs died with it (see _sandbox)."""
    for entry in Path(tempfile.gettempdir()).glob(f"{STAGING_PREFIX}*-*"):
        pid = entry.name.removeprefix(STAGING_PREFIX).split("-")[0]
        try:
            owned = entry.lstat().st_uid == os.geteuid() and not entry.is_symlink()
        except OSError:
            continue
        if owned and pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _clean_leftovers(directory: Path) -> None:
    """Half-written results of an interrupted run: never read, always removed."""
    if directory.is_dir():
        for entry in directory.iterdir():
            if entry.name.startswith("."):
                shutil.rmtree(entry, ignore_errors=True)
