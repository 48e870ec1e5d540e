"""Group the view rows for display (stdlib only)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Row = Mapping[str, Any]

PCT_COLUMNS = ("p0", "p50", "p75", "p90", "p98", "p100")
FLEET_COLUMNS = (
    ("p0_ns", 0.0),
    ("p50_ns", 50.0),
    ("p75_ns", 75.0),
    ("p90_ns", 90.0),
    ("p98_ns", 98.0),
    ("p99_ns", 99.0),
    ("p99_9_ns", 99.9),
    ("p99_99_ns", 99.99),
    ("p100_ns", 100.0),
)
METRIC_ORDER = (
    "iops",
    "bw_bytes",
    "clat_mean_ns",
    "clat_p50_ns",
    "clat_p90_ns",
    "clat_p99_ns",
    "clat_p99_9_ns",
    "clat_max_ns",
    "lat_min_ns",
    "lat_median_ns",
    "lat_mean_ns",
    "lat_max_ns",
    "wall_seconds",
)
METRIC_TITLES = {
    "iops": "IOPS",
    "bw_bytes": "throughput",
    "clat_mean_ns": "completion latency, mean",
    "clat_p50_ns": "completion latency P50",
    "clat_p90_ns": "completion latency P90",
    "clat_p99_ns": "completion latency P99",
    "clat_p99_9_ns": "completion latency P99.9",
    "clat_max_ns": "completion latency, max",
    "lat_min_ns": "request latency, min",
    "lat_median_ns": "request latency, median",
    "lat_mean_ns": "request latency, mean",
    "lat_max_ns": "request latency, max",
    "wall_seconds": "wall time",
}


@dataclass
class Group:
    """Rows of one metric for one workload/job/direction, one row per cell."""

    title: str
    metric: str
    unit: str | None
    rows: list[dict[str, Any]] = field(default_factory=list)


def _metric_rank(metric: str) -> int:
    return METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER)


def _cell_sort(row: Row) -> tuple:
    index = row.get("cell_index")
    return (index is None, index if index is not None else 0, row.get("cell_id") or "")


def workload_title(row: Row) -> str:
    """'w00 fio randread-16k: randread (read)', 'w01 ioping (read)', 'w02 app c-build'."""
    wi = row.get("workload_index")
    prefix = f"w{wi:02d}" if isinstance(wi, int) else "w??"
    source = row.get("metric_source") or "fio"
    text = f"{prefix} {source} {row.get('workload') or ''}".rstrip()
    if source == "ioping":
        text = f"{prefix} ioping"
    job, direction = row.get("job"), row.get("direction")
    if job and job != row.get("workload"):
        text += f": {job}"
    if direction:
        text += f" ({direction})"
    return text


def group_percentiles(rows: Iterable[Row]) -> list[Group]:
    """cell_percentiles rows -> groups in workload order, then metric order."""
    groups: dict[tuple, Group] = {}
    for row in rows:
        key = (
            row.get("workload_index") if row.get("workload_index") is not None else -1,
            row.get("metric_source") or "",
            row.get("workload") or "",
            row.get("job") or "",
            row.get("direction") or "",
            _metric_rank(row["metric"]),
            row["metric"],
        )
        if key not in groups:
            title = f"{workload_title(row)} - {METRIC_TITLES.get(row['metric'], row['metric'])}"
            groups[key] = Group(title, row["metric"], row.get("unit"))
        groups[key].rows.append(dict(row))
    for group in groups.values():
        group.rows.sort(key=_cell_sort)
    return [groups[k] for k in sorted(groups)]


def group_fleet(rows: Iterable[Row]) -> list[Group]:
    """fleet_latency rows -> one group per workload/job/direction."""
    groups: dict[tuple, Group] = {}
    for row in rows:
        key = (
            row.get("workload_index") if row.get("workload_index") is not None else -1,
            row.get("workload") or "",
            row.get("job") or "",
            row.get("direction") or "",
        )
        if key not in groups:
            title = workload_title({**row, "metric_source": "fio"})
            groups[key] = Group(title, "clat_ns", "ns")
        groups[key].rows.append(dict(row))
    for group in groups.values():
        group.rows.sort(key=_cell_sort)
    return [groups[k] for k in sorted(groups)]


def storage_text(row: Row) -> str:
    label = row.get("storage_label") or "?"
    detail = row.get("storage_detail")
    return f"{label} ({detail})" if detail and detail != label else label


@dataclass
class ReportData:
    run_id: str
    run: dict[str, Any] | None
    percentiles: list[dict[str, Any]]
    fleet: list[dict[str, Any]]
    slots: list[dict[str, Any]]
    ingest_errors: list[dict[str, Any]]

    def slot_summary(self) -> str:
        total = len(self.slots)
        ok = sum(1 for s in self.slots if s.get("status") == "SUCCEEDED")
        failed = sum(1 for s in self.slots if s.get("status") == "FAILED")
        text = f"{total} slots: {ok} succeeded"
        if failed:
            text += f", {failed} failed"
        if total - ok - failed:
            text += f", {total - ok - failed} without a final status"
        return text
