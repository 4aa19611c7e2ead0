"""gradebook.csv: one row per student, a column per stage, bonus, total and status.

Every text cell is neutralised against spreadsheet formula injection (OWASP's advice): a cell
that a spreadsheet would read as a formula gets a leading apostrophe. Control characters
other than line ends and tabs (an escape sequence in a test's message) are written as
visible escapes, so that printing the file on a terminal shows them instead of running them."""

from __future__ import annotations

import csv
import io

from coursekit.lab import Lab
from grader.model import SubmissionResult, printable

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def render(lab: Lab, results: list[SubmissionResult]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "student",
            *[f"stage {s.id}" + (" (bonus)" if s.optional else "") for s in lab.stages],
            "bonus",
            "total",
            "max",
            "status",
            "reason",
        ]
    )
    for result in sorted(results, key=lambda r: r.student):
        by_stage = {s.stage: s.score for s in result.stages}
        writer.writerow(
            [
                _cell(result.student),
                *[f"{by_stage.get(s.id, 0):g}" for s in lab.stages],
                f"{result.bonus:g}",
                f"{result.score:g}",
                f"{result.max_score:g}",
                result.status,
                _cell(result.reason),
            ]
        )
    return buffer.getvalue()


def _cell(text: str) -> str:
    # A bare CR is not quoted by the csv module under a "\n" line end: make it a newline.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(
        "\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n")
    )
    return "'" + text if text.startswith(FORMULA_STARTS) else text
