"""Lab 8.5 (reference): collect a process's output within a byte budget.

Both pipes feed one budget. Bytes past it are still accepted (the caller keeps reading,
or a child blocked on a full pipe would never exit) but not kept, so memory stays
bounded by the budget. The rendered text, truncation notice included, never exceeds the
budget in UTF-8 bytes.
"""

from __future__ import annotations

TRUNCATION_NOTICE = "[output truncated]"


class OutputBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept = bytearray()
        self.overflowed = False

    def add(self, data: bytes) -> None:
        """Keep what fits; note that something did not."""
        room = self.limit - len(self._kept)
        if len(data) > room:
            self.overflowed = True
        if room > 0:
            self._kept += data[:room]

    def render(self, reserve: int = 0) -> tuple[str, bool]:
        """The output as text in at most ``limit - reserve`` UTF-8 bytes, and whether it
        was truncated. Invalid UTF-8 becomes U+FFFD, which may take more bytes than it
        replaces, so the limit is checked on the encoded text, not on the raw bytes."""
        budget = max(self.limit - reserve, 0)
        text = self._kept.decode("utf-8", errors="replace")
        encoded = text.encode("utf-8")
        if not self.overflowed and len(encoded) <= budget:
            return text, False
        notice = TRUNCATION_NOTICE.encode("utf-8")
        room = max(budget - len(notice) - 1, 0)
        head = encoded[:room].decode("utf-8", errors="ignore")
        separator = "\n" if head and not head.endswith("\n") else ""
        rendered = f"{head}{separator}{TRUNCATION_NOTICE}"
        if len(rendered.encode("utf-8")) > budget:  # a budget smaller than the notice
            rendered = TRUNCATION_NOTICE.encode()[:budget].decode("utf-8", errors="ignore")
        return rendered, True
