"""Lab 8.9 — edit like a careful colleague (optional stage).

``ReadLedger`` remembers a content hash per canonical path: the read tool records each
file it shows (``record_file``); write and edit record what they wrote (``record``) and
call ``verify`` before changing an existing file: it says why the change is refused (the
file was never read, or its content changed since) or returns None.

``apply_careful_edits`` applies a batch like Lab 8.4, plus: ``replace_all`` replaces
every occurrence, and without it several matches are refused with their line numbers;
a CRLF file is matched as if it had LF endings and written back with CRLF, a UTF-8 BOM
is kept, and untouched lines keep their bytes; old_text carrying read's ``   4│ ``
prefixes gets a hint to drop them; old_text equal to new_text is refused as a no-op.
Refusals raise ``ChangeRefused`` naming ``edits[i]``. The ``snippet`` shows the edited
region numbered like read, around where each edit landed.

Then wire it in: with ``options.careful_edits``, edit uses ``apply_careful_edits``
and shows the snippet; with ``options.ledger``, write and edit call ``verify`` and
``record`` inside their queue lane.
"""

from __future__ import annotations

from picourse.coding_tools.details import CarefulEdit, Edit


class ReadLedger:
    """What this session has read: a content hash per canonical path."""

    def __init__(self) -> None:
        # Lab 8.9: a dict from canonical path to content hash.
        raise NotImplementedError("Lab 8.9 ReadLedger is not implemented yet")

    def record(self, key: str, data: bytes) -> None:
        raise NotImplementedError("Lab 8.9 ReadLedger.record is not implemented yet")

    def record_file(self, key: str) -> None:
        raise NotImplementedError("Lab 8.9 ReadLedger.record_file is not implemented yet")

    def verify(self, key: str, path: str, current: bytes) -> str | None:
        raise NotImplementedError("Lab 8.9 ReadLedger.verify is not implemented yet")


def apply_careful_edits(original: bytes, edits: list[Edit], path: str) -> CarefulEdit:
    # Lab 8.9: BOM and line endings, replace_all, hints, no-op refusal, the snippet.
    raise NotImplementedError("Lab 8.9 apply_careful_edits is not implemented yet")
