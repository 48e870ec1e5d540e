"""The report's decision sections: loading them from a warehouse, and their display rows.

Sections (each also a `--view` for `--format csv|json`): decision, pivot, scaling
(iofleet.results.decide), fleet_totals (the view), failures (queries/failures.sql),
environment (the slots' recorded system, per cell).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from iofleet.report.model import Row, storage_text, workload_title

ENV_FIELDS = (
    ("instance_type", "instance type"),
    ("az_id", "AZ id"),
    ("kernel", "kernel"),
    ("fio_version", "fio"),
    ("ioping_version", "ioping"),
    ("target_fstype", "filesystem"),
    ("mount_options", "mount options"),
    ("iofleet_version", "iofleet"),
)
ENVIRONMENT_COLUMNS = (
    "run_id",
    "cell_id",
    "cell_index",
    "storage_label",
    "fleet_size",
    "repeat",
    "slots",
    *(f for f, _ in ENV_FIELDS),
)
FAILURE_COLUMNS = (
    "run_id",
    "cell_id",
    "slot_index",
    "workload_index",
    "level",
    "status",
    "exit_code",
    "reason",
)


def _query(src: Any, name: str, run_id: str, order: str) -> list[dict[str, Any]]:
    from iofleet.results.source import named_query

    return named_query(src, name, [run_id], order)


def load_failures(src: Any, run_id: str) -> list[dict[str, Any]]:
    return _query(src, "failures", run_id, "cell_id, slot_index, workload_index NULLS FIRST, level")


def load_fleet_totals(src: Any, run_id: str) -> list[dict[str, Any]]:
    from iofleet.results.source import fleet_totals

    return fleet_totals(src, run_id)


def load_environment(src: Any, run_id: str) -> list[dict[str, Any]]:
    """Per cell: each environment field's distinct values over its slots ('a | b' when
    the slots differ; None when no slot recorded it)."""
    cols = ", ".join(f'"{f}"' for f, _ in ENV_FIELDS)
    rows = src.select(
        f'SELECT cell_id, cell_index, storage_label, fleet_size, "repeat", {cols} FROM slots '
        "WHERE run_id = ? ORDER BY cell_index, cell_id, slot_index",
        [run_id],
    )
    cells: dict[str, dict[str, Any]] = {}
    for r in rows:
        cell = cells.setdefault(
            r["cell_id"],
            {
                "run_id": run_id,
                "cell_id": r["cell_id"],
                "cell_index": r["cell_index"],
                "storage_label": r["storage_label"],
                "fleet_size": r["fleet_size"],
                "repeat": r["repeat"],
                "slots": 0,
                **{f: [] for f, _ in ENV_FIELDS},
            },
        )
        cell["slots"] += 1
        for f, _ in ENV_FIELDS:
            if r[f] is not None and r[f] not in cell[f]:
                cell[f].append(r[f])
    for cell in cells.values():
        for f, _ in ENV_FIELDS:
            cell[f] = " | ".join(str(v) for v in cell[f]) if cell[f] else None
    return list(cells.values())


def load_decision(
    src: Any,
    run_id: str,
    conditions: Sequence[Any] = (),
    slot_values: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The decision sections of one run; `slot_values`: the run's slot_values rows when
    the caller already has them (else they are read)."""
    from iofleet.results.compare import load_slot_values
    from iofleet.results.decide import check_target_measured, decide
    from iofleet.results.source import cell_costs

    values = list(slot_values) if slot_values is not None else load_slot_values(src, [run_id])
    if conditions:
        check_target_measured(conditions, values)
    costs = {r["cell_id"]: r for r in cell_costs(src, run_id)}
    return decide(values, costs, conditions)


# ------------------------------------------------------------------ display rows


def _usd(value: Any, digits: int = 4) -> str:
    return "-" if value is None else f"${float(value):,.{digits}f}"


DECISION_HEADER = (
    "rank",
    "instance",
    "storage",
    "fleet",
    "repeats",
    "slots",
    "value",
    "P0",
    "P50",
    "P100",
    "$/run",
    "$/slot",
    "$/inst-h",
    "$/1k IOPS",
    "$/build",
    "target",
    "Pareto",
)
DECISION_NOTE = (
    "configurations (instance type x storage x fleet size, repeats pooled) ranked by "
    "the statistic named per workload; cost from the plan (cell_costs; local runs $0); "
    "$/slot = $/run / fleet size; $/1k IOPS = $/run / (fleet IOPS / 1000); $/build = "
    "$/run / successful builds; target: yes/no, CHEAPEST = the cheapest per slot meeting "
    "it; Pareto: * = on the front of $/slot against the ranked statistic"
)


