"""One self-contained HTML file: inline CSS, data and uPlot charts; opens offline."""

from __future__ import annotations

from html import escape

from iofleet.report.charts import (
    Spec,
    chart_div,
    chart_scripts,
    chart_style,
    expected_specs,
    fio_latency_specs,
    ioping_specs,
    slot_ladder_specs,
)
from iofleet.report.model import (
    EXPECTED_HEADER,
    EXPECTED_NOTE,
    FLEET_COLUMNS,
    NOISE_HEADER,
    NOISE_MISSING,
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
    workload_title,
)
from iofleet.report.text import run_header
from iofleet.report.units import fmt_ns, fmt_value

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1280px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin: 1.5em 0 .4em; }
.meta { color: #555; white-space: pre-line; }
table { border-collapse: collapse; margin: .3em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: .25em .7em; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f6f6f6; } td.l, th.l { text-align: left; }
td:not(.l), th:not(.l) { white-space: nowrap; }
.tw { overflow-x: auto; max-width: 100%; }
.chart { margin: .5em 0 1.2em; min-height: 320px; }
.chart .u-title { font-size: 13px; font-weight: 600; }
.chart .u-legend { font-size: 12px; text-align: left; }
.chart .u-legend .u-value { white-space: nowrap; }
.errors li { font-family: ui-monospace, monospace; font-size: 12px; }
.note { color: #666; font-size: 12px; }
"""


def _html_table(header: list[str], rows: list[list[str]], left_cols: int = 2) -> str:
    def cell(tag: str, i: int, text: str) -> str:
        cls = ' class="l"' if i < left_cols else ""
        return f"<{tag}{cls}>{escape(text)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in rows
    )
    return (
        f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    )


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


def _ioping_table(rows: list[dict]) -> str:
    header = ["cell", "storage", "workload", "slots", "requests"]
    header += [f"P{p:g}" for _, p in FLEET_COLUMNS]
    out = [
        [
            str(r.get("cell_id")),
            storage_text(r),
            workload_title({**r, "metric_source": "ioping"}),
            str(r.get("slots")),
            f"{r.get('requests') or 0:,}",
            *[fmt_ns(r[c]) if r.get(c) is not None else "-" for c, _ in FLEET_COLUMNS],
        ]
        for r in rows
    ]
    return _html_table(header, out, left_cols=3)


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
    specs: list[Spec] = []

    def charts(new: list[Spec]) -> None:
        for spec in new:
            body.append(chart_div(len(specs), spec))
            specs.append(spec)

    body += _decision_html(data)  # the decision sections first
    pct_groups = group_percentiles(data.percentiles)
    fleet_groups = group_fleet(data.fleet)
    if not pct_groups and not fleet_groups and not data.ioping:
        body.append("<p>No measurements in this run.</p>")
    expected = expected_table(data.expected)
    if expected:
        body.append("<h2>Expected vs measured</h2>")
        body.append(f'<p class="note">{escape(EXPECTED_NOTE)}.</p>')
        charts(expected_specs(data.expected))
        body.append(_html_table(list(EXPECTED_HEADER), expected, left_cols=4))
    if fleet_groups:
        body.append("<h2>Latency percentile curves</h2>")
        body.append(
            '<p class="note">fio completion latency from the json+ histograms of every slot '
            "merged per cell; the p-th percentile is the smallest bin reaching "
            "ceil(p/100 &times; total). Hover for values; click a legend entry to hide or "
            "show a cell.</p>"
        )
        for group in fleet_groups:
            body.append(f"<h3>{escape(group.title)}</h3>")
            charts(fio_latency_specs(group.rows))
            body.append(_fleet_table(group))
    if data.ioping:
        body.append("<h2>ioping latency</h2>")
        body.append(
            '<p class="note">Every timed ioping request of every slot pooled per cell '
            "(requests ioping leaves out of its own statistics dropped: the warm-up, outside -t/-T, failed or interrupted); the p-th percentile is the smallest request time "
            "reaching ceil(p/100 &times; requests).</p>"
        )
        charts(ioping_specs(data.ioping))
        body.append(_ioping_table(data.ioping))
    ladder_specs = slot_ladder_specs(pct_groups)
    if ladder_specs:
        body.append("<h2>IOPS, throughput and wall time ladders</h2>")
        body.append(
            '<p class="note">Per configuration, P0..P100 across its slots (exact percentiles, '
            "linear interpolation); the slot is the sample.</p>"
        )
        charts(ladder_specs)
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
    if data.noise_missing:
        body.append("<h2>Repeat noise (not computed)</h2>")
        body.append(
            f'<p class="note">{escape(NOISE_MISSING.format(reason=data.noise_missing))}.</p>'
        )
    if data.ingest_errors:
        body.append(f'<h2>Ingest errors ({len(data.ingest_errors)})</h2><ul class="errors">')
        body += [
            f"<li>{escape(str(e['object_key']))}: {escape(str(e['reason']))}</li>"
            for e in data.ingest_errors
        ]
        body.append("</ul>")
    if specs:
        body.append(chart_scripts(specs))
    style = CSS + (chart_style() if specs else "")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{style}</style></head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )
