"""The judge's side of the in-host tests: run them in the student's process, check the
canaries, and pass on what survives.

An in-host outcome is the student's own report. A run with a passed or missing canary, a
report for a test the judge decided itself, or an unknown name is flagged (no credit until
reviewed); what an unflagged in-host pass earns is bounded in ``grader/_scoring.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import host_process, hosted_plugin

MAX_LINES = 20_000
MAX_LINE_BYTES = 1 << 16
# What one batch's lines may hold in all: an honest batch sends well under 1 MiB, and the
# judge's address space is limited (lines past it are dropped, never credited).
MAX_BATCH_BYTES = 64 << 20
# How often a quiet results pipe is checked for an in-host pytest that has ended.
QUIET_CHECK_SECONDS = 0.2
# How long an in-host pytest may stay quiet during a batch beyond two tests' timeouts (each
# test sends its line within one: no lab test has a timeout marker of its own, and one that
# had a longer one would need a larger bound): room for collection on a loaded machine.
QUIET_MARGIN_SECONDS = 10.0
# How long an in-host pytest whose results ended may take to exit: its descriptors close
# just before it has, and on a loaded machine that can take a moment.
EXIT_WAIT_SECONDS = 2.0


class HostedRun:
    """One in-host pytest for the whole session: started (and collecting) as soon as the
    judge has collected, so a batch costs only its tests; started again if it ended."""

    def __init__(self) -> None:
        self.salt = secrets.token_hex(16)
        self.process: subprocess.Popen[bytes] | None = None
        self.commands: Any = None
        self.results: Any = None
        self.batches = 0
        # The in-host run cannot go on (a batch never taken or never answered, or no process
        # to be had for it): no later batch is sent either.
        self.stalled = False
        # Whether the session's one fresh start for a batch cut short was used (_once_more).
        self.retried = False

    def start(self, seconds: float) -> None:
        """Start the in-host pytest; when no process can be had, the in-host run stalls. The
        student's code can fill the job's process limit (the judge's too) and end the in-host
        pytest to have it started again: that is theirs to answer for, never the judge's
        failure (an error escaping here ended the judge as pytest's internal error, recorded
        as the grader's and graded again on every run)."""
        try:
            self._spawn(seconds)
        except OSError:
            self.stalled = True
            self.stop()

    def _spawn(self, seconds: float) -> None:
        results_read, results_write = os.pipe()
        commands_read, commands_write = os.pipe()
        env = {k: os.environ[k] for k in host_process.HOST_ENVIRONMENT if k in os.environ}
        settings = host_process.settings
        if settings.marker is not None:
            env[settings.marker[0]] = settings.marker[1]
        env[hosted_plugin.PLAN] = json.dumps({"salt": self.salt})
        env[hosted_plugin.RESULTS_FD] = str(results_write)
        env[hosted_plugin.COMMANDS_FD] = str(commands_read)
        # The pristine tests (read-only to the job), with the student's package on the path.
        root = Path(settings.tests).parent
        # The judge's own selection: collecting files it never runs would cost a second.
        selection = list(settings.test_files) or [str(root / "tests")]
        command = [
            *(sys.executable, "-m", "pytest", "-p", hosted_plugin.__name__),
            *("-c", str(root / "pyproject.toml"), "--rootdir", str(root)),
            *("-o", f"pythonpath={settings.src}", "-o", "addopts="),
            *("-p", "no:cacheprovider", "-q", "--tb=no", f"--timeout={seconds:g}"),
            *selection,
        ]
        try:
            self.process = subprocess.Popen(
                command,
                cwd=settings.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                pass_fds=(results_write, commands_read),
                close_fds=True,
            )
        except BaseException:
            os.close(results_read)
            os.close(commands_write)
            raise
        finally:
            os.close(results_write)
            os.close(commands_read)
        self.commands = os.fdopen(commands_write, "wb", buffering=0)
        self.results = os.fdopen(results_read, "rb", buffering=0)

    def run(
        self, tests: list[str], files: list[str], judged: set[str], seconds: float
    ) -> list[dict[str, Any]]:
        """The batch's records, last its summary: whether the in-host run has stalled
        (the reason its tests earn nothing), and what was forged."""
        if not self.stalled and (self.process is None or self.process.poll() is not None):
            self.stop()
            self.start(seconds)  # stalls the run when no process can be had
        if self.stalled:
            records = verify([], self.salt, tests, files, judged, complete=False)
        else:
            records, done = self._batch(tests, files, judged, seconds)
            if not done:
                records = self._once_more(records, tests, judged, seconds)
        records[-1]["stalled"] = self.stalled
        return records

    def _once_more(
        self, records: list[dict[str, Any]], tests: list[str], judged: set[str], seconds: float
    ) -> list[dict[str, Any]]:
        """A batch whose in-host pytest ended (or closed its results) before the batch did:
        the tests it never reported run once more, in a fresh in-host pytest, once per
        session. The student's code can end that pytest, which then costs a second start;
        but so can a failure of the moment, and an honest submission, graded beside a busy
        test suite as a normal user, lost the in-host tests of a whole file to one (its
        next file's batch, in a fresh pytest, passed). Not after a stall, and not for a
        batch that already showed forged reports (flagged whatever a rerun shows)."""
        *reported, summary = records
        seen = {record["nodeid"] for record in reported}
        unrun = [test for test in tests if test not in seen]
        if (
            self.retried
            or self.stalled
            or not unrun
            or summary["forged"]
            or summary["wrong_canaries"]
        ):
            return records
        self.retried = True
        self.stop()
        self.start(seconds)  # stalls the run when no process can be had
        if self.stalled:
            return records
        (*again, more), _ = self._batch(unrun, [], judged, seconds)
        for key in ("tests", "wrong_canaries", "forged", "ended"):
            summary[key] += more[key]
        summary["cut"] = more["cut"]
        return [*reported, *again, summary]

    def _batch(
        self, tests: list[str], files: list[str], judged: set[str], seconds: float
    ) -> tuple[list[dict[str, Any]], bool]:
        """The batch's records, last its summary, and whether the batch ran to its end."""
        self.batches += 1
        batch = {"id": self.batches, "tests": tests, "files": files}
        lines: list[bytes] = []
        kept = 0
        done = False
        stray = 0
        try:
            sent, stray = self._send(json.dumps(batch).encode() + b"\n", seconds)
            for line in self._lines(quiet_limit=2 * seconds + QUIET_MARGIN_SECONDS) if sent else ():
                if line.strip() == json.dumps({"done": self.batches}).encode():
                    done = True
                    break
                if len(lines) < MAX_LINES and kept + len(line) <= MAX_BATCH_BYTES:
                    lines.append(line)
                    kept += len(line)
        except OSError:
            pass
        records = verify(lines, self.salt, tests, files, judged, complete=done)
        records[-1]["forged"] += stray
        if not done and self.process is not None:
            records[-1]["ended"].append(self._exit_code())
        return records, done

    def _exit_code(self) -> int | None:
        """The exit code of the in-host pytest that cut its batch short (negative: the
        signal that ended it); None when it runs on (it closed its results). Waited for:
        a process found still exiting would be sent the next batch, which is then lost."""
        assert self.process is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.process.wait(timeout=EXIT_WAIT_SECONDS)
        return None

    def _send(self, data: bytes, seconds: float) -> tuple[bool, int]:
        """Write a batch without ever blocking on it; returns whether it was sent, and how
        many stray chunks arrived meanwhile. The student's code can fill the commands pipe
        (its write end reopened through /proc) and then block writing to a full results
        pipe: a blocking write here waited for it until the wall. So the results are read
        while the batch waits (an honest in-host pytest writes nothing between batches:
        what comes is forged), and a batch still not taken after ``seconds`` (one test's
        timeout) ends the in-host run."""
        assert self.commands is not None and self.results is not None
        assert self.process is not None
        source, target = self.results.fileno(), self.commands.fileno()
        os.set_blocking(target, False)
        pending = memoryview(data)
        stray = 0
        deadline = time.monotonic() + seconds
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stalled = True
                self.stop()
                return False, stray
            readable, writable, _ = select.select([source], [target], [], left)
            if readable:
                if not os.read(source, MAX_LINE_BYTES):
                    return False, stray  # the results pipe's end: nothing can answer
                stray += 1
            if writable:
                with contextlib.suppress(BlockingIOError):
                    pending = pending[os.write(target, pending) :]
        return True, stray

    def _lines(self, quiet_limit: float = float("inf")) -> Iterator[bytes]:
        """The in-host pytest's lines, each cut at MAX_LINE_BYTES (a cut line then fails to
        parse: forged), until end of file or until that pytest has ended and the pipe is
        drained. Not end of file alone: the student's code can reopen the pipe's write end
        through /proc and hold it, which would keep the judge waiting until the wall. Nor
        a pytest that stays quiet past ``quiet_limit``: each test sends its line within one
        test's timeout, so only code that disabled that timeout is still running; the
        in-host run then ends for the rest of the session."""
        assert self.results is not None and self.process is not None
        fd = self.results.fileno()
        pending = b""
        heard = time.monotonic()
        while True:
            if not select.select([fd], [], [], QUIET_CHECK_SECONDS)[0]:
                if self.process.poll() is None:
                    if time.monotonic() - heard <= quiet_limit:
                        continue
                    self.stalled = True
                    self.stop()
                    return
                chunk = b""
            else:
                chunk = os.read(fd, MAX_LINE_BYTES)
                heard = time.monotonic()
            if not chunk:  # the end: a last line without its newline still counts
                if pending:
                    yield pending
                return
            pending += chunk
            while (end := pending.find(b"\n", 0, MAX_LINE_BYTES)) >= 0 or len(
                pending
            ) >= MAX_LINE_BYTES:
                cut = end + 1 if end >= 0 else MAX_LINE_BYTES
                yield pending[:cut]
                pending = pending[cut:]

    def stop(self) -> None:
        for stream in (self.commands, self.results):
            if stream is not None:
                stream.close()
        self.commands = self.results = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None


def verify(
    lines: list[bytes],
    salt: str,
    tests: list[str],
    files: list[str],
    judged: set[str],
    *,
    complete: bool = True,
) -> list[dict[str, Any]]:
    """``complete``: the batch ran to its end. When the in-host pytest ended first (the
    student's code can end it), a test whose canary never ran is not run, not forged."""
    real: dict[str, dict[str, Any]] = {}
    canaries: dict[str, bool] = {}
    forged = 0
    for line in lines:
        try:
            record = json.loads(line)
            base, _, token = str(record["nodeid"]).rpartition("@")
            passed = record["passed"] is True
        except Exception:  # noqa: BLE001 - the student's process wrote it: a line json
            forged += 1  # cannot parse (too deep: RecursionError) or of the wrong shape
            continue
        if base in judged or not hosted_plugin.selected(base, tests, files):
            forged += 1
            continue
        real_token, canary_token = hosted_plugin.tokens(salt, base)
        if token == real_token and base not in real:
            message = str(record.get("message", ""))[:2000]
            real[base] = {"type": "test", "nodeid": base, "passed": passed, "message": message}
            real[base].update(markers=[], where="host")
        elif token == canary_token and base not in canaries:
            canaries[base] = passed
        else:
            forged += 1
    if not complete:
        real = {base: record for base, record in real.items() if base in canaries}
    wrong = sum(1 for base in real if canaries.get(base, True))
    summary = {"type": "hosted", "tests": len(real), "wrong_canaries": wrong, "forged": forged}
    # "cut": tests of the batch may never have run; "ended": the exit code of each in-host
    # pytest that ended during the batch (see HostedRun._exit_code).
    summary.update(cut=not complete, ended=[])
    return [*real.values(), summary]
