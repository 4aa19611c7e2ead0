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

from coursekit.assemble import add_lab_tests, render_scaffold
from coursekit.lab import Lab, load_lab
from coursekit.layout import SCAFFOLD, SOLUTIONS
from grader import _sandbox
from grader._intake import InvalidSubmission, Submission, discover, lab_modules
from grader._scan import suspicious
from grader._scoring import InventoryItem, collect_inventory, score
from grader.model import SubmissionResult, truncate
from grader.report import write_class_reports, write_submission_reports


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
    with tempfile.TemporaryDirectory(prefix="grader-") as staging_dir:
        session = _Session.start(lab, options, Path(staging_dir), [submissions, out])
        pending = [s for s in found if options.regrade or not _up_to_date(out, s, session.key)]
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            futures = [pool.submit(session.grade, s) for s in pending]
            for future in as_completed(futures):
                result = future.result()
                write_submission_reports(out / "submissions" / result.student, result)
                if on_done is not None:
                    on_done(result)
    results = [r for r in (_load(out, s) for s in found) if r is not None]
    write_class_reports(out, lab, results)
    return results


@dataclass
class _Session:
    """What every submission of one grading run shares: the pristine copy, the test
    inventory, the paths to hide from student code and the pool of unprivileged users."""

    lab: Lab
    options: GradeOptions
    staging: Path
    pristine: Path
    inventory: list[InventoryItem]
    hidden: list[Path]
    key: str
    users: _sandbox.UserPool

    @classmethod
    def start(cls, lab: Lab, options: GradeOptions, staging: Path, private: list[Path]) -> _Session:
        # Traversable but not listable: a job's unprivileged user reaches its own directory
        # without seeing its neighbours' names.
        staging.chmod(0o711)
        pristine = staging / "pristine"
        render_scaffold(lab, pristine)
        add_lab_tests(lab, pristine)
        hidden = [SOLUTIONS, staging, *(p.resolve() for p in private)]
        return cls(
            lab,
            options,
            staging,
            pristine,
            collect_inventory(lab, pristine),
            hidden,
            grading_key(lab),
            _sandbox.UserPool(options.jobs),
        )

    def grade(self, submission: Submission) -> SubmissionResult:
        started = time.monotonic()
        digest = submission.digest()
        scratch = Path(tempfile.mkdtemp(prefix=f"{submission.student}-", dir=self.staging))
        scratch.chmod(0o711)
        try:
            with self.users.user() as user:
                result = self._grade(submission, scratch, user)
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
        self, submission: Submission, scratch: Path, user: tuple[int, int] | None
    ) -> SubmissionResult:
        modules = lab_modules(submission, self.lab, scratch)
        flags = suspicious(modules)
        workdir = scratch / "work"
        shutil.copytree(self.pristine, workdir)
        for module, content in modules.items():
            (workdir / module).write_bytes(content)
        limits = self.options.limits
        judge = _sandbox.Judge(self.pristine, student_modules(self.lab))
        outcome = _sandbox.run_tests(
            workdir, scratch, self.hidden, limits, self.options.sandbox, user, judge
        )
        flags += _run_flags(outcome)
        stages, tests, bonus, max_bonus = score(
            self.lab, self.inventory, outcome.records, credit=not flags
        )
        result = SubmissionResult(
            submission.student, "graded", "", outcome.isolation, stages, tests, bonus, max_bonus
        )
        if flags:
            would, *_ = score(self.lab, self.inventory, outcome.records, credit=True)
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
        elif not outcome.ended:
            result.status = "crashed"
            tail = outcome.output_tail.strip().splitlines()[-3:]
            result.reason = truncate(
                f"the test process ended early (exit code {outcome.exit_code}); tests that "
                "passed before it still count. Last output: " + " | ".join(tail),
                2000,
            )
        return result


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
    for hosted in (r for r in outcome.records if r.get("type") == "hosted"):
        if hosted["wrong_canaries"] or hosted["forged"]:
            flags.append(
                "the tests run in the student's own process reported forged outcomes "
                f"({hosted['wrong_canaries']} canary test(s) that must fail did not, "
                f"{hosted['forged']} report(s) for tests not run there)"
            )
    return flags


def host_ended(outcome: _sandbox.RunOutcome) -> int | None:
    """The exit code of the student's process when it ended before the judge was done."""
    return next((r["exit_code"] for r in outcome.records if r.get("type") == "host"), None)


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


def _up_to_date(out: Path, submission: Submission, key: str) -> bool:
    previous = _load(out, submission)
    return (
        previous is not None
        and previous.grading_key == key
        and previous.input_digest == submission.digest()
    )


def _load(out: Path, submission: Submission) -> SubmissionResult | None:
    path = out / "submissions" / submission.student / "result.json"
    try:
        return SubmissionResult.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _clean_leftovers(directory: Path) -> None:
    """Half-written results of an interrupted run: never read, always removed."""
    if directory.is_dir():
        for entry in directory.iterdir():
            if entry.name.startswith("."):
                shutil.rmtree(entry, ignore_errors=True)
