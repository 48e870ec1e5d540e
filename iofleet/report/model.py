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


def _known(row: Row) -> bool:
    return row.get("limited_by") not in (None, "unknown") and (
        row.get("expected_iops") is not None or row.get("expected_bw_bytes") is not None
    )


def _ratio(value: Any) -> str:
    return "-" if value is None else f"{float(value) * 100:.0f}%"


EXPECTED_HEADER = (
    "cell",
    "storage",
    "workload",
    "limited by",
    "expected IOPS",
    "P50 IOPS",
    "ratio",
    "expected rate",
    "P50 rate",
    "ratio",
    "burst",
)


def expected_table(rows: Iterable[Row]) -> list[list[str]]:
    """expected_vs_measured rows -> display rows (EXPECTED_HEADER), or [] when no
    row has a known expectation (local runs: nothing to compare with)."""
    from iofleet.report.units import fmt_iops, fmt_rate

    rows = [r for r in rows if r.get("limited_by") is not None]
    if not any(_known(r) for r in rows):
        return []
    rows.sort(
        key=lambda r: (
            r.get("workload_index") if r.get("workload_index") is not None else -1,
            r.get("job") or "",
            r.get("direction") or "",
            *_cell_sort(r),
        )
    )

    def num(value: Any, fmt: Any) -> str:
        return "-" if value is None else fmt(float(value))

    out = []
    for r in rows:
        burst = "-"
        if r.get("seconds_to_exhaust") is not None:
            burst = f"empties ~{float(r['seconds_to_exhaust']):,.0f} s"
        out.append(
            [
                str(r.get("cell_id") or ""),
                storage_text(r),
                workload_title({**r, "metric_source": "fio"}),
                str(r.get("limited_by")) + (" (upper bound)" if r.get("upper_bound") else ""),
                num(r.get("expected_iops"), fmt_iops),
                num(r.get("iops_p50"), fmt_iops),
                _ratio(r.get("iops_ratio")),
                num(r.get("expected_bw_bytes"), fmt_rate),
                num(r.get("bw_p50"), fmt_rate),
                _ratio(r.get("bw_ratio")),
                burst,
            ]
        )
    return out


EXPECTED_NOTE = (
    "ratio = the median slot's measurement / the plan's expected ceiling "
    "(smaller of volume and instance; docs/expectations.md)"
)


SKEW_HEADER = (
    "cell",
    "storage",
    "fleet",
    "passed",
    "start skew",
    "clock error (max)",
    "skew bound",
    "seen late",
)
SKEW_NOTE = (
    "start skew = latest minus earliest instant the cell's slots passed the start barrier, "
    "on their own clocks; skew bound = skew + 2 x the worst clock error the kernel reported "
    "(the skew itself when every slot ran on one host: one clock)"
)


def fmt_us(value: Any) -> str:
    """A start-skew figure in whole microseconds (the barrier's wall-clock readings and
    the kernel's clock error are both whole us): under 1 us is `< 1 us`, not `0 ns`,
    which would claim a resolution the readings do not have."""
    from iofleet.report.units import fmt_ns

    if value is None:
        return "-"
    return "< 1 us" if float(value) < 1 else fmt_ns(float(value) * 1000)


def skew_table(rows: Iterable[Row]) -> list[list[str]]:
    """start_skew rows -> display rows (SKEW_HEADER), or [] when no slot passed a barrier."""
    rows = sorted((r for r in rows if r.get("slots_passed")), key=_cell_sort)
    out = []
    for r in rows:
        error = fmt_us(r.get("clock_max_error_us"))
        if r.get("slots_unsynced"):
            error += f" ({r['slots_unsynced']} unsynced)"
        out.append(
            [
                str(r.get("cell_id") or ""),
                storage_text(r),
                str(r.get("fleet_size") if r.get("fleet_size") is not None else "-"),
                str(r.get("slots_passed")),
                fmt_us(r.get("start_skew_us")),
                error,
                fmt_us(r.get("start_skew_bound_us")),
                "no" if not r.get("max_late_us") else f"by {fmt_us(r.get('max_late_us'))}",
            ]
        )
    return out


@dataclass
class ReportData:
    run_id: str
    run: dict[str, Any] | None
    percentiles: list[dict[str, Any]]
    fleet: list[dict[str, Any]]
    slots: list[dict[str, Any]]
    ingest_errors: list[dict[str, Any]]
    expected: list[dict[str, Any]] = field(default_factory=list)
    skew: list[dict[str, Any]] = field(default_factory=list)  # the start_skew view
    # repeat noise per configuration (iofleet.results.noise); None: not computed
    noise: list[dict[str, Any]] | None = None
    # why the run's repeats have no noise rows (numpy/scipy not importable); the report
    # says so in the section's place. None: computed, or no configuration has repeats
    noise_missing: str | None = None
    # iofleet.results.decide: {"decision": rows, "pivot": rows, "scaling": rows}
    decision: dict[str, list[dict[str, Any]]] | None = None
    target: list[str] = field(default_factory=list)  # the --target conditions, as given
    fleet_totals: list[dict[str, Any]] = field(default_factory=list)  # the fleet_totals view
    failures: list[dict[str, Any]] = field(default_factory=list)  # queries/failures.sql
    environment: list[dict[str, Any]] = field(default_factory=list)  # per cell, from slots
    ioping: list[dict[str, Any]] = field(default_factory=list)  # queries/ioping_latency.sql

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


NOISE_NOTE = (
    "configurations measured in 2+ repeats: CV across slots, CV of the repeat means, "
    "within-repeat CV; 'DISAGREE' = a Kruskal-Wallis test across the repeats' slots, "
    "Benjamini-Hochberg adjusted over the report, is below 0.05 (the repeats differ "
    "beyond their slots' noise); '-' = not testable (a repeat of one slot)"
)
NOISE_MISSING = (
    "configurations of this run have 2+ repeats, but their repeat-noise test (scipy's "
    "Kruskal-Wallis) did not run here: {reason}; `iofleet report` with numpy and scipy "
    "installed shows it"
)
NOISE_HEADER = (
    "storage",
    "fleet",
    "workload",
    "metric",
    "repeats",
    "slots",
    "mean",
    "CV slots",
    "CV repeats",
    "CV within",
    "p adj",
    "repeats",
)


def noise_table(rows: Iterable[Row], metrics: Iterable[str] | None = None) -> list[list[str]]:
    """noise rows -> display rows (NOISE_HEADER); `metrics` limits the metrics shown,
    but a flagged row is always shown."""
    from iofleet.report.units import fmt_value

    wanted = set(metrics) if metrics is not None else None

    def pct(x: Any) -> str:
        return "-" if x is None else f"{float(x) * 100:.1f}%"

    out = []
    for r in rows:
        if wanted is not None and r.get("metric") not in wanted and not r.get("repeats_disagree"):
            continue
        disagree = r.get("repeats_disagree")
        flag = "-" if disagree is None else "DISAGREE" if disagree else "agree"
        out.append(
            [
                storage_text(r),
                str(r.get("fleet_size") if r.get("fleet_size") is not None else "-"),
                workload_title(r),
                METRIC_TITLES.get(str(r.get("metric")), str(r.get("metric"))),
                str(r.get("n_repeats")),
                str(r.get("n_slots")),
                fmt_value(r.get("mean"), r.get("unit")),
                pct(r.get("cv")),
                pct(r.get("cv_repeats")),
                pct(r.get("cv_within")),
                "-" if r.get("p_adjusted") is None else f"{float(r['p_adjusted']):.3g}",
                flag,
            ]
        )
    return out
