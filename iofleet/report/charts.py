"""The report's charts: uPlot (vendored from its npm package) drawing inline JSON data.

Every chart is a spec (title, x positions and tick labels, y unit and scale, one
series per cell or per figure) built here from the warehouse rows, raw numbers
unchanged; `chart_scripts` inlines them as one JSON block, then uPlot's minified
file and charts.js, which draws each spec into its `<div data-chart="N">`. Nothing
is loaded from anywhere: the report stays one offline file.

The vendored files are iofleet/report/vendor/uPlot.* (byte-identical to the version
pinned in package.json; tests/unit/test_report_charts.py checks it). Upgrading:
`npm install --save-exact --save-dev uplot@NEW`, then copy
node_modules/uplot/dist/uPlot.iife.min.js, dist/uPlot.min.css and LICENSE
(as uPlot.LICENSE) into vendor/.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from iofleet.report.model import (
    FLEET_COLUMNS,
    PCT_COLUMNS,
    Group,
    group_fleet,
    storage_text,
    workload_title,
)

VENDOR_DIR = Path(__file__).resolve().parent / "vendor"
UPLOT_JS = VENDOR_DIR / "uPlot.iife.min.js"
UPLOT_CSS = VENDOR_DIR / "uPlot.min.css"
UPLOT_LICENSE = VENDOR_DIR / "uPlot.LICENSE"
CHARTS_JS = Path(__file__).resolve().parent / "charts.js"
DATA_ID = "iofleet-chart-data"

LADDER_METRICS = ("iops", "bw_bytes", "wall_seconds")
"""cell_percentiles metrics drawn as ladders across slots (P0..P100 per configuration)."""

Spec = dict[str, Any]


def nines(p: float) -> float:
    """x position of percentile p: -log10(1 - p/100); P100 sits half a step after P99.99."""
    return 4.6 if p >= 100 else -math.log10(1 - p / 100)


def _number(value: Any) -> float | int | None:
    """A warehouse number as JSON keeps it (None for NULL and NaN)."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, int | float) else None


def _positive(value: Any) -> float | int | None:
    """For a log axis: zero or less cannot be drawn (None leaves a gap)."""
    number = _number(value)
    return number if number is not None and number > 0 else None


def _series_label(row: Mapping[str, Any]) -> str:
    return f"{row.get('cell_id')} {storage_text(row)}"


def _latency_ladder(title: str, rows: Iterable[Mapping[str, Any]], note: str) -> Spec | None:
    """x: the nines-scaled percentiles of FLEET_COLUMNS; y: latency (log); a line per cell."""
    series = [
        {"label": _series_label(r), "values": [_positive(r.get(c)) for c, _ in FLEET_COLUMNS]}
        for r in rows
    ]
    series = [s for s in series if any(v is not None for v in s["values"])]
    if not series:
        return None
    return {
        "title": title,
        "note": note,
        "x": [round(nines(p), 6) for _, p in FLEET_COLUMNS],
        "xticks": [f"P{p:g}" for _, p in FLEET_COLUMNS],
        "xlabel": "percentile (nines scale)",
        "ylabel": "latency",
        "unit": "ns",
        "log": True,
        "points_only": False,
        "series": series,
    }


def fio_latency_specs(fleet: Iterable[Mapping[str, Any]]) -> list[Spec]:
    """One chart per fio workload/job/direction: each cell's merged-histogram ladder."""
    out = []
    for group in group_fleet(fleet):
        spec = _latency_ladder(
            f"{group.title} - completion latency", group.rows, "fleet_latency view"
        )
        if spec:
            out.append(spec)
    return out


