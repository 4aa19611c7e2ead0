"""The pipes of a grading run: the plugin's signed records and the output's tail."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

OUTPUT_TAIL_BYTES = 64 * 1024
MAX_RECORD_BYTES = 1 << 20  # a record holds a message cut at 2000 characters
MAX_RECORDS = 100_000  # a flood of records is not a test run


def key_pipe(key: bytes) -> int:
    """The read end of a pipe that holds ``key`` and nothing more (its write end closed): the
    judge reads the key from it once, so it is never in an environment that /proc shows."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, key)  # far below a pipe's buffer: never blocks, never short
    finally:
        os.close(write_end)
    return read_end


def read_lines(fd: int, lines: list[bytes]) -> None:
    """Split the channel into lines, looking at each byte once: a flood without newlines costs
    linear time, and a line past MAX_RECORD_BYTES is dropped as one forged (empty) record.
    Past MAX_RECORDS lines the rest is read and dropped, as one more forged record: a
    reader that stopped would leave the judge blocked on its next record until the wall."""
    partial = bytearray()
    overlong = flooded = False
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        if flooded:
            continue
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            partial += chunk[start:end]
            lines.append(b"" if overlong else bytes(partial))
            partial.clear()
            overlong = False
            start = end + 1
            if len(lines) == MAX_RECORDS:
                lines.append(b"")
                flooded = True
                break
        if flooded:
            continue
        partial += chunk[start:]
        if len(partial) > MAX_RECORD_BYTES:
            partial.clear()
            overlong = True


def keep_tail(stream: Any, tail: bytearray) -> None:
    while chunk := stream.read1(1 << 16):
        tail += chunk
        del tail[: max(0, len(tail) - OUTPUT_TAIL_BYTES)]


def verify(line: bytes, key: bytes) -> dict[str, Any] | None:
    data, _, signature = line.rpartition(b"\t")
    expected = hmac.new(key, data, hashlib.sha256).hexdigest().encode()
    if not data or not hmac.compare_digest(signature, expected):
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
