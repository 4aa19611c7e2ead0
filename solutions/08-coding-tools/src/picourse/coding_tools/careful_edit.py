"""Lab 8.9 (reference): edit like a careful colleague.

- Read before edit: the read tool records a hash of each file it shows; write and edit
  refuse to change an existing file that was not read, or that changed since (the hash
  tells, not the mtime). The tools' own writes record the new content.
- ``replace_all`` replaces every occurrence; otherwise several matches are refused with
  their line numbers.
- A CRLF file is matched as if it had LF endings and written back with CRLF; a UTF-8 BOM
  is kept. Untouched lines keep their bytes. A file that mixes endings is matched as is.
- old_text that carries read's line-number prefix gets a hint; old_text equal to
  new_text is refused as a no-op.
- The result shows the edited region, numbered like read, around where each edit landed.
"""

from __future__ import annotations

import bisect
import hashlib
import re

from picourse.coding_tools.details import CarefulEdit, Edit
from picourse.coding_tools.errors import ChangeRefused
from picourse.coding_tools.files import open_regular_file

BOM = b"\xef\xbb\xbf"
CONTEXT_LINES = 3
MAX_SNIPPET_LINES = 40
# A refusal names at most this many lines: a model needs a few to pick one, not 100,000.
MAX_NAMED_LINES = 50
# read's prefix: right-aligned number, the box-drawing bar, one space.
_NUMBERED_LINE = re.compile(r"^\s*\d+│ ", re.MULTILINE)


class ReadLedger:
    """What this session has read: a content hash per canonical path."""

    def __init__(self) -> None:
        self._hashes: dict[str, str] = {}

    def record(self, key: str, data: bytes) -> None:
        self._hashes[key] = hashlib.sha256(data).hexdigest()

    def record_file(self, key: str) -> None:
        """Record the file as it is now (after the read tool showed it)."""
        digest = hashlib.sha256()
        try:
            with open_regular_file(key) as file:  # a FIFO would block open() for ever
                while chunk := file.read(1 << 20):
                    digest.update(chunk)
        except OSError:
            return  # nothing to remember: the read itself reported what went wrong
        self._hashes[key] = digest.hexdigest()

    def verify(self, key: str, path: str, current: bytes) -> str | None:
        """Why ``current`` (the file's content now) may not be changed, or None."""
        seen = self._hashes.get(key)
        if seen is None:
            return f"Read {path} before changing it: it exists and has not been read yet."
        if seen != hashlib.sha256(current).hexdigest():
            return (
                f"{path} changed on disk since it was last read. Read it again, then redo "
                "the change against what it holds now."
            )
        return None


def apply_careful_edits(original: bytes, edits: list[Edit], path: str) -> CarefulEdit:
    """Apply ``edits`` in order; raise ``ChangeRefused`` naming ``edits[i]`` on any problem."""
    bom = original.startswith(BOM)
    try:
        text = original[len(BOM) if bom else 0 :].decode("utf-8")
    except UnicodeDecodeError as error:
        raise ChangeRefused(
            f"Cannot edit {path}: it is not valid UTF-8 text ({error.reason}). Use write to "
            "replace it, or bash for binary files."
        ) from None
    crlf = "\r\n" in text and text.count("\n") == text.count("\r\n")
    if crlf:
        text = text.replace("\r\n", "\n")
    spans: list[tuple[int, int]] = []  # where each edit's new text now lies
    for index, edit in enumerate(edits):
        old, new = edit.old_text, edit.new_text
        if bom:  # read shows the BOM as U+FEFF at the start of line 1, and a model copies it
            old, new = old.removeprefix("\ufeff"), new.removeprefix("\ufeff")
        if crlf:
            old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
        text, spans = _apply_one(text, old, new, edit.replace_all, index, path, spans)
    snippet = _snippet(text, spans)
    if crlf:
        text = text.replace("\n", "\r\n")
    return CarefulEdit((BOM if bom else b"") + text.encode("utf-8"), snippet)