def decision_groups(rows: Iterable[Row]) -> list[tuple[str, list[list[str]]]]:
    """decision rows -> [(title, display rows)] per workload."""
    from iofleet.report.model import METRIC_TITLES
    from iofleet.report.units import fmt_value

    groups: dict[tuple[Any, ...], tuple[str, list[list[str]]]] = {}
    for r in rows:
        key = (r.get("metric_source"), r.get("workload_index"), r.get("job"), r.get("direction"))
        if key not in groups:
            metric = METRIC_TITLES.get(str(r.get("metric")), str(r.get("metric")))
            title = f"{workload_title(r)} - ranked by {str(r.get('stat')).upper()} {metric}"
            groups[key] = (title, [])
        unit = r.get("unit")
        meets = r.get("meets_target")
        target = "-" if meets is None else ("yes" if meets else "no")
        if r.get("cheapest_meeting_target"):
            target = "CHEAPEST"
        groups[key][1].append(
            [
                str(r.get("rank")),
                str(r.get("instance_type") or "-"),
                storage_text(r),
                str(r.get("fleet_size") if r.get("fleet_size") is not None else "-"),
                str(r.get("repeats")),
                str(r.get("slots")),
                fmt_value(r.get("value"), unit),
                fmt_value(r.get("p0"), unit),
                fmt_value(r.get("p50"), unit),
                fmt_value(r.get("p100"), unit),
                _usd(r.get("usd_per_run"), 2) + ("+?" if r.get("cost_complete") is False else ""),
                _usd(r.get("usd_per_slot"), 3),
                _usd(r.get("usd_per_instance_hour"), 3),
                _usd(r.get("usd_per_1k_iops")),
                _usd(r.get("usd_per_build")),
                target,
                "*" if r.get("pareto") else "",
            ]
        )
    return list(groups.values())


def pivot_groups(rows: Iterable[Row]) -> list[tuple[str, list[str], list[list[str]]]]:
    """pivot rows -> [(title, header, display rows)]: storage rows x fleet-size columns,
    each cell 'P0 .. P100' on separate lines joined by ' / ' (seed 004's layout)."""
    from iofleet.report.model import METRIC_TITLES
    from iofleet.report.units import fmt_value

    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        key = (r.get("metric_source"), r.get("workload_index"), r.get("job"), r.get("direction"))
        groups.setdefault(key, []).append(r)
    out = []
    for grp in groups.values():
        sizes = sorted({int(r["fleet_size"]) for r in grp if r.get("fleet_size") is not None})
        metric = METRIC_TITLES.get(str(grp[0].get("metric")), str(grp[0].get("metric")))
        title = f"{workload_title(grp[0])} - {metric} per slot, P0..P100 by fleet size"
        header = ["instance", "storage", *[f"{n} instance{'s' if n != 1 else ''}" for n in sizes]]
        lines: dict[tuple[Any, ...], dict[int, Row]] = {}
        for r in grp:
            skey = (r.get("instance_type"), storage_text(r))
            lines.setdefault(skey, {})[int(r["fleet_size"])] = r
        body = []
        for (inst, storage), by_size in lines.items():
            cells = []
            for n in sizes:
                cell = by_size.get(n)
                if cell is None:
                    cells.append("-")
                    continue
                unit = cell.get("unit")
                cells.append(
                    " ".join(f"{p.upper()}:{fmt_value(cell.get(p), unit)}" for p in
                             ("p0", "p50", "p75", "p90", "p98", "p100"))
                )  # fmt: skip
            body.append([str(inst or "-"), storage, *cells])
        out.append((title, header, body))
    return out


SCALING_HEADER = ("instance", "storage", "fleet", "value", "change", "past knee", "knee")
SCALING_NOTE = (
    "per-slot statistic by fleet size; change = against the smallest fleet size; the knee "
    "is the largest fleet size before per-slot performance is more than 10% worse than at "
    "the smallest ('>= N': no such drop up to N; docs/decisions.md)"
)


