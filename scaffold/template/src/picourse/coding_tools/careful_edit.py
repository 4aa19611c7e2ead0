"""Lab 8.9 — edit like a careful colleague (optional stage).

``ReadLedger`` remembers a content hash per canonical path: the read tool records each
file it shows (``record_file``; open it with the given ``files.open_regular_file``);
write and edit record what they wrote (``record``) and call ``verify`` before changing
an existing file: it says why the change is refused, or returns None. A file never read:
the message names the path and tells the model to ``Read`` it first (``Read app.py
before changing it``). A file whose content changed since: the message says it
``changed`` and to read it ``again``.

``apply_careful_edits`` applies a batch like Lab 8.4 (content that is not valid UTF-8 after
a BOM is refused here: ``ChangeRefused`` that says ``UTF-8`` and names ``path``), plus:
``replace_all`` replaces every occurrence as ``str.replace`` does (left to right, never
overlapping: ``aa`` in ``aaa`` is replaced once); without it, several matches are refused
with their count and line numbers as read counts them
(``matches 3 times ... (lines 2, 4, 5) ... replace_all``). A CRLF file (it holds a
``\\r\\n`` and every ``\\n`` is part of one; a file without any line ending is not one) is
matched as if it had LF endings and written back with CRLF; a UTF-8 BOM is kept; untouched
lines keep their bytes. old_text whose lines start with read's ``   4│ `` prefixes gets, after
``no match``, a hint that says to drop the line-number ``prefix``; old_text equal to
new_text is refused: say they are ``identical``. Refusals raise ``ChangeRefused`` naming
``edits[i]``. The ``snippet`` shows the edited region numbered like read, around where each
edit is in the final text (later edits may move it).

Then wire it in: with ``options.careful_edits``, edit uses ``apply_careful_edits``
and shows the snippet; with ``options.ledger``, write and edit call ``verify`` and
``record`` inside their queue lane. ``EditDetails.edits`` counts the edits of the batch
(a ``replace_all`` edit counts once).
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
