"""Class insight for report.html: inline SVG charts computed from the results alone.

Score distribution, pass rate per stage, the tests the class passes least, the most
frequent diagnosed mistakes, and statuses with grading times. Plain SVG, no scripts and
no fonts to fetch, so the report stays one file that opens offline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from html import escape

from coursekit.lab import Lab
from grader.model import SubmissionResult

BAR = "#2da44e"
MUTED = "#8c959f"
WIDTH = 520
ROW = 22


def render(lab: Lab, results: list[SubmissionResult]) -> str:
    """The insight section: five charts, each with a heading and a one-line reading."""
    if not results:
        return "<h2>Class insight</h2><p>No results yet.</p>"
    parts = ["<h2>Class insight</h2><div class=charts>"]
    parts.append(_figure("Score distribution (core points)", score_histogram(results)))
    parts.append(_figure("Pass rate per stage", stage_pass_rates(lab, results)))
    parts.append(_figure("Tests the class passes least", weakest_tests(results)))
    parts.append(_figure("Most frequent diagnosed mistakes", frequent_mistakes(lab, results)))
    parts.append(_figure("Statuses and grading time", statuses_and_timing(results)))
    parts.append("</div>")
    return "".join(parts)


def score_histogram(results: list[SubmissionResult]) -> str:
    top = max((r.max_score for r in results), default=100) or 100
    bins = [0] * 10
    for result in results:
        bins[min(9, int(10 * result.score / top))] += 1
    labels = [f"{int(top * i / 10)}-{int(top * (i + 1) / 10)}" for i in range(10)]
    return _columns(labels, bins, "students")


def stage_pass_rates(lab: Lab, results: list[SubmissionResult]) -> str:
    rows = []
    for stage in lab.stages:
        scores = [s for r in results for s in r.stages if s.stage == stage.id]
        full = sum(1 for s in scores if s.max_score and s.score >= s.max_score)
        label = f"{stage.id}{' (optional)' if stage.optional else ''}"
        rows.append((label, full / len(results), f"{full}/{len(results)}"))
    return _bars(rows)


def weakest_tests(results: list[SubmissionResult], count: int = 10) -> str:
    totals: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for result in results:
        for test in result.tests:
            totals[test.nodeid] += 1
            passed[test.nodeid] += test.status == "passed"
    ranked = sorted(totals, key=lambda n: (passed[n] / totals[n], n))[:count]
    rows = [
        (
            nodeid.split("::", 1)[-1],
            passed[nodeid] / totals[nodeid],
            f"{passed[nodeid]}/{totals[nodeid]}",
        )
        for nodeid in ranked
    ]
    return _bars(rows) if rows else _empty("No test results.")


def frequent_mistakes(lab: Lab, results: list[SubmissionResult], count: int = 10) -> str:
    seen: Counter[tuple[str, str]] = Counter()
    for result in results:
        for diagnosis in result.diagnoses:
            seen[(diagnosis.stage, diagnosis.mistakes[0])] += 1
    if not seen:
        return _empty("No failure set matched a catalogued mistake.")
    most = seen.most_common(count)
    peak = most[0][1]
    rows = [(f"{stage} {name}", n / peak, f"{n} student(s)") for (stage, name), n in most]
    return _bars(rows)


def statuses_and_timing(results: list[SubmissionResult]) -> str:
    statuses = Counter(r.status for r in results)
    peak = max(statuses.values())
    rows = [(status, n / peak, str(n)) for status, n in sorted(statuses.items())]
    seconds = sorted(r.seconds for r in results)
    median = seconds[len(seconds) // 2]
    note = (
        f"<text x=0 y={ROW * len(rows) + 16} fill='{MUTED}'>grading time per submission: "
        f"median {median:.1f} s, longest {seconds[-1]:.1f} s</text>"
    )
    return _bars(rows, extra_height=24, extra=note)


def _figure(title: str, svg: str) -> str:
    return f"<figure><figcaption>{escape(title)}</figcaption>{svg}</figure>"


def _bars(rows: Sequence[tuple[str, float, str]], *, extra_height: int = 0, extra: str = "") -> str:
    """Horizontal bars: a label, a bar for a share in [0, 1], and the count beside it."""
    label_width, bar_width = 240, WIDTH - 240 - 90
    height = ROW * len(rows) + extra_height
    parts = [_svg_open(height, "bar chart")]
    for index, (label, share, text) in enumerate(rows):
        y = index * ROW
        width = max(0.0, min(1.0, share)) * bar_width
        parts.append(
            f"<text x=0 y={y + 15}>{escape(_short(label, 34))}<title>{escape(label)}</title></text>"
            f"<rect x={label_width} y={y + 4} width={width:.1f} height=14 fill='{BAR}'/>"
            f"<text x={label_width + width + 6:.1f} y={y + 15} fill='{MUTED}'>{escape(text)}</text>"
        )
    parts.append(extra)
    parts.append("</svg>")
    return "".join(parts)


def _columns(labels: list[str], counts: list[int], unit: str) -> str:
    height, base = 170, 140
    peak = max(counts) or 1
    step = WIDTH / len(counts)
    parts = [_svg_open(height, f"histogram of {unit}")]
    for index, (label, count) in enumerate(zip(labels, counts, strict=True)):
        bar = 110 * count / peak
        x = index * step
        parts.append(
            f"<rect x={x + 4:.1f} y={base - bar:.1f} width={step - 8:.1f} height={bar:.1f} "
            f"fill='{BAR}'><title>{count} {unit} scored {label}</title></rect>"
            f"<text x={x + step / 2:.1f} y={base - bar - 4:.1f} text-anchor=middle>"
            f"{count or ''}</text>"
            f"<text x={x + step / 2:.1f} y={base + 16} text-anchor=middle fill='{MUTED}' "
            f"font-size=11>{label}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _svg_open(height: int, label: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width={WIDTH} height={height} "
        f"viewBox='0 0 {WIDTH} {height}' role=img aria-label='{escape(label)}' "
        "font-family='system-ui,sans-serif' font-size=12>"
    )


def _empty(text: str) -> str:
    return f"<p class=muted>{escape(text)}</p>"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
