"""Lab 8.4 (reference): a batch of exact replacements, committed all or nothing.

Edits apply in order to an in-memory copy, so a later edit sees an earlier one's result.
Any failing edit leaves the file byte for byte as it was; otherwise the result is written
once, through the same atomic write as the write tool, inside the same queue lane.
"""

from __future__ import annotations

import asyncio

from picourse.coding_tools.details import Edit, EditDetails
from picourse.coding_tools.errors import PathError, describe_os_error
from picourse.coding_tools.mutation_queue import DEFAULT_MUTATION_QUEUE, canonical_key
from picourse.coding_tools.options import CodingToolOptions
from picourse.coding_tools.paths import resolve_path
from picourse.coding_tools.write import write_atomic
from picourse.tool import ToolOutput


class _EditRefused(Exception):
    pass


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

    def apply() -> tuple[int, int]:
        with open(key, "rb") as file:
            original = file.read()
        try:
            original.decode("utf-8")  # validate only: matching works on the bytes
        except UnicodeDecodeError as error:
            raise _EditRefused(
                f"Cannot edit {path}: it is not valid UTF-8 text ({error.reason}). Use write "
                "to replace it, or bash for binary files."
            ) from None
        # UTF-8 is self-synchronising: an encoded old_text matches the encoded file exactly
        # where the text matches the text, so no decode/encode round trip is needed.
        updated = original
        for index, edit in enumerate(edits):
            updated = _replace_once(updated, edit, index, path)
        write_atomic(key, updated)
        return len(original), len(updated)

    try:
        old_bytes, new_bytes = await DEFAULT_MUTATION_QUEUE.run(
            key, lambda: asyncio.to_thread(apply)
        )
    except _EditRefused as refusal:
        return ToolOutput.error(str(refusal))
    except OSError as error:
        return ToolOutput.error(describe_os_error(path, error, action="edit"))
    count = len(edits)
    return ToolOutput.of_text(
        f"Applied {count} edit{'s' if count != 1 else ''} to {path}.",
        EditDetails(absolute, old_bytes, new_bytes, count),
    )


def _replace_once(text: bytes, edit: Edit, index: int, path: str) -> bytes:
    old, new = edit.old_text.encode("utf-8"), edit.new_text.encode("utf-8")
    first = text.find(old)
    if first < 0:
        raise _EditRefused(
            f"edits[{index}]: no match for old_text in {path}. Read the file again and copy "
            "the text exactly, including whitespace and line breaks. No edit was written."
        )
    # Overlapping occurrences count: "aa" occurs twice in "aaa".
    matches = 1 + _count_from(text, old, first + 1)
    if matches > 1:
        raise _EditRefused(
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
