"""Lab 8.4 (reference): a batch of exact replacements, committed all or nothing.

Edits apply in order to an in-memory copy, so a later edit sees an earlier one's result.
Any failing edit leaves the file byte for byte as it was; otherwise the result is written
once, through the same atomic write as the write tool, inside the same queue lane.

- The file is opened without blocking and only a regular file is read (a FIFO or a
  device would never end), in chunks, checking the abort signal between them; UTF-8 is
  validated chunk by chunk, and the edits change that one buffer in place, so the peak
  memory stays within twice the file's size. A file over ``MAX_EDIT_BYTES`` is refused
  before any memory is taken for it.
- Read, check and rename happen under ``files.directory_lock``: an edit in another event
  loop or process cannot slip in between, so no applied edit is ever lost. A program that
  takes no such lock is watched for: the file's size, times and inode must be the same
  after the read as before it, and again just before the write, or nothing is written
  (what it writes after that last look, while the new content is written, is still lost).
- With the extensions on, the lane also holds the read-before-edit check and the careful
  matcher (8.9) and the confirmation (8.8). The lock is not held while a person decides;
  instead the commit re-reads the file and refuses if it changed meanwhile.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass

from picourse.abort import AbortSignal
from picourse.coding_tools.careful_edit import apply_careful_edits
from picourse.coding_tools.confirm import ask_before_change
from picourse.coding_tools.details import Edit, EditDetails
from picourse.coding_tools.errors import (
    ChangeRefused,
    PathError,
    describe_os_error,
    path_in_flux,
)
from picourse.coding_tools.files import FileStamp, directory_lock, file_stamp, open_existing
from picourse.coding_tools.mutation_queue import DEFAULT_MUTATION_QUEUE, canonical_key
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.threads import in_thread
from picourse.coding_tools.write import write_atomic
from picourse.tool import ToolOutput

CHUNK_BYTES = 1 << 20
MAX_EDIT_BYTES = 1 << 30  # an edit holds the file in memory; beyond this, sed does better


@dataclass
class _Change:
    old_bytes: int
    original: bytes | None  # kept only when a confirmation must show it
    updated: bytes | bytearray
    snippet: str
    stamp: FileStamp  # the file's as it was read


async def edit_file(
    options: CodingToolOptions,
    path: str,
    edits: list[Edit],
    *,
    signal: AbortSignal | None = None,
) -> ToolOutput:
    if not edits:
        return ToolOutput.error("edits must not be empty: give at least one {old_text, new_text}.")
    for index, edit in enumerate(edits):
        if not edit.old_text:
            return ToolOutput.error(
                f"edits[{index}]: old_text must not be empty. To add text, include a nearby "
                "line in old_text and repeat it in new_text."
            )
    try:
        encoded = [(edit.old_text.encode("utf-8"), edit.new_text.encode("utf-8")) for edit in edits]
    except UnicodeEncodeError as error:
        return ToolOutput.error(
            f"An edit text is not valid Unicode ({error.reason}); send UTF-8 text. {path} "
            "is unchanged."
        )
    try:
        absolute = resolve_path(options, path)
        key = canonical_key(absolute)
    except PathError as error:
        return ToolOutput.error(str(error))
    except OSError as error:  # canonical_key's realpath, as another program swaps a link
        return ToolOutput.error(path_in_flux(path, error))
    except (ValueError, RecursionError):
        return ToolOutput.error(f"Cannot edit {path!r}: the path cannot be used as a file name.")
    confirming = options.confirm is not None

    def apply_in_memory() -> _Change:
        data, stamp = _read(key, path, signal, validate=not options.careful_edits)
        _stop_if_aborted(signal, path)  # a batch that cannot apply must not hide an abort
        if options.ledger is not None:  # careful edits (8.9): read before edit
            refusal = options.ledger.verify(key, path, bytes(data))
            if refusal is not None:
                raise ChangeRefused(refusal)
        original = bytes(data) if confirming else None
        if options.careful_edits:  # Lab 8.9
            careful = apply_careful_edits(bytes(data), edits, path)
            return _Change(len(data), original, careful.updated, careful.snippet, stamp)
        old_bytes = len(data)
        for index, (old, new) in enumerate(encoded):
            _replace_once(data, old, new, index, path, signal)
        # The confirmation and the ledger take bytes: copied here, where running out of
        # memory is still refused with nothing written, not after the write.
        wanted = confirming or options.ledger is not None
        return _Change(old_bytes, original, bytes(data) if wanted else data, "", stamp)

    def read_and_apply() -> _Change:
        try:
            return apply_in_memory()
        except MemoryError:  # the file's copy, the edits' or the careful matcher's
            raise ChangeRefused(
                f"Not enough memory to edit {path}; nothing was written. Use bash (for "
                "example sed -i) for a file this big."
            ) from None

    def edit_now() -> _Change:
        with directory_lock(os.path.dirname(key)):
            change = read_and_apply()
            _stop_if_aborted(signal, path)
            if file_stamp(os.stat(key)) != change.stamp:  # another program wrote since the read
                raise ChangeRefused(
                    f"{path} changed on disk while the edit was being made; nothing was "
                    "written. Read it again, then redo the edit."
                )
            write_atomic(key, change.updated)
        return change

    def commit_if_unchanged(change: _Change) -> None:
        with directory_lock(os.path.dirname(key)):
            if bytes(_read(key, path, signal, validate=False)[0]) != change.original:
                raise ChangeRefused(
                    f"{path} changed on disk while the edit waited for confirmation; nothing "
                    "was written. Read it again, then redo the edit."
                )
            write_atomic(key, change.updated)

    async def apply() -> _Change:
        if not confirming:
            change = await in_thread(edit_now)
        else:  # the confirmation gate (8.8)
            change = await in_thread(read_and_apply)
            assert options.confirm is not None and change.original is not None
            decision = await ask_before_change(
                options.confirm, "edit", path, change.original, bytes(change.updated)
            )
            if decision == "declined":
                raise ChangeRefused(f"The user declined the edit; {path} is unchanged.")
            if decision == "approved":  # "unchanged": nothing to write
                await in_thread(commit_if_unchanged, change)
        if options.ledger is not None:
            options.ledger.record(key, bytes(change.updated))
        return change

    try:
        change = await DEFAULT_MUTATION_QUEUE.run(key, apply)
    except ChangeRefused as refusal:
        # write_atomic knows only the real path; the result names the file as given.
        return ToolOutput.error(str(refusal).replace(key, path))
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="edit"))
    count = len(edits)
    summary = f"Applied {count} edit{'s' if count != 1 else ''} to {path}."
    return ToolOutput.of_text(
        f"{summary}\n\n{change.snippet}" if change.snippet else summary,
        EditDetails(absolute, change.old_bytes, len(change.updated), count),
    )


def _read(
    key: str, display: str, signal: AbortSignal | None, *, validate: bool
) -> tuple[bytearray, FileStamp]:
    """The whole regular file, read in chunks, and its stamp; UTF-8 checked on the way when
    ``validate``."""
    fd = open_existing(key, display)
    with os.fdopen(fd, "rb", buffering=0) as file:
        status = os.fstat(fd)
        stamp, size = file_stamp(status), status.st_size
        if size > MAX_EDIT_BYTES:
            raise ChangeRefused(
                f"{display} is {size} bytes, too large to edit in memory (the limit is "
                f"{MAX_EDIT_BYTES} bytes); use bash (for example sed -i) for a file this big."
            )
        data = bytearray(size)
        decoder = codecs.getincrementaldecoder("utf-8")()
        filled = 0
        _stop_if_aborted(signal, display)  # also for an empty file, which the loop skips
        try:
            with memoryview(data) as view:
                while filled < size:
                    if filled:
                        _stop_if_aborted(signal, display)
                    count = file.readinto(view[filled : filled + CHUNK_BYTES])
                    if not count:
                        break
                    if validate:
                        decoder.decode(view[filled : filled + count])
                    filled += count
            if validate:
                decoder.decode(b"", final=True)
        except UnicodeDecodeError as error:
            raise ChangeRefused(
                f"Cannot edit {display}: it is not valid UTF-8 text ({error.reason}). Use "
                "write to replace it, or bash for binary files."
            ) from None
        # A rewrite of the same size between two chunks leaves the size alone, not the times.
        if filled != size or file.read(1) or file_stamp(os.fstat(fd)) != stamp:
            raise ChangeRefused(
                f"{display} changed while it was being read; nothing was written. "
                "Try again once nothing else writes to it."
            )
    return data, stamp


def _stop_if_aborted(signal: AbortSignal | None, display: str) -> None:
    if signal is not None and signal.aborted:
        raise ChangeRefused(f"The edit was aborted; {display} is unchanged.")


def _replace_once(
    data: bytearray, old: bytes, new: bytes, index: int, path: str, signal: AbortSignal | None
) -> None:
    """Replace the one occurrence of ``old`` in ``data``, in place."""
    # UTF-8 is self-synchronising: an encoded old_text matches the encoded file exactly
    # where the text matches the text, so no decode/encode round trip is needed.
    first = data.find(old)
    if first < 0:
        raise ChangeRefused(
            f"edits[{index}]: no match for old_text in {path}. Read the file again and copy "
            "the text exactly, including whitespace and line breaks. No edit was written."
        )
    # Overlapping occurrences count: "aa" occurs twice in "aaa".
    matches = 1 + _count_from(data, old, first + 1, signal, path)
    if matches > 1:
        raise ChangeRefused(
            f"edits[{index}]: old_text matches {matches} times in {path}; it must match exactly "
            "once. Include more surrounding lines to make it unique. No edit was written."
        )
    data[first : first + len(old)] = new


# Counting every overlapping match is a Python loop: "aa" in 200 MB of "a" takes minutes,
# so the abort is looked at as it goes.
_MATCHES_BETWEEN_ABORT_CHECKS = 1 << 16


def _count_from(
    data: bytearray, needle: bytes, start: int, signal: AbortSignal | None, display: str
) -> int:
    count = 0
    position = data.find(needle, start)
    while position >= 0:
        count += 1
        if count % _MATCHES_BETWEEN_ABORT_CHECKS == 0:
            _stop_if_aborted(signal, display)
        position = data.find(needle, position + 1)
    return count