def scaling_rows(rows: Iterable[Row]) -> list[tuple[str, list[list[str]]]]:
    from iofleet.report.units import fmt_value

    groups: dict[tuple[Any, ...], tuple[str, list[list[str]]]] = {}
    for r in rows:
        key = (r.get("metric_source"), r.get("workload_index"), r.get("job"), r.get("direction"))
        if key not in groups:
            groups[key] = (
                f"{workload_title(r)} - {str(r.get('stat')).upper()} {r.get('metric')}",
                [],
            )
        k = r.get("knee_fleet_size")
        knee = "-" if k is None else (str(k) if r.get("knee_found") else f">= {k}")
        change = r.get("change")
        groups[key][1].append(
            [
                str(r.get("instance_type") or "-"),
                storage_text(r),
                str(r.get("fleet_size")),
                fmt_value(r.get("value"), r.get("unit")),
                "-" if change is None else f"{float(change) * 100:+.1f}%",
                "yes" if r.get("past_knee") else "no",
                knee,
            ]
        )
    return list(groups.values())


FLEET_TOTALS_HEADER = (
    "cell",
    "storage",
    "workload",
    "slots",
    "together",
    "fleet IOPS",
    "fleet rate",
    "ceiling IOPS",
    "ceiling rate",
    "ratio",
    "binding limit",
)
FLEET_TOTALS_NOTE = (
    "fleet IOPS / rate = sum of the slots' mean rates over the window where all ran "
    "(together = that window's length / the longest slot's run); ceiling = the plan's "
    "per-slot expectation x fleet size; binding limit from the ratio and CloudWatch's "
    "throttling evidence; 'suspect' = above the ceiling (page cache, unfilled files, "
    "lazy snapshot load)"
)


def fleet_totals_rows(rows: Iterable[Row]) -> list[list[str]]:
    from iofleet.report.units import fmt_iops, fmt_rate

    out = []
    for r in rows:
        ratios = [x for x in (r.get("iops_ratio"), r.get("bw_ratio")) if x is not None]
        overlap, longest = r.get("overlap_s"), r.get("longest_s")
        together = "-"
        if overlap is not None and longest:
            together = f"{float(overlap):.1f}s of {float(longest):.1f}s"
        out.append(
            [
                str(r.get("cell_id") or ""),
                storage_text(r),
                workload_title({**r, "metric_source": "fio"}),
                str(r.get("slots")),
                together,
                "-" if r.get("total_iops") is None else fmt_iops(float(r["total_iops"])),
                "-" if r.get("total_bw_bytes") is None else fmt_rate(float(r["total_bw_bytes"])),
                "-"
                if r.get("expected_total_iops") is None
                else fmt_iops(float(r["expected_total_iops"])),
                "-"
                if r.get("expected_total_bw_bytes") is None
                else fmt_rate(float(r["expected_total_bw_bytes"])),
                "-" if not ratios else f"{max(float(x) for x in ratios) * 100:.0f}%",
                str(r.get("binding") or "-"),
            ]
        )
    return out


FAILURE_HEADER = ("cell", "slot", "workload", "level", "status", "exit", "reason")


def failure_rows(rows: Iterable[Row]) -> list[list[str]]:
    return [
        [
            str(r.get("cell_id") or ""),
            str(r.get("slot_index") if r.get("slot_index") is not None else "-"),
            "-" if r.get("workload_index") is None else f"w{int(r['workload_index']):02d}",
            str(r.get("level")),
            str(r.get("status")),
            "-" if r.get("exit_code") is None else str(r.get("exit_code")),
            str(r.get("reason") or "-"),
        ]
        for r in rows
    ]


ENVIRONMENT_HEADER = ("cell", "storage", "slots", *(label for _, label in ENV_FIELDS))


def environment_rows(rows: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    return [
        [
            str(r.get("cell_id")),
            str(r.get("storage_label") or "-"),
            str(r.get("slots")),
            *[str(r.get(f) or "-") for f, _ in ENV_FIELDS],
        ]
        for r in rows
    ]


def load_ioping_latency(src: Any, run_id: str) -> list[dict[str, Any]]:
    """Per cell, ioping workload and operation: the ladder of all its requests pooled."""
    return _query(
        src, "ioping_latency", run_id, "workload_index, direction, cell_index NULLS LAST, cell_id"
    )
