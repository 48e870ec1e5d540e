"""The terminal report: one table per metric, a row per cell, human units."""

from __future__ import annotations

from collections.abc import Sequence

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
    ReportData,
    expected_table,
    group_fleet,
    group_percentiles,
    noise_table,
    skew_table,
    storage_text,
    workload_title,
)
from iofleet.report.units import fmt_ns, fmt_value


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right_from: int) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [
            f"{c:>{w}}" if i >= right_from else f"{c:<{w}}"
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def run_header(data: ReportData) -> str:
    run = data.run or {}
    bits = [f"run {data.run_id}"]
    if run.get("matrix_name"):
        bits.append(f"matrix {run['matrix_name']}")
    if run.get("mode"):
        bits.append(str(run["mode"]))
    if run.get("status"):
        bits.append(str(run["status"]))
    if run.get("started_at"):
        bits.append(f"started {str(run['started_at'])[:19]} UTC")
    return " | ".join(bits) + f"\n{data.slot_summary()}"


# The terminal shows the headline metrics; JSON, CSV and HTML carry them all.
TEXT_METRICS = (
    "iops",
    "bw_bytes",
    "clat_p50_ns",
    "clat_p99_ns",
    "lat_median_ns",
    "lat_mean_ns",
    "wall_seconds",
)


def target_verdict(rows: list[dict]) -> str:
    """One line: the cheapest configuration meeting the target, per workload it applies to."""
    cheapest = [r for r in rows if r.get("cheapest_meeting_target")]
    meeting = [r for r in rows if r.get("meets_target")]
    if cheapest:
        return "Cheapest meeting the target: " + "; ".join(
            f"{workload_title(r)}: {r.get('instance_type')} {storage_text(r)} x{r.get('fleet_size')}"
            f" (${float(r['usd_per_slot']):,.3f}/slot, ${float(r['usd_per_run']):,.2f}/run)"
            for r in cheapest
        )
    if meeting:
        return (
            f"{len(meeting)} configuration(s) meet the target, but their cost is unknown "
            "(run.json has no plan cost): no cheapest one"
        )
    return "No configuration meets the target."


def decision_text(data: ReportData) -> list[str]:
    """The decision sections, first in the report: decision table, pivot, scaling."""
    from iofleet.report import decision as d

    out: list[str] = []
    sections = data.decision or {}
    groups = d.decision_groups(sections.get("decision", []))
    if groups:
        target = f" - target: {' and '.join(data.target)}" if data.target else ""
        out += [f"Decision{target} ({d.DECISION_NOTE}):", ""]
    for title, rows in groups:
        out.append(title)
        out += _table(list(d.DECISION_HEADER), rows, right_from=3) + [""]
    if data.target and groups:
        out += [target_verdict(sections.get("decision", [])), ""]
    for title, header, rows in d.pivot_groups(sections.get("pivot", [])):
        out.append(title)
        out += _table(header, rows, right_from=2) + [""]
    scaling = d.scaling_rows(sections.get("scaling", []))
    if scaling:
        out += [f"Fleet-size scaling - {d.SCALING_NOTE}:", ""]
    for title, rows in scaling:
        out.append(title)
        out += _table(list(d.SCALING_HEADER), rows, right_from=2) + [""]
    return out


def sections_text(data: ReportData) -> list[str]:
    """Fleet totals, failure reasons and the environment."""
    from iofleet.report import decision as d

    out: list[str] = []
    totals = d.fleet_totals_rows(data.fleet_totals)
    if totals:
        out += [f"Fleet totals - {d.FLEET_TOTALS_NOTE}:", ""]
        out += _table(list(d.FLEET_TOTALS_HEADER), totals, right_from=3) + [""]
    if data.failures:
        out += [f"Failures ({len(data.failures)}: per slot and workload):", ""]
        out += _table(list(d.FAILURE_HEADER), d.failure_rows(data.failures), right_from=7)
        out.append("")
    env = d.environment_rows(data.environment)
    if env:
        out += ["Environment (per cell; 'a | b' = its slots differ):", ""]
        out += _table(list(d.ENVIRONMENT_HEADER), env, right_from=len(d.ENVIRONMENT_HEADER))
        out.append("")
    return out


def render_text(data: ReportData) -> str:
    out = [run_header(data), ""]
    out += decision_text(data)
    out += sections_text(data)
    groups = [g for g in group_percentiles(data.percentiles) if g.metric in TEXT_METRICS]
    if not groups and not data.fleet:
        out += ["no measurements in this run", ""]
    if groups:
        out += [
            "Across slots (exact percentiles of one value per slot; "
            "every metric: --format json|csv or --html):",
            "",
        ]
    for group in groups:
        out.append(group.title)
        header = ["cell", "storage", "fleet", "slots", *[c.upper() for c in PCT_COLUMNS]]
        rows = [
            [
                r.get("cell_id") or "",
                storage_text(r),
                str(r.get("fleet_size") if r.get("fleet_size") is not None else "-"),
                str(r.get("slots")),
                *[fmt_value(r.get(c), group.unit) for c in PCT_COLUMNS],
            ]
            for r in group.rows
        ]
        out += _table(header, rows, right_from=2) + [""]
    expected = expected_table(data.expected)
    if expected:
        out += [f"Expected vs measured - {EXPECTED_NOTE}:", ""]
        out += _table(list(EXPECTED_HEADER), expected, right_from=4) + [""]
    noise = noise_table(data.noise or [], TEXT_METRICS)
    if noise:
        flagged = sum(1 for r in data.noise or [] if r.get("repeats_disagree"))
        out += [f"Repeat noise ({flagged} flagged) - {NOISE_NOTE}:", ""]
        out += _table(list(NOISE_HEADER), noise, right_from=4) + [""]
    if data.noise_missing:
        out += [
            f"Repeat noise (not computed): {NOISE_MISSING.format(reason=data.noise_missing)}.",
            "",
        ]
    fleet = group_fleet(data.fleet)
    if fleet:
        out += ["Fleet latency (fio histograms merged across all slots of a cell):", ""]
    for group in fleet:
        out.append(f"{group.title} - completion latency")
        cols = [c for c, _ in FLEET_COLUMNS]
        header = ["cell", "storage", "slots", "I/Os", *[_fleet_label(c) for c in cols]]
        rows = [
            [
                r.get("cell_id") or "",
                storage_text(r),
                str(r.get("slots")),
                f"{r.get('total_count') or 0:,}",
                *[fmt_ns(r[c]) if r.get(c) is not None else "-" for c in cols],
            ]
            for r in group.rows
        ]
        out += _table(header, rows, right_from=2) + [""]
    skew = skew_table(data.skew)
    if skew:
        out += [f"Start skew - {SKEW_NOTE}:", ""]
        out += _table(list(SKEW_HEADER), skew, right_from=2) + [""]
    if data.ingest_errors:
        out.append(f"{len(data.ingest_errors)} raw objects could not be ingested:")
        out += [f"  {e['object_key']}: {e['reason']}" for e in data.ingest_errors[:20]]
        if len(data.ingest_errors) > 20:
            out.append(f"  ... and {len(data.ingest_errors) - 20} more (table ingest_errors)")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _fleet_label(column: str) -> str:
    return column.removesuffix("_ns").upper().replace("_", ".")
