"""report.html: a class overview (scores, statuses, per-test pass rates), the entries of the
submissions folder that were not graded, and a section per student with each failing test's
message. One static file, no scripts."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from coursekit.lab import Lab
from grader.model import Skipped, SubmissionResult, truncate
from grader.report import insight

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#1b1f24;max-width:1100px}
table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #d0d7de;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}.graded{color:#1a7f37}
.timeout,.crashed{color:#9a6700}.invalid,.flagged,.error{color:#cf222e}pre{white-space:pre-wrap;
background:#f6f8fa;padding:6px;margin:2px 0}.bar{background:#2da44e;height:10px}
section{border-top:2px solid #d0d7de;margin-top:2rem}
.charts{display:flex;flex-wrap:wrap;gap:1rem 2rem}figure{margin:0}
figcaption{font-weight:600;margin:.5rem 0}.muted{color:#57606a}
"""


def render(lab: Lab, results: list[SubmissionResult], skipped: Sequence[Skipped] = ()) -> str:
    results = sorted(results, key=lambda r: r.student)
    parts = [
        f"<!doctype html><html lang=en><meta charset=utf-8><title>Chapter {lab.chapter} "
        f"grades</title><style>{STYLE}</style><h1>Chapter {lab.chapter}: "
        f"{escape(lab.title)}</h1><p>{len(results)} submission(s).</p>",
        insight.render(lab, results),
    ]
    parts.append(
        "<h2>Class overview</h2><table><tr><th>student</th>"
        + "".join(f"<th>{s.id}{' (bonus)' if s.optional else ''}</th>" for s in lab.stages)
        + "<th>bonus</th><th>total</th><th>status</th><th>isolation</th></tr>"
    )
    for result in results:
        by_stage = {s.stage: s.score for s in result.stages}
        parts.append(
            f"<tr><td><a href='#{escape(result.student)}'>{escape(result.student)}</a></td>"
            + "".join(f"<td>{by_stage.get(s.id, 0):g}</td>" for s in lab.stages)
            + f"<td>{result.bonus:g}</td><td>{result.score:g} / {result.max_score:g}</td>"
            f"<td class={result.status}>{result.status}</td><td>{escape(result.isolation)}</td>"
            "</tr>"
        )
    parts.append(
        "</table><h2>Pass rate per test</h2><table><tr><th>test</th><th>stage</th>"
        "<th>passed</th><th></th></tr>"
    )
    for nodeid, stage, passed, total in _pass_rates(results):
        width = int(100 * passed / total) if total else 0
        parts.append(
            f"<tr><td>{escape(nodeid)}</td><td>{stage}</td><td>{passed}/{total}</td>"
            f"<td><div class=bar style='width:{width}px'></div></td></tr>"
        )
    parts.append("</table>")
    if skipped:
        parts.append(
            "<h2>Not graded</h2><p>Entries of the submissions folder that are no submission."
            "</p><table><tr><th>entry</th><th>why</th></tr>"
        )
        parts += [
            f"<tr><td>{escape(s.entry)}</td><td>{escape(s.reason)}</td></tr>" for s in skipped
        ]
        parts.append("</table>")
    for result in results:
        parts.append(
            f"<section id='{escape(result.student)}'><h2>{escape(result.student)}</h2>"
            f"<p>Status: <b class={result.status}>{result.status}</b>"
            + (f" — {escape(result.reason)}" if result.reason else "")
            + f"</p><p>Score {result.score:g} / {result.max_score:g}, bonus "
            f"{result.bonus:g} / {result.max_bonus:g}.</p>"
        )
        for diagnosis in result.diagnoses:
            parts.append(f"<p><b>Stage {diagnosis.stage}:</b> {escape(diagnosis.text)}</p>")
        failing = [t for t in result.tests if t.status != "passed"]
        if failing:
            parts.append("<table><tr><th>test</th><th>why</th></tr>")
            for test in failing:
                parts.append(
                    f"<tr><td>{escape(test.name)}</td><td><pre>"
                    f"{escape(truncate(test.message, 1500))}</pre></td></tr>"
                )
            parts.append("</table>")
        else:
            parts.append("<p>Every test passed.</p>")
        parts.append("</section>")
    parts.append("</html>")
    return "\n".join(parts)


def _pass_rates(results: list[SubmissionResult]) -> list[tuple[str, str, int, int]]:
    rates: dict[str, list[int]] = {}
    stages: dict[str, str] = {}
    for result in results:
        for test in result.tests:
            counts = rates.setdefault(test.nodeid, [0, 0])
            counts[0] += test.status == "passed"
            counts[1] += 1
            stages[test.nodeid] = test.stage
    return [(nodeid, stages[nodeid], passed, total) for nodeid, (passed, total) in rates.items()]
