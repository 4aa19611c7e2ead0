"""Grade a folder of submissions: isolated runs in parallel, results written atomically per
submission, class reports rebuilt from all results. Rerunning resumes: a submission whose
input and grading key are unchanged is not graded again (unless ``regrade``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from coursekit.assemble import add_lab_tests, render_scaffold
from coursekit.lab import Lab, load_lab
from coursekit.layout import SCAFFOLD
from grader import _sandbox
from grader._intake import InvalidSubmission, Submission, discover, lab_modules
from grader._links import refuse_links
from grader._scan import scan
from grader._scoring import InventoryItem, collect_inventory, score
from grader._store import ResultStore
from grader.model import SubmissionResult, truncate
from grader.report import write_class_reports, write_submission_reports

STAGING_PREFIX = "grader-staging-"


@dataclass
class GradeOptions:
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    regrade: bool = False
    sandbox: _sandbox.SandboxMode = "auto"
    limits: _sandbox.Limits = field(default_factory=_sandbox.Limits)


def grade_submissions(
    submissions: Path,
    out: Path,
    options: GradeOptions | None = None,
    on_done: Callable[[SubmissionResult], None] | None = None,
) -> list[SubmissionResult]:
    options = options or GradeOptions()
    lab = load_lab("08")
    found = discover(submissions)
    out.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(out / "submissions")
    store = ResultStore(out)
    _remove_stale_staging()
    staging = tempfile.TemporaryDirectory(prefix=f"{STAGING_PREFIX}{os.getpid()}-")
    with _sandbox.UserPool(options.jobs, options.limits.processes) as users, staging as directory:
        session = _Session.start(lab, options, Path(directory), users, store)
        pending = [s for s in found if options.regrade or not _up_to_date(store, s, session.key)]
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            futures = [pool.submit(session.grade, s) for s in pending]
            for future in as_completed(futures):
                result = future.result()
                store.seal(result)
                write_submission_reports(out / "submissions" / result.student, result)
                if on_done is not None:
                    on_done(result)
    results = [r for r in (store.load(s.student) for s in found) if r is not None]
    write_class_reports(out, lab, results)
    return results


def release(out: Path, student: str) -> SubmissionResult:
    """Give a flagged submission, after review, the credit its run earned."""
    store = ResultStore(out)
    current = store.load(student)
    if current is None:
        raise InvalidSubmission(f"no result for {student!r} in {out}: grade it first")
    if current.status != "flagged":
        raise InvalidSubmission(f"{student} is {current.status}, not flagged: nothing to release")
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
    results = [r for r in (store.load(name) for name in store.students()) if r is not None]
    write_class_reports(out, load_lab("08"), results)
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
        return cls(
            lab,
            options,
            staging,
            pristine,
            collect_inventory(lab, pristine),
            grading_key(lab),
            users,
            store,
        )

    def grade(self, submission: Submission) -> SubmissionResult:
        started = time.monotonic()
        digest = ""  # a refused submission is looked at again on every run
        scratch = Path(tempfile.mkdtemp(prefix=f"{submission.student}-", dir=self.staging))
        scratch.chmod(0o711)
        try:
            refuse_links(submission.source)
            digest = submission.digest()
            with self.users.user() as user:
                result, credited = self._grade(submission, scratch, user)
            if credited is not None:
                credited.input_digest, credited.grading_key = digest, self.key
                self.store.hold(submission.student, credited)
        except InvalidSubmission as error:
            result = SubmissionResult(submission.student, "invalid", str(error), "none")
            result.stages, result.tests, result.bonus, result.max_bonus = score(
                self.lab, self.inventory, [], credit=False
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        result.input_digest, result.grading_key = digest, self.key
        result.seconds = round(time.monotonic() - started, 2)
        return result

    def _grade(
        self, submission: Submission, scratch: Path, user: _sandbox.JobUser | None
    ) -> tuple[SubmissionResult, SubmissionResult | None]:
        """The result, and for a flagged run the credit it earned, held for review."""
        modules = lab_modules(submission, self.lab, scratch)
        findings = scan(modules)
        flags = list(findings.verdict)
        workdir = scratch / "work"
        shutil.copytree(self.pristine, workdir)
        for module, content in modules.items():
            (workdir / module).write_bytes(content)
        limits = self.options.limits
        outcome = _sandbox.run_tests(workdir, scratch, limits, self.options.sandbox, user)
        flags += _run_flags(outcome)
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
        elif not outcome.ended:
            result.status = "crashed"
            tail = outcome.output_tail.strip().splitlines()[-3:]
            result.reason = truncate(
                f"the test process ended early (exit code {outcome.exit_code}); tests that "
                "passed before it still count. Last output: " + " | ".join(tail),
                2000,
            )
        elif findings.notes:
            result.reason = truncate(
                "for review, no effect on the score: " + "; ".join(findings.notes), 2000
            )
        return result, credited


def _run_flags(outcome: _sandbox.RunOutcome) -> list[str]:
    """What the run itself shows of tampering with the grader's channel or pytest."""
    flags = []
    if outcome.forged:
        flags.append(f"{outcome.forged} forged record(s) on the grader's channel")
    tamper = [w for r in outcome.records if r.get("type") == "tamper" for w in r["what"]]
    if tamper:
        flags.append("changed at run time: " + ", ".join(tamper))
    seen = [r["nodeid"] for r in outcome.records if r.get("type") == "test"]
    if len(seen) != len(set(seen)):
        flags.append("the grader's channel carried two records for one test")
    return flags


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
    return (
        previous is not None
        and previous.input_digest != ""
        and previous.grading_key == key
        and previous.input_digest == submission.digest()
    )


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
