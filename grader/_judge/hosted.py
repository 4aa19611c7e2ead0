"""The judge's side of the in-host tests: run them in the student's process, check the
canaries, and pass on what survives.

An in-host outcome is the student's own report: it earns its points only when every
canary of the run failed as it must. A run with a passed or missing canary, a report for a
test the judge decided itself, or an unknown name is flagged (no credit until reviewed).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import host_process, hosted_plugin

MAX_LINES = 20_000
MAX_LINE_BYTES = 1 << 16


def run_in_host(
    tests: list[str], files: list[str], judged: set[str], seconds: float
) -> list[dict[str, Any]]:
    salt = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    env = {k: os.environ[k] for k in host_process.HOST_ENVIRONMENT if k in os.environ}
    if host_process.settings.marker is not None:
        env[host_process.settings.marker[0]] = host_process.settings.marker[1]
    env[hosted_plugin.PLAN] = json.dumps({"tests": tests, "files": files, "salt": salt})
    env[hosted_plugin.RESULTS_FD] = str(write_end)
    # The pristine tests (read-only to the job), with the student's package on the path.
    root = Path(host_process.settings.tests).parent
    paths = sorted({str(root / nodeid.split("::")[0]) for nodeid in [*tests, *files]})
    command = [
        *(sys.executable, "-m", "pytest", "-p", hosted_plugin.__name__),
        *("-c", str(root / "pyproject.toml"), "--rootdir", str(root)),
        *("-o", f"pythonpath={host_process.settings.src}", "-o", "addopts="),
        *("-p", "no:cacheprovider", "-q", "--tb=no", f"--timeout={seconds:g}"),
        *paths,
    ]
    try:
        process = subprocess.Popen(
            command,
            cwd=host_process.settings.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            pass_fds=(write_end,),
            close_fds=True,
        )
    finally:
        os.close(write_end)
    lines: list[bytes] = []
    with os.fdopen(read_end, "rb") as results:
        # Bounded: a line past MAX_LINE_BYTES is cut (and then fails to parse: forged).
        while line := results.readline(MAX_LINE_BYTES):
            if len(lines) < MAX_LINES:
                lines.append(line)
    process.wait()
    return verify(lines, salt, tests, files, judged)


def verify(
    lines: list[bytes], salt: str, tests: list[str], files: list[str], judged: set[str]
) -> list[dict[str, Any]]:
    real: dict[str, dict[str, Any]] = {}
    canaries: dict[str, bool] = {}
    forged = 0
    for line in lines:
        try:
            record = json.loads(line)
            base, _, token = str(record["nodeid"]).rpartition("@")
            passed = record["passed"] is True
        except (ValueError, KeyError, TypeError, AttributeError):
            forged += 1
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
    wrong = sum(1 for base in real if canaries.get(base, True))
    summary = {"type": "hosted", "tests": len(real), "wrong_canaries": wrong, "forged": forged}
    return [*real.values(), summary]
