"""Grade a folder of submissions: isolated runs in parallel, results written atomically per
submission, class reports rebuilt from every result in OUT. Rerunning resumes: a submission
whose input and grading key are unchanged is not graded again (unless ``regrade``). Where
the jobs' CPU use cannot be held apart, a timeout under CPU pressure is graded again alone.

No one submission stops the run: whatever goes wrong while grading it is recorded as its
result. The student's own failures are ``invalid``, ``crashed`` or ``timeout``; the grader's
(a job that never started, an unexpected exception) are ``error``, tried once more first, and
graded again by the next run. One grader at a time writes to an OUT.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from coursekit.assemble import add_lab_tests, render_scaffold
from coursekit.lab import Lab, load_lab
from coursekit.layout import SCAFFOLD
from grader import _sandbox
from grader._diagnosis import Diagnoser
from grader._intake import InvalidSubmission, Submission, survey, take
from grader._run_records import (
    check_the_judge,
    host_ended,
    host_stalled,
    judge_interrupted,
    run_flags,
)
from grader._scan import ScanReport, scan
from grader._scoring import InventoryItem, collect_inventory, score
from grader._starvation import StallMeter, maybe_starved
from grader._store import ResultStore
from grader.model import Status, SubmissionResult, truncate
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


# CPython gh-106905: ast.parse in two threads at once can crash the interpreter (3.11, 3.12).
_SCAN_LOCK = threading.Lock()
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
            session = _Session.start(lab, options, Path(directory), users, store)
            pending = [
                s for s in found if options.regrade or not _up_to_date(store, s, session.key)
            ]
            # Without a cpu cgroup per job, a job that runs many busy processes can starve
            # its neighbours into a timeout: such a timeout is graded again, alone.
            cpu_shared = min(options.jobs, len(pending)) > 1 and not users.isolates_cpu
            again: list[Submission] = []
            with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
                futures = {pool.submit(_measured, session, s): s for s in pending}
                try:
                    for future in as_completed(futures):
                        result, stall_share = future.result()
                        if cpu_shared and maybe_starved(result, stall_share):
                            again.append(futures[future])
                        else:
                            _finish(out, store, result, on_done)
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


def _measured(session: _Session, submission: Submission) -> tuple[SubmissionResult, float | None]:
    """The result, and the share of its run in which some task waited for a CPU."""
    meter = StallMeter()
    result = session.grade(submission)
    return result, meter.share()


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


@dataclass
class _Session:
    """What every submission of one grading run shares: the pristine copy, the test
    inventory, the pool of unprivileged users and the store of trusted results."""

    lab: Lab
    options: GradeOptions
    staging: Path
    pristine: Path
    inventory: list[InventoryItem]
    key: str
    users: _sandbox.UserPool
    store: ResultStore
    diagnose: Diagnoser

    @classmethod
    def start(
        cls,
        lab: Lab,
        options: GradeOptions,
        staging: Path,
        users: _sandbox.UserPool,
        store: ResultStore,
    ) -> _Session:
        with users.user() as user:  # refuse now, not once per submission
            _sandbox.require_sandbox(options.sandbox, options.limits, user)
        # Traversable but not listable: a job's unprivileged user reaches its own directory
        # without seeing its neighbours' names.
        staging.chmod(0o711)
        pristine = staging / "pristine"
        render_scaffold(lab, pristine)
        add_lab_tests(lab, pristine)
        key = grading_key(lab)
        inventory = collect_inventory(lab, pristine, key)  # and compiled for every job
        _sandbox.share_read_only(pristine)  # mounted read-only into every sandboxed run
        return cls(
            lab,
            options,
            staging,
            pristine,
            inventory,
            key,
            users,
            store,
            Diagnoser(lab, pristine / "tests"),
        )

    def grade(self, submission: Submission) -> SubmissionResult:
        """Always a result: the student's failures as theirs, the grader's as ``error``."""
        started = time.monotonic()
        digest = ""  # a refused submission is looked at again on every run
        for attempt in (1, 2):
            try:
                result, credited, digest = self._attempt(submission)
                if credited is not None:
                    credited.input_digest, credited.grading_key = digest, self.key
                    self.store.hold(submission.student, credited)
                break
            except InvalidSubmission as error:
                result = self._unscored(submission, "invalid", str(error))
                break
            except _sandbox.SandboxError:
                raise  # the instructor's configuration: no submission can be graded
            except Exception as error:  # noqa: BLE001 - any other failure is the grader's
                failure = f"{type(error).__name__}: {error}"
                result = self._unscored(
                    submission,
                    "error",
                    f"the grader failed twice, not the student ({failure}); the next run "
                    "grades this submission again",
                )
                if attempt == 1:
                    continue
        result.input_digest, result.grading_key = digest, self.key
        result.diagnoses = self.diagnose(result)
        result.seconds = round(time.monotonic() - started, 2)
        return result

    def _attempt(
        self, submission: Submission
    ) -> tuple[SubmissionResult, SubmissionResult | None, str]:
        """The result, the credit held for review, and the digest of what was graded."""
        # A random name: a student's name never reaches a path the job sees (PYTHONPATH).
        scratch = Path(tempfile.mkdtemp(prefix="job-", dir=self.staging))
        try:
            scratch.chmod(0o711)
            taken = take(submission, self.lab, scratch)  # read once, by descriptors
            with self.users.user() as user:
                return (*self._grade(submission, taken.modules, scratch, user), taken.digest)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _unscored(self, submission: Submission, status: Status, reason: str) -> SubmissionResult:
        result = SubmissionResult(submission.student, status, reason, "none")
        result.stages, result.tests, result.bonus, result.max_bonus = score(
            self.lab, self.inventory, [], credit=False
        )
        return result

    def _grade(
        self,
        submission: Submission,
        modules: dict[str, bytes],
        scratch: Path,
        user: _sandbox.JobUser | None,
    ) -> tuple[SubmissionResult, SubmissionResult | None]:
        """The result, and for a flagged run the credit it earned, held for review."""
        findings = _scan(modules)
        flags = list(findings.verdict)
        limits = self.options.limits
        judge = _sandbox.Judge(self.pristine, student_modules(self.lab), modules)
        outcome = _sandbox.run_tests(
            scratch / "work", scratch, limits, self.options.sandbox, user, judge
        )
        if not outcome.records and not outcome.timed_out:
            # Not one record, not even the plugin's first: the test process never started
            # (a sandbox or system failure), so no student code ran.
            raise _JobNeverStarted(
                f"the test process ended before pytest started (exit code {outcome.exit_code}): "
                + " | ".join(outcome.output_tail.strip().splitlines()[-3:])
            )
        check_the_judge(outcome)
        flags += run_flags(outcome)
        credited = None
        stages, tests, bonus, max_bonus = score(
            self.lab, self.inventory, outcome.records, credit=not flags
        )
        result = SubmissionResult(
            submission.student, "graded", "", outcome.isolation, stages, tests, bonus, max_bonus
        )
        if flags:
            would, tests, bonus, max_bonus = score(
                self.lab, self.inventory, outcome.records, credit=True
            )
            credited = SubmissionResult(
                submission.student,
                "graded",
                truncate("released after review of: " + "; ".join(flags), 2000),
                outcome.isolation,
                would,
                tests,
                bonus,
                max_bonus,
            )
            result.status = "flagged"
            result.reason = truncate(
                "; ".join(flags) + " (the run itself passed tests worth "
                f"{sum(s.score for s in would):g} points; no credit until reviewed)",
                2000,
            )
        elif outcome.timed_out:
            result.status = "timeout"
            result.reason = (
                f"stopped after the wall limit of {limits.wall_seconds:g}s; "
                "tests that passed before it still count"
            )
        elif host_ended(outcome) is not None:
            result.status = "crashed"
            result.reason = (
                f"the student's process ended early (exit code {host_ended(outcome)}); "
                "tests that passed before it still count"
            )
        elif host_stalled(outcome):
            result.status = "crashed"
            result.reason = (
                "the tests run in the student's own process could not go on (it stopped "
                "answering them: code that blocks or turns off pytest's timeout; or it left "
                "no room to start the process that runs them), so those tests earn nothing; "
                "tests that passed before it and the judge's own still count"
            )
        elif judge_interrupted(outcome):
            result.status = "crashed"
            result.reason = (
                "the judge was interrupted before it finished (a signal from the student's "
                "process); tests that passed before it still count"
            )
        elif not outcome.ended:
            result.status = "crashed"
            tail = outcome.output_tail.strip().splitlines()[-3:]
            result.reason = truncate(
                f"the test process ended early (exit code {outcome.exit_code}); tests that "
                "passed before it still count. Last output (the student's code writes there too): "
                + " | ".join(tail),
                2000,
            )
        elif findings.notes:
            result.reason = truncate(
                "for review, no effect on the score: " + "; ".join(findings.notes), 2000
            )
        return result, credited


def _scan(modules: dict[str, bytes]) -> ScanReport:
    with _SCAN_LOCK:
        return scan(modules)


class _JobNeverStarted(Exception):
    """The sandbox or the system failed before the tests began."""


def student_modules(lab: Lab) -> list[str]:
    """``src/picourse/coding_tools/read.py`` -> ``picourse.coding_tools.read``."""
    names = []
    for stage in lab.stages:
        for module in stage.modules:
            names.append(
                Path(module).relative_to("src").with_suffix("").as_posix().replace("/", ".")
            )
    return names


def grading_key(lab: Lab) -> str:
    """Changes whenever anything that decides a grade changes: tests, weights, scaffold,
    grader. A rerun regrades every submission graded under another key."""
    hasher = hashlib.sha256()
    roots = [lab.tests_dir, lab.root / "lab.toml", SCAFFOLD, Path(__file__).parent]
    for root in roots:
        for path in sorted(root.rglob("*") if root.is_dir() else [root]):
            if path.is_file() and "__pycache__" not in path.parts:
                hasher.update(path.read_bytes())
    return hasher.hexdigest()[:16]


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
