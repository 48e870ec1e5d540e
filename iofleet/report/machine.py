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


def view_rows(data: ReportData, view: str) -> tuple[list[dict[str, Any]], tuple[str, ...] | None]:
    """One report section's rows and, where fixed, its CSV columns."""
    from iofleet.report.decision import ENVIRONMENT_COLUMNS, FAILURE_COLUMNS
    from iofleet.results.decide import DECISION_COLUMNS, PIVOT_COLUMNS, SCALING_COLUMNS

    decision = data.decision or {}
    table: dict[str, tuple[list[dict[str, Any]], tuple[str, ...] | None]] = {
        "decision": (decision.get("decision", []), DECISION_COLUMNS),
        "pivot": (decision.get("pivot", []), PIVOT_COLUMNS),
        "scaling": (decision.get("scaling", []), SCALING_COLUMNS),
        "fleet_totals": (data.fleet_totals, None),
        "failures": (data.failures, FAILURE_COLUMNS),
        "environment": (data.environment, ENVIRONMENT_COLUMNS),
        "cell_percentiles": (data.percentiles, CSV_COLUMNS),
        "fleet_latency": (data.fleet, None),
        "ioping_latency": (data.ioping, None),
        "expected_vs_measured": (data.expected, None),
        "start_skew": (data.skew, None),
        "repeat_noise": (data.noise or [], None),
        "slots": (data.slots, None),
        "ingest_errors": (data.ingest_errors, None),
    }
    return table[view]


VIEWS = (
    "decision",
    "pivot",
    "scaling",
    "fleet_totals",
    "failures",
    "environment",
    "cell_percentiles",
    "fleet_latency",
    "ioping_latency",
    "expected_vs_measured",
    "start_skew",
    "repeat_noise",
    "slots",
    "ingest_errors",
)
"""What `--view` takes: every section of the report (docs: README "Report")."""


def render_json(data: ReportData, view: str | None = None) -> str:
    if view is not None:
        return json.dumps(_clean(view_rows(data, view)[0]), indent=2) + "\n"
    decision = data.decision or {}
    doc = {
        "run_id": data.run_id,
        "target": list(data.target),
        "decision": _clean(decision.get("decision", [])),
        "pivot": _clean(decision.get("pivot", [])),
        "scaling": _clean(decision.get("scaling", [])),
        "fleet_totals": _clean(data.fleet_totals),
        "failures": _clean(data.failures),
        "environment": _clean(data.environment),
        "run": {k: _plain(v) for k, v in (data.run or {}).items()},
        "cell_percentiles": _clean(data.percentiles),
        "fleet_latency": _clean(data.fleet),
        "ioping_latency": _clean(data.ioping),
        "expected_vs_measured": _clean(data.expected),
        "start_skew": _clean(data.skew),
        "slots": _clean(data.slots),
        "ingest_errors": _clean(data.ingest_errors),
        "repeat_noise": _clean(data.noise) if data.noise is not None else None,
        "repeat_noise_missing": data.noise_missing,
    }
    return json.dumps(doc, indent=2) + "\n"


def render_csv(data: ReportData, view: str = "decision") -> str:
    """One section as CSV (header + one line per row): the decision table unless `view`."""
    rows, columns = view_rows(data, view)
    if columns is None:
        columns = tuple(rows[0]) if rows else ()
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                k: ("" if v is None else repr(v) if isinstance(v, float) else _plain(v))
                for k, v in row.items()
            }
        )
    return buf.getvalue()