def _apply_one(
    text: str,
    old: str,
    new: str,
    replace_all: bool,
    index: int,
    path: str,
    spans: list[tuple[int, int]],
) -> tuple[str, list[tuple[int, int]]]:
    if not old:
        raise ChangeRefused(f"edits[{index}]: old_text must not be empty.")
    try:
        new.encode("utf-8")
    except UnicodeEncodeError:
        raise ChangeRefused(
            f"edits[{index}]: new_text holds a character that UTF-8 cannot encode (a lone "
            "surrogate); give the text without it. No edit was written."
        ) from None
    if old == new:
        raise ChangeRefused(
            f"edits[{index}]: old_text and new_text are identical, so this edit would change "
            "nothing. Leave it out, or give the text it should become."
        )
    starts = _occurrences(text, old)
    if not starts:
        hint = (
            " old_text carries read's line-number prefixes ('   4│ '): drop them and copy "
            "only the text after the bar."
            if _NUMBERED_LINE.search(old)
            else " Read the file again and copy the text exactly, including whitespace."
        )
        raise ChangeRefused(f"edits[{index}]: no match for old_text in {path}.{hint}")
    if len(starts) > 1 and not replace_all:
        numbers = list(dict.fromkeys(n + 1 for n in _line_indexes(text, starts)))
        lines = ", ".join(map(str, numbers[:MAX_NAMED_LINES]))
        if len(numbers) > MAX_NAMED_LINES:
            lines += f" and {len(numbers) - MAX_NAMED_LINES} more"
        raise ChangeRefused(
            f"edits[{index}]: old_text matches {len(starts)} times in {path} (lines {lines}). "
            "Include more surrounding text to pick one, or set replace_all: true to replace "
            "every occurrence. No edit was written."
        )
    if replace_all:  # non-overlapping, left to right, as str.replace does
        starts = _non_overlapping(starts, len(old))
    pieces, landed, cursor, shift = [], [], 0, 0
    for start in starts:
        pieces += [text[cursor:start], new]
        landed.append((start + shift, start + shift + len(new)))
        shift += len(new) - len(old)
        cursor = start + len(old)
    pieces.append(text[cursor:])
    ends = [start + len(old) for start in starts]  # ascending, as starts are
    moved = [_moved(span, ends, len(new) - len(old)) for span in spans]
    return "".join(pieces), moved + landed


def _occurrences(text: str, needle: str) -> list[int]:
    found, position = [], text.find(needle)
    while position >= 0:  # overlapping occurrences count: "aa" occurs twice in "aaa"
        found.append(position)
        position = text.find(needle, position + 1)
    return found


def _non_overlapping(starts: list[int], width: int) -> list[int]:
    kept: list[int] = []
    for start in starts:
        if not kept or start >= kept[-1] + width:
            kept.append(start)
    return kept


def _moved(span: tuple[int, int], ends: list[int], growth: int) -> tuple[int, int]:
    """Where an earlier edit's span lies after this edit's replacements (each ending at one
    of the ascending ``ends`` and growing the text by ``growth``)."""
    shift = growth * bisect.bisect_right(ends, span[0])
    return span[0] + shift, span[1] + shift


def _line_indexes(text: str, positions: list[int]) -> list[int]:
    """The 0-based line of each position (ascending), counting newlines in one pass: a
    count from the start per position is quadratic when old_text occurs on every line."""
    indexes, line, cursor = [], 0, 0
    for position in positions:
        line += text.count("\n", cursor, position)
        cursor = position
        indexes.append(line)
    return indexes


def _snippet(text: str, spans: list[tuple[int, int]]) -> str:
    lines = text.split("\n")
    wanted: set[int] = set()
    ends = [max(end - 1, start) for start, end in spans]
    positions = sorted({*(start for start, _ in spans), *ends})
    line_of = dict(zip(positions, _line_indexes(text, positions), strict=True))
    for (start, _), end in zip(spans, ends, strict=True):
        first, last = line_of[start], line_of[end]
        wanted.update(range(first - CONTEXT_LINES, last + CONTEXT_LINES + 1))
    numbers = sorted(n for n in wanted if 0 <= n < len(lines))
    if numbers and numbers[-1] == len(lines) - 1 and lines[-1] == "" and len(lines) > 1:
        numbers.pop()  # the empty string after a final newline is not a line
    shown, previous = [], None
    for number in numbers[:MAX_SNIPPET_LINES]:
        if previous is not None and number != previous + 1:
            shown.append("   …")
        shown.append(f"{number + 1:>4}│ {lines[number]}")
        previous = number
    if len(numbers) > MAX_SNIPPET_LINES:
        shown.append(f"[{len(numbers) - MAX_SNIPPET_LINES} more edited lines not shown]")
    return "\n".join(shown)
