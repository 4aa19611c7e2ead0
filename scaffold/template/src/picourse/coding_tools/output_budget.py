"""Lab 8.5 — collect a process's output within a byte budget.

stdout and stderr feed one budget through ``add``. Keep at most ``limit`` bytes, as bytes:
a pipe read may end inside a UTF-8 character and the next one bring the rest, so decode
once, in ``render``. The caller keeps reading both pipes past that (a child blocked on a
full pipe never exits).
``render`` returns the text and whether it was truncated; truncated text ends with
``[output truncated]`` on a line of its own and, notice included, stays within
``limit - reserve`` UTF-8 bytes (a budget smaller than the notice gets the notice cut).
"""

from __future__ import annotations

TRUNCATION_NOTICE = "[output truncated]"


class OutputBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit

    def add(self, data: bytes) -> None:
        # Lab 8.5: keep what fits, remember that something did not.
        raise NotImplementedError("Lab 8.5 OutputBudget.add is not implemented yet")

    def render(self, reserve: int = 0) -> tuple[str, bool]:
        raise NotImplementedError("Lab 8.5 OutputBudget.render is not implemented yet")