def ioping_specs(rows: Iterable[Mapping[str, Any]]) -> list[Spec]:
    """One chart per ioping workload and operation: each cell's requests pooled."""
    groups: dict[tuple[int, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        wi = row.get("workload_index")
        key = (wi if isinstance(wi, int) else -1, str(row.get("direction") or ""))
        groups.setdefault(key, []).append(row)
    out = []
    for (wi, direction), members in sorted(groups.items()):
        title = workload_title(
            {"workload_index": wi, "metric_source": "ioping", "direction": direction}
        )
        spec = _latency_ladder(f"{title} - request latency", members, "ioping_latency query")
        if spec:
            out.append(spec)
    return out


def slot_ladder_specs(groups: Iterable[Group]) -> list[Spec]:
    """IOPS, throughput and wall time: P0..P100 across slots, a line per cell."""
    out = []
    for group in groups:
        if group.metric not in LADDER_METRICS:
            continue
        series = [
            {"label": _series_label(r), "values": [_number(r.get(c)) for c in PCT_COLUMNS]}
            for r in group.rows
        ]
        if not any(v is not None for s in series for v in s["values"]):
            continue
        out.append(
            {
                "title": group.title,
                "note": "cell_percentiles view (across slots)",
                "x": list(range(len(PCT_COLUMNS))),
                "xticks": [c.upper() for c in PCT_COLUMNS],
                "xlabel": "percentile across slots",
                "ylabel": {"iops": "IOPS", "bw_bytes": "throughput", "wall_seconds": "wall time"}[
                    group.metric
                ],
                "unit": group.unit,
                "log": False,
                "points_only": False,
                "series": series,
            }
        )
    return out


EXPECTED_FIGURES = (
    # (unit, expected column, [(label, measured column)])
    (
        "iops",
        "expected_iops",
        (("P0 slot", "iops_p0"), ("P50 slot", "iops_p50"), ("P100 slot", "iops_p100")),
    ),
    (
        "B/s",
        "expected_bw_bytes",
        (("P0 slot", "bw_p0"), ("P50 slot", "bw_p50"), ("P100 slot", "bw_p100")),
    ),
)


def expected_specs(rows: Iterable[Mapping[str, Any]]) -> list[Spec]:
    """Per fio workload/job/direction with a known expectation: the plan's ceiling next to
    the worst, median and best slot, per cell (IOPS, then throughput)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("limited_by") in (None, "unknown"):
            continue
        wi = row.get("workload_index")
        key = (
            wi if isinstance(wi, int) else -1,
            str(row.get("workload") or ""),
            str(row.get("job") or ""),
            str(row.get("direction") or ""),
        )
        groups.setdefault(key, []).append(row)
    out = []
    for _, members in sorted(groups.items()):
        title = workload_title({**members[0], "metric_source": "fio"})
        for unit, expected, measured in EXPECTED_FIGURES:
            if all(_number(r.get(expected)) is None for r in members):
                continue
            series = [
                {
                    "label": "expected (plan)",
                    "values": [_number(r.get(expected)) for r in members],
                }
            ] + [
                {"label": label, "values": [_number(r.get(col)) for r in members]}
                for label, col in measured
            ]
            out.append(
                {
                    "title": f"{title} - {'IOPS' if unit == 'iops' else 'throughput'}: "
                    "predicted vs measured",
                    "note": "expected_vs_measured view",
                    "x": list(range(len(members))),
                    "xticks": [str(r.get("cell_id")) for r in members],
                    "xlabel": "cell",
                    "ylabel": "IOPS" if unit == "iops" else "throughput",
                    "unit": unit,
                    "log": False,
                    "points_only": True,
                    "series": series,
                }
            )
    return out


def script_json(value: Any) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' (so no '</script>' nor '<!--')."""
    text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def _inline(path: Path) -> str:
    """A vendored or packaged file's text for an inline <script>/<style>; refuses text
    that could close the element early (a library upgrade that would break the page)."""
    text = path.read_text(encoding="utf-8")
    lowered = text.lower()
    for bad in ("</script", "<!--", "</style"):
        if bad in lowered:
            raise RuntimeError(f"{path}: contains {bad!r}: cannot be inlined")
    return text


def chart_style() -> str:
    return _inline(UPLOT_CSS)


def chart_scripts(specs: list[Spec]) -> str:
    """The data block, uPlot (with its license) and the drawing code, once per page."""
    license_text = _inline(UPLOT_LICENSE).strip().replace("*/", "* /")
    return (
        f'<script type="application/json" id="{DATA_ID}">{script_json(specs)}</script>\n'
        f"<script>/*! uPlot, vendored unchanged from npm uplot (license below)\n"
        f"{license_text}\n*/\n{_inline(UPLOT_JS)}</script>\n"
        f"<script>{_inline(CHARTS_JS)}</script>"
    )


def chart_div(index: int, spec: Spec) -> str:
    from html import escape

    return (
        f'<div class="chart" data-chart="{index}" role="img" '
        f'aria-label="{escape(str(spec["title"]))}"></div>'
    )
