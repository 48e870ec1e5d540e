"""Machine-readable reports: raw numbers, stable column names."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from iofleet.report.model import ReportData

CSV_COLUMNS = (
    "run_id",
    "cell_id",
    "cell_index",
    "instance_type",
    "storage_label",
    "storage_type",
    "storage_detail",
    "fleet_size",
    "repeat",
    "metric_source",
    "workload_index",
    "workload",
    "job",
    "direction",
    "metric",
    "unit",
    "slots",
    "p0",
    "p50",
    "p75",
    "p90",
    "p98",
    "p100",
)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _clean(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in r.items()} for r in rows]


def render_json(data: ReportData) -> str:
    doc = {
        "run_id": data.run_id,
        "run": {k: _plain(v) for k, v in (data.run or {}).items()},
        "cell_percentiles": _clean(data.percentiles),
        "fleet_latency": _clean(data.fleet),
        "expected_vs_measured": _clean(data.expected),
        "start_skew": _clean(data.skew),
        "slots": _clean(data.slots),
        "ingest_errors": _clean(data.ingest_errors),
        "repeat_noise": _clean(data.noise) if data.noise is not None else None,
    }
    return json.dumps(doc, indent=2) + "\n"


def render_csv(data: ReportData) -> str:
    """cell_percentiles as CSV (header + one line per cell and metric)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in data.percentiles:
        writer.writerow(
            {
                k: ("" if v is None else repr(v) if isinstance(v, float) else v)
                for k, v in row.items()
            }
        )
    return buf.getvalue()
