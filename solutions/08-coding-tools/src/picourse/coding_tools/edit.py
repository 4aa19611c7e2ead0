"""Lab 8.4 (reference): a batch of exact replacements, committed all or nothing.

Edits apply in order to an in-memory copy, so a later edit sees an earlier one's result.
Any failing edit leaves the file byte for byte as it was; otherwise the result is written
once, through the same atomic write as the write tool, inside the same queue lane.
With the extensions on, the lane also holds the read-before-edit check and the careful
matcher (8.9) and the confirmation (8.8), so nothing can change the file in between.
"""

from __future__ import annotations

import asyncio

from picourse.coding_tools.careful_edit import apply_careful_edits
from picourse.coding_tools.confirm import ask_before_change
from picourse.coding_tools.details import Edit, EditDetails
from picourse.coding_tools.errors import ChangeRefused, PathError, describe_os_error
from picourse.coding_tools.files import open_regular_file
from picourse.coding_tools.mutation_queue import DEFAULT_MUTATION_QUEUE, canonical_key
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.write import write_atomic
from picourse.tool import ToolOutput


async def edit_file(options: CodingToolOptions, path: str, edits: list[Edit]) -> ToolOutput:
    if not edits:
        return ToolOutput.error("edits must not be empty: give at least one {old_text, new_text}.")
    for index, edit in enumerate(edits):
        if not edit.old_text:
            return ToolOutput.error(
                f"edits[{index}]: old_text must not be empty. To add text, include a nearby "
                "line in old_text and repeat it in new_text."
            )
    try:
        absolute = resolve_path(options, path)
    except PathError as error:
        return ToolOutput.error(str(error))
    key = canonical_key(absolute)

    def compute(original: bytes) -> tuple[bytes, str]:
        """The new content and, for careful edits, the edited region to show."""
        if options.careful_edits:  # Lab 8.9
            careful = apply_careful_edits(original, edits, path)
            return careful.updated, careful.snippet
        try:
            original.decode("utf-8")  # validate only: matching works on the bytes
        except UnicodeDecodeError as error:
            raise ChangeRefused(
                f"Cannot edit {path}: it is not valid UTF-8 text ({error.reason}). Use write "
                "to replace it, or bash for binary files."
            ) from None
        # UTF-8 is self-synchronising: an encoded old_text matches the encoded file exactly
        # where the text matches the text, so no decode/encode round trip is needed.
        updated = original
        for index, edit in enumerate(edits):
            updated = _replace_once(updated, edit, index, path)
        return updated, ""

    def prepare() -> tuple[bytes, bytes, str]:
        """The file's content now, its content after the batch, and the snippet."""
        with open_regular_file(key) as file:
            original = file.read()
        if options.ledger is not None:  # careful edits (8.9): read before edit
            refusal = options.ledger.verify(key, path, original)
            if refusal is not None:
                raise ChangeRefused(refusal)
        return original, *compute(original)

    async def apply() -> tuple[int, int, str]:
        original, updated, snippet = await asyncio.to_thread(prepare)
        if options.confirm is not None:  # the confirmation gate (8.8)
            decision = await ask_before_change(options.confirm, "edit", path, original, updated)
            if decision == "declined":
                raise ChangeRefused(f"The user declined the edit; {path} is unchanged.")
        await asyncio.to_thread(write_atomic, key, updated)
        if options.ledger is not None:
            options.ledger.record(key, updated)
        return len(original), len(updated), snippet

    try:
        old_bytes, new_bytes, snippet = await DEFAULT_MUTATION_QUEUE.run(key, apply)
    except ChangeRefused as refusal:
        return ToolOutput.error(str(refusal))
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="edit"))
    count = len(edits)
    summary = f"Applied {count} edit{'s' if count != 1 else ''} to {path}."
    return ToolOutput.of_text(
        f"{summary}\n\n{snippet}" if snippet else summary,
        EditDetails(absolute, old_bytes, new_bytes, count),
    )


def _replace_once(text: bytes, edit: Edit, index: int, path: str) -> bytes:
    old, new = edit.old_text.encode("utf-8"), edit.new_text.encode("utf-8")
    first = text.find(old)
    if first < 0:
        raise ChangeRefused(
            f"edits[{index}]: no match for old_text in {path}. Read the file again and copy "
            "the text exactly, including whitespace and line breaks. No edit was written."
        )
    # Overlapping occurrences count: "aa" occurs twice in "aaa".
    matches = 1 + _count_from(text, old, first + 1)
    if matches > 1:
        raise ChangeRefused(
            f"edits[{index}]: old_text matches {matches} times in {path}; it must match exactly "
            "once. Include more surrounding lines to make it unique. No edit was written."
        )
    return b"".join((text[:first], new, text[first + len(old) :]))


def _count_from(text: bytes, needle: bytes, start: int) -> int:
    count = 0
    position = text.find(needle, start)
    while position >= 0:
        count += 1
        position = text.find(needle, position + 1)
    return count
