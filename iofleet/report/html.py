"""One self-contained HTML file: inline CSS and SVG, no scripts, opens offline."""

from __future__ import annotations

import math
from html import escape

from iofleet.report.model import (
    EXPECTED_HEADER,
    EXPECTED_NOTE,
    FLEET_COLUMNS,
    NOISE_HEADER,
    NOISE_NOTE,
    PCT_COLUMNS,
    SKEW_HEADER,
    SKEW_NOTE,
    Group,
    ReportData,
    expected_table,
    group_fleet,
    group_percentiles,
    noise_table,
    skew_table,
    storage_text,
)
from iofleet.report.text import run_header
from iofleet.report.units import fmt_ns, fmt_value

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
BAR_METRICS = ("iops", "bw_bytes", "wall_seconds")

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin: 1.5em 0 .4em; }
.meta { color: #555; white-space: pre-line; }
table { border-collapse: collapse; margin: .3em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: .25em .7em; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f6f6f6; } td.l, th.l { text-align: left; }
svg { display: block; margin: .5em 0 1em; } svg text { font: 11px system-ui, sans-serif; fill: #333; }
.errors li { font-family: ui-monospace, monospace; font-size: 12px; }
.note { color: #666; font-size: 12px; }
"""


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _nines(p: float) -> float:
    """x position of percentile p: -log10(1 - p/100); P100 sits half a step after P99.99."""
    return 4.6 if p >= 100 else -math.log10(1 - p / 100)


def _decade(power: int) -> str:
    """Axis label for 10**power ns: 1 us, 10 us, 100 us, 1 ms, ..."""
    units = ("ns", "us", "ms", "s")
    index = min(max(power, 0) // 3, len(units) - 1)
    return f"{10 ** (power - 3 * index):g} {units[index]}"


def svg_latency_curves(group: Group) -> str:
    """Latency (log scale) against percentile (nines scale), one line per cell."""
    width, height, left, right, top, bottom = 760, 300, 70, 220, 15, 40
    pw, ph = width - left - right, height - top - bottom
    series = []
    for row in group.rows:
        points = [(p, float(row[c])) for c, p in FLEET_COLUMNS if row.get(c) not in (None, 0)]
        if points:
            series.append((row, points))
    if not series:
        return ""
    values = [v for _, pts in series for _, v in pts]
    lo = math.floor(math.log10(min(values)))
    hi = math.ceil(math.log10(max(values)))
    hi = hi if hi > lo else lo + 1

    def x(p: float) -> float:
        return left + pw * _nines(p) / _nines(100)

    def y(v: float) -> float:
        return top + ph * (1 - (math.log10(v) - lo) / (hi - lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(group.title)}">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fcfcfc" stroke="#ccc"/>',
    ]
    for decade in range(lo, hi + 1):
        yy = y(10**decade)
        parts.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e5e5e5"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{_decade(decade)}</text>'
        )
    for _, p in FLEET_COLUMNS:
        xx = x(p)
        label = f"P{p:g}"
        parts.append(
            f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>'
        )
        parts.append(f'<text x="{xx:.1f}" y="{top + ph + 15}" text-anchor="middle">{label}</text>')
    parts.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 5}" text-anchor="middle">'
        "percentile (merged histogram, nines scale)</text>"
    )
    for i, (row, points) in enumerate(series):
        color = _color(i)
        path = " ".join(f"{x(p):.1f},{y(v):.1f}" for p, v in points)
        name = escape(f"{row.get('cell_id')} {storage_text(row)}")
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}">'
            f"<title>{name}</title></polyline>"
        )
        for p, v in points:
            parts.append(
                f'<circle cx="{x(p):.1f}" cy="{y(v):.1f}" r="3" fill="{color}">'
                f"<title>{name}: P{p:g} = {fmt_ns(v)}</title></circle>"
            )
        ly = top + 12 + 16 * i
        parts.append(
            f'<rect x="{left + pw + 12}" y="{ly - 9}" width="10" height="10" fill="{color}"/>'
            f'<text x="{left + pw + 27}" y="{ly}">{escape(str(row.get("cell_id")))}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def svg_bars(group: Group) -> str:
    """Per cell: a bar to P50, a whisker P0..P100 and a tick at P90 (across slots)."""
    rows = [r for r in group.rows if r.get("p100") is not None]
    if not rows:
        return ""
    bar_h, gap, left, right, top = 18, 10, 260, 110, 10
    width = 760
    pw = width - left - right
    height = top + len(rows) * (bar_h + gap) + 30
    top_value = max(float(r["p100"]) for r in rows) or 1.0

    def x(v: float) -> float:
        return left + pw * max(float(v), 0.0) / top_value

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(group.title)}">',
        f'<line x1="{left}" x2="{left}" y1="{top - 4}" y2="{height - 26}" stroke="#999"/>',
    ]
    for i, row in enumerate(rows):
        y0 = top + i * (bar_h + gap)
        mid = y0 + bar_h / 2
        color = _color(i)
        label = escape(f"{row.get('cell_id')}")
        tip = escape(
            f"{row.get('cell_id')} {storage_text(row)}: "
            + ", ".join(f"{c.upper()} {fmt_value(row.get(c), group.unit)}" for c in PCT_COLUMNS)
            + f" over {row.get('slots')} slots"
        )
        p50 = row.get("p50") or 0.0
        parts.append(f'<text x="{left - 8}" y="{mid + 4:.1f}" text-anchor="end">{label}</text>')
        parts.append(
            f'<rect x="{left}" y="{y0}" width="{x(p50) - left:.1f}" height="{bar_h}" '
            f'fill="{color}" fill-opacity="0.75"><title>{tip}</title></rect>'
        )
        if row.get("p0") is not None:
            parts.append(
                f'<line x1="{x(row["p0"]):.1f}" x2="{x(row["p100"]):.1f}" y1="{mid:.1f}" '
                f'y2="{mid:.1f}" stroke="#222"/>'
            )
            for c in ("p0", "p100"):
                parts.append(
                    f'<line x1="{x(row[c]):.1f}" x2="{x(row[c]):.1f}" y1="{y0 + 4}" '
                    f'y2="{y0 + bar_h - 4}" stroke="#222"/>'
                )
        if row.get("p90") is not None:
            parts.append(
                f'<line x1="{x(row["p90"]):.1f}" x2="{x(row["p90"]):.1f}" y1="{y0}" '
                f'y2="{y0 + bar_h}" stroke="#222" stroke-width="2"/>'
            )
        parts.append(
            f'<text x="{x(row["p100"]) + 6:.1f}" y="{mid + 4:.1f}">'
            f"{escape(fmt_value(p50, group.unit))}</text>"
        )
    parts.append(
        f'<text x="{left}" y="{height - 8}">0</text>'
        f'<text x="{left + pw}" y="{height - 8}" text-anchor="end">'
        f"{escape(fmt_value(top_value, group.unit))}</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)


def _html_table(header: list[str], rows: list[list[str]], left_cols: int = 2) -> str:
    def cell(tag: str, i: int, text: str) -> str:
        cls = ' class="l"' if i < left_cols else ""
        return f"<{tag}{cls}>{escape(text)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _percentile_table(group: Group) -> str:
    header = ["cell", "storage", "fleet", "slots", *[c.upper() for c in PCT_COLUMNS]]
    rows = [
        [
            str(r.get("cell_id")),
            storage_text(r),
            str(r.get("fleet_size") if r.get("fleet_size") is not None else "-"),
            str(r.get("slots")),
            *[fmt_value(r.get(c), group.unit) for c in PCT_COLUMNS],
        ]
        for r in group.rows
    ]
    return _html_table(header, rows)


def _fleet_table(group: Group) -> str:
    cols = [c for c, _ in FLEET_COLUMNS]
    header = ["cell", "storage", "slots", "I/Os", *[f"P{p:g}" for _, p in FLEET_COLUMNS]]
    rows = [
        [
            str(r.get("cell_id")),
            storage_text(r),
            str(r.get("slots")),
            f"{r.get('total_count') or 0:,}",
            *[fmt_ns(r[c]) if r.get(c) is not None else "-" for c in cols],
        ]
        for r in group.rows
    ]
    return _html_table(header, rows)


def _decision_html(data: ReportData) -> list[str]:
    """Decision table, pivot, scaling curve, fleet totals, failures, environment."""
    from iofleet.report import decision as d

    body: list[str] = []
    sections = data.decision or {}
    groups = d.decision_groups(sections.get("decision", []))
    if groups:
        target = f" - target: {' and '.join(data.target)}" if data.target else ""
        body.append(f"<h2>Decision{escape(target)}</h2>")
        body.append(f'<p class="note">{escape(d.DECISION_NOTE)}.</p>')
    for title, rows in groups:
        body.append(f"<h3>{escape(title)}</h3>")
        body.append(_html_table(list(d.DECISION_HEADER), rows, left_cols=3))
    pivots = d.pivot_groups(sections.get("pivot", []))
    if pivots:
        body.append("<h2>Storage x fleet size</h2>")
    for title, header, rows in pivots:
        body.append(f"<h3>{escape(title)}</h3>")
        body.append(_html_table(header, rows, left_cols=2))
    scaling = d.scaling_rows(sections.get("scaling", []))
    if scaling:
        body.append("<h2>Fleet-size scaling</h2>")
        body.append(f'<p class="note">{escape(d.SCALING_NOTE)}.</p>')
    for title, rows in scaling:
        body.append(f"<h3>{escape(title)}</h3>")
        body.append(_html_table(list(d.SCALING_HEADER), rows, left_cols=2))
    totals = d.fleet_totals_rows(data.fleet_totals)
    if totals:
        body.append("<h2>Fleet totals and the binding limit</h2>")
        body.append(f'<p class="note">{escape(d.FLEET_TOTALS_NOTE)}.</p>')
        body.append(_html_table(list(d.FLEET_TOTALS_HEADER), totals, left_cols=3))
    if data.failures:
        body.append(f"<h2>Failures ({len(data.failures)})</h2>")
        body.append(_html_table(list(d.FAILURE_HEADER), d.failure_rows(data.failures), 7))
    env = d.environment_rows(data.environment)
    if env:
        body.append("<h2>Environment</h2>")
        body.append(_html_table(list(d.ENVIRONMENT_HEADER), env, left_cols=len(env[0])))
    return body


def render_html(data: ReportData) -> str:
    title = f"iofleet report: {data.run_id}"
    body: list[str] = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">{escape(run_header(data))}</p>',
    ]
    body += _decision_html(data)  # the decision sections first
    pct_groups = group_percentiles(data.percentiles)
    fleet_groups = group_fleet(data.fleet)
    if not pct_groups and not fleet_groups:
        body.append("<p>No measurements in this run.</p>")
    expected = expected_table(data.expected)
    if expected:
        body.append("<h2>Expected vs measured</h2>")
        body.append(f'<p class="note">{escape(EXPECTED_NOTE)}.</p>')
        body.append(_html_table(list(EXPECTED_HEADER), expected, left_cols=4))
    if fleet_groups:
        body.append("<h2>Latency percentile curves</h2>")
        body.append(
            '<p class="note">fio completion latency from the json+ histograms of every slot '
            "merged per cell; the p-th percentile is the smallest bin reaching "
            "ceil(p/100 &times; total).</p>"
        )
        for group in fleet_groups:
            body.append(f"<h3>{escape(group.title)}</h3>")
            body.append(svg_latency_curves(group))
            body.append(_fleet_table(group))
    bar_groups = [g for g in pct_groups if g.metric in BAR_METRICS]
    if bar_groups:
        body.append("<h2>IOPS, throughput and wall time per cell</h2>")
        body.append(
            '<p class="note">Across slots: bar = P50, whisker = P0 to P100, thick tick = P90 '
            "(exact percentiles, linear interpolation).</p>"
        )
        for group in bar_groups:
            body.append(f"<h3>{escape(group.title)}</h3>")
            body.append(svg_bars(group))
    if pct_groups:
        body.append("<h2>Percentiles across slots</h2>")
        for group in pct_groups:
            body.append(f"<h3>{escape(group.title)}</h3>")
            body.append(_percentile_table(group))
    skew = skew_table(data.skew)
    if skew:
        body.append("<h2>Start skew</h2>")
        body.append(f'<p class="note">{escape(SKEW_NOTE)}.</p>')
        body.append(_html_table(list(SKEW_HEADER), skew))
    noise = noise_table(data.noise or [])
    if noise:
        flagged = sum(1 for r in data.noise or [] if r.get("repeats_disagree"))
        body.append(f"<h2>Repeat noise ({flagged} flagged)</h2>")
        body.append(f'<p class="note">{escape(NOISE_NOTE)}.</p>')
        body.append(_html_table(list(NOISE_HEADER), noise, left_cols=4))
    if data.ingest_errors:
        body.append(f'<h2>Ingest errors ({len(data.ingest_errors)})</h2><ul class="errors">')
        body += [
            f"<li>{escape(str(e['object_key']))}: {escape(str(e['reason']))}</li>"
            for e in data.ingest_errors
        ]
        body.append("</ul>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )
