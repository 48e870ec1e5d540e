"""What a run will cost, before anyone pays.

Prices come from `data/prices.json` (dated, per region), with a matrix's own `prices`
laid over them (iofleet/plan/prices.py). A price that file
does not have is reported in `unknown`, never guessed: `usd` is then the sum
of the known items (a lower bound) and `complete` is false.

Stdlib only.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from iofleet.plan.expect import StorageSpec
from iofleet.plan.prices import lookup as _get
from iofleet.plan.prices import region_prices, summary

PRICES = Path(__file__).resolve().parent / "data" / "prices.json"
HOURS_PER_MONTH = 730.0
DEFAULT_REGION = "us-east-1"


@cache
def price_table() -> dict[str, Any]:
    return json.loads(PRICES.read_text(encoding="utf-8"))


def default_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


@dataclass
class Estimate:
    items: list[dict[str, Any]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def add(self, item: str, quantity: float, unit: str, unit_usd: float | None) -> None:
        if quantity <= 0:
            return
        if unit_usd is None:
            self.unknown.append(f"{item} ({quantity:g} {unit})")
            return
        self.items.append(
            {
                "item": item,
                "quantity": round(quantity, 6),
                "unit": unit,
                "unit_usd": unit_usd,
                "usd": round(quantity * unit_usd, 6),
            }
        )

    @property
    def usd(self) -> float:
        return round(sum(i["usd"] for i in self.items), 4)

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimated_cost_usd": self.usd,
            "complete": not self.unknown,
            "unknown": list(self.unknown),
            "items": list(self.items),
        }


GIB = 1024**3


@dataclass
class EfsTransfer:
    """One slot's bytes through an elastic EFS, which bills reads and writes per GiB."""

    read_bytes: float = 0.0
    write_bytes: float = 0.0
    unknown: str = ""  # why it cannot be estimated, if it cannot


def efs_transfer(
    expected: Sequence[Mapping[str, Any]], payloads: Sequence[Mapping[str, Any]]
) -> EfsTransfer:
    """One slot's EFS traffic: each fio job at its expected rate for its expected run
    time (the plan's ceilings: for elastic EFS the instance's, so at most this), the
    files fio lays out before reading (size x numjobs), and ioping's requests and its
    working-set file.
    An app's traffic, or a job without an expected rate or run time, is not estimated."""
    from iofleet.plan.expect import IOPING_WORKING_SET, job_profiles, parse_size

    out = EfsTransfer()
    for entry in expected:
        bw, seconds = entry.get("expected_bw_bytes"), entry.get("runtime_s")
        if bw is None or seconds is None:
            out.unknown = f"{entry['job']} {entry['direction']}: no expected rate or run time"
            return out
        if entry["direction"] == "write":
            out.write_bytes += bw * seconds
        else:  # read; trim moves no data but is counted as a read, at most
            out.read_bytes += bw * seconds
    for p in payloads:
        if p["kind"] == "app":
            out.unknown = f"app {p.get('name', '?')}: its traffic is not known before it runs"
            return out
        if p["kind"] == "ioping":
            # its requests (-s, 4 KiB unless given; the warm-up is one more), and on a
            # directory the 1 MiB working-set file it writes first (-S)
            size = parse_size(str(p["size"])) if p.get("size") else 4096
            moved = (int(p.get("count", 0)) + 1) * float(size or 4096)
            out.write_bytes += IOPING_WORKING_SET
            if p.get("write"):
                out.write_bytes += moved
            else:
                out.read_bytes += moved
        elif p["kind"] == "fio":
            try:
                profiles = job_profiles(str(p["name"]), p.get("params") or {})
            except (KeyError, OSError, ValueError):
                out.unknown = f"fio job {p['name']} could not be read"
                return out
            for profile in profiles:
                if profile.shares.get("read", 0) > 0 and profile.file_bytes:
                    out.write_bytes += profile.file_bytes  # the layout
    return out


def _region_prices(region: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The region's shipped rates, with a matrix's own `prices` for it laid over them."""
    return region_prices(price_table(), region, overrides)


def _tiered(quantity: float, tiers: list[list[Any]] | None) -> float | None:
    """Monthly cost of `quantity` units over [[up_to, price], ...]; None if a tier is unknown."""
    if not tiers:
        return None
    total, floor = 0.0, 0.0
    for up_to, price in tiers:
        top = quantity if up_to is None else min(quantity, float(up_to))
        if top > floor:
            if price is None:
                return None
            total += (top - floor) * price
        if up_to is None or quantity <= up_to:
            break
        floor = float(up_to)
    return total


def estimate_cell(
    *,
    instance_type: str,
    storage: StorageSpec,
    fleet_size: int,
    slot_seconds: float,
    region: str,
    populate: bool = False,
    workloads_per_slot: int = 1,
    prices: Mapping[str, Any] | None = None,
    efs_transfer: EfsTransfer | None = None,
) -> Estimate:
    """Cost of one cell: `fleet_size` instances (and volumes) for `slot_seconds` each.

    `prices`: the region's rates (default: the shipped table's for `region`).
    `efs_transfer`: one slot's bytes read and written on an elastic EFS (efs_transfer());
    None: not estimated (named in `unknown`)."""
    prices = _region_prices(region) if prices is None else prices
    assumptions = price_table()["assumptions"]
    est = Estimate()
    hours = slot_seconds / 3600.0
    if populate:
        hours_populate = assumptions["populate_overhead_s"] / 3600.0
    else:
        hours_populate = 0.0
    instance_hours = fleet_size * hours + hours_populate
    est.add(
        f"ec2 {instance_type}",
        instance_hours,
        "instance-hours",
        _get(prices, "ec2_hourly", instance_type),
    )
    if storage.is_ebs:
        ebs = _get(prices, "ebs", storage.type) or {}
        months = fleet_size * hours / HOURS_PER_MONTH
        size = float(storage.size_gib or 0)
        est.add(f"ebs {storage.type} storage", size * months, "GiB-months", ebs.get("gib_month"))
        if storage.type == "gp3":
            extra_iops = max(0.0, float(storage.iops or 0) - ebs.get("free_iops", 3000))
            est.add("ebs gp3 iops", extra_iops * months, "IOPS-months", ebs.get("iops_month"))
            extra_mibps = max(
                0.0, float(storage.throughput_mibps or 0) - ebs.get("free_mibps", 125)
            )
            est.add(
                "ebs gp3 throughput", extra_mibps * months, "MiBps-months", ebs.get("mibps_month")
            )
        elif storage.type in ("io1", "io2") and storage.iops:
            monthly = _tiered(float(storage.iops), ebs.get("iops_month_tiers"))
            est.add(
                f"ebs {storage.type} iops",
                months,
                f"volume-months at {storage.iops:g} IOPS",
                monthly,
            )
    elif storage.type == "efs":
        efs = prices.get("efs") or {}
        months = (hours + hours_populate) / HOURS_PER_MONTH
        if storage.throughput_mode == "provisioned" and storage.throughput_mibps:
            est.add(
                "efs provisioned throughput",
                float(storage.throughput_mibps) * months,
                "MiBps-months",
                efs.get("provisioned_mibps_month"),
            )
        if storage.size_gib:
            est.add(
                "efs standard storage",
                float(storage.size_gib) * months,
                "GiB-months",
                efs.get("standard_gib_month"),
            )
        if storage.throughput_mode == "elastic":
            if efs_transfer is None or efs_transfer.unknown:
                why = efs_transfer.unknown if efs_transfer else "not estimated"
                est.unknown.append(f"efs elastic throughput (per GiB transferred; {why})")
            else:
                est.add(
                    "efs elastic reads",
                    efs_transfer.read_bytes * fleet_size / GIB,
                    "GiB",
                    efs.get("elastic_read_gib"),
                )
                est.add(
                    "efs elastic writes",
                    efs_transfer.write_bytes * fleet_size / GIB,
                    "GiB",
                    efs.get("elastic_write_gib"),
                )
        elif storage.throughput_mode is None:  # an existing file system, modes not known
            est.unknown.append(
                "efs transfer charges (billed per GiB if the existing file system is "
                "elastic; its throughput mode is not known offline)"
            )
    elif storage.type in ("fsx-openzfs", "fsx-lustre"):
        from iofleet.plan import fsx

        fsx.add_cost(
            est,
            storage,
            (hours + hours_populate) / HOURS_PER_MONTH,
            prices,
            _get(price_table(), "sections", storage.type, "unknown_reason"),
        )
    # orchestration and ingest
    sfn = _get(prices, "stepfunctions", "standard_transition")
    transitions = (
        assumptions["stepfunctions_transitions_per_cell"]
        + assumptions["stepfunctions_transitions_per_slot"] * fleet_size
    )
    est.add("step functions transitions", transitions, "transitions", sfn)
    invocations = fleet_size * (
        workloads_per_slot + assumptions["lambda_invocations_per_slot_extra"]
    )
    gb_seconds = (
        invocations * assumptions["lambda_gb"] * assumptions["lambda_seconds_per_invocation"]
    )
    est.add("lambda requests", invocations, "requests", _get(prices, "lambda", "request"))
    est.add("lambda compute", gb_seconds, "GB-seconds", _get(prices, "lambda", "gb_second"))
    return est


def estimate_run_overhead(region: str, prices: Mapping[str, Any] | None = None) -> Estimate:
    """Per-run costs not tied to a cell: the state machine's own steps, Athena views."""
    prices = _region_prices(region) if prices is None else prices
    assumptions = price_table()["assumptions"]
    est = Estimate()
    est.add(
        "step functions transitions (run)",
        assumptions["stepfunctions_transitions_per_run"],
        "transitions",
        _get(prices, "stepfunctions", "standard_transition"),
    )
    athena = prices.get("athena") or {}
    mb = max(assumptions["athena_mb_per_query"], athena.get("min_mb_per_query", 10))
    tb = assumptions["athena_queries_per_run"] * mb / 1024 / 1024
    est.add("athena scans", tb, "TB scanned", athena.get("tb_scanned"))
    return est


def table_info(region: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    table = price_table()
    return {
        "region": region,
        "prices_as_of": table["as_of"],
        "known_region": region in table["regions"],
        "currency": table["currency"],
        "matrix_prices": summary(overrides, region),
    }


def slot_seconds(fio_s: float, burst_wait_s: float, other_s: float = 0.0) -> float:
    """Billable seconds of one slot: setup overhead + waits + workloads (60 s minimum)."""
    overhead = float(price_table()["assumptions"]["slot_overhead_s"])
    return max(60.0, overhead + burst_wait_s + fio_s + other_s)


# ------------------------------------------------------------------ plan level


def plan_annotations(plan: Any, region: str | None = None) -> dict[str, Any]:
    """Per cell: `expected`, `warnings`, cost; plus the run's total and its budget.

    `plan` is an iofleet.plan.matrix.Plan (duck-typed: .matrix, .target, .cells).
    """
    from iofleet.plan.expect import CellContext, _expect_cell, sources, storage_spec

    region = region or default_region()
    matrix = plan.matrix
    overrides = getattr(matrix, "prices", None)
    prices = _region_prices(region, overrides)
    policy = getattr(matrix, "burst_policy", "as-is")
    budget = getattr(matrix.limits, "budget_usd", None)
    aws = plan.target == "aws"
    cells: list[dict[str, Any]] = []
    total = 0.0
    unknown: list[str] = []
    for cell in plan.cells:
        payloads = cell.workload_payloads()
        spec = storage_spec(cell.storage)
        expected, warnings, timings, actions = _expect_cell(
            CellContext(cell.instance_type, spec, cell.fleet_size, policy), payloads
        )
        applies = aws and spec.is_ebs
        if not aws:
            # local storage has no published ceiling: one run-level note, not two per cell
            warnings = [w for w in warnings if not _no_ceiling_warning(w)]
        elif policy != "as-is" and not applies:
            warnings.append(f"burst_policy {policy}: applies to EBS on AWS only; ignored here")
        if aws and spec.type == "fsx-openzfs":
            from iofleet.plan import fsx

            warnings += fsx.region_warnings(spec, region)
        if aws and spec.type == "s3express-mountpoint":
            from iofleet.plan.mountpoint import express_zone_warnings

            warnings += express_zone_warnings(getattr(cell.storage, "az_id", None), region)
        entry: dict[str, Any] = {
            "expected": expected,
            "warnings": warnings,
            # the slot payload's "burst" (docs/expectations.md): what the agent does
            "burst": {"policy": policy, "actions": actions if applies else []},
        }
        if aws:
            other = 0.0
            for p in payloads:
                if p["kind"] == "ioping":
                    other += p.get("count", 0) * p.get("interval_ms", 0) / 1000.0
                elif p["kind"] == "app":
                    other += float(getattr(matrix, "slot_timeout_s", 0))
            est = estimate_cell(
                instance_type=cell.instance_type,
                storage=spec,
                fleet_size=cell.fleet_size,
                slot_seconds=slot_seconds(timings["fio_s"], timings["burst_wait_s"], other),
                region=region,
                populate=any(p["kind"] == "app" and p.get("populate") for p in payloads),
                workloads_per_slot=len(payloads),
                prices=prices,
                efs_transfer=(
                    efs_transfer(expected, payloads)
                    if spec.type == "efs" and spec.throughput_mode == "elastic"
                    else None
                ),
            )
            from iofleet.plan import mountpoint

            if spec.type in mountpoint.MOUNTPOINT_TYPES:  # S3 requests and storage, estimated
                seconds = slot_seconds(timings["fio_s"], timings["burst_wait_s"], other)
                mountpoint.add_cost(est, spec.type, payloads, cell.fleet_size, seconds, prices)
            if any(p["kind"] == "app" for p in payloads):
                warnings.append("app run time unknown: the estimate takes slot_timeout_s per app")
            entry.update(
                {
                    "estimated_cost_usd": est.usd,
                    "cost": est.to_dict(),
                    "slot_seconds": round(
                        slot_seconds(timings["fio_s"], timings["burst_wait_s"], other), 1
                    ),
                }
            )
            total += est.usd
            unknown += [f"{cell.cell_id}: {u}" for u in est.unknown]
        else:
            entry["estimated_cost_usd"] = 0.0
        cells.append(entry)
    run: dict[str, Any] = {"sources": sources()}
    if aws:
        overhead = estimate_run_overhead(region, prices)
        total += overhead.usd
        unknown += [f"run: {u}" for u in overhead.unknown]
        run.update(
            {
                **table_info(region, overrides),
                "estimated_cost_usd": round(total, 4),
                "cost_complete": not unknown,
                "cost_unknown": unknown,
                "run_overhead": overhead.to_dict(),
            }
        )
    else:
        run.update({"estimated_cost_usd": 0.0, "cost_note": "local run: no AWS cost"})
        run["notes"] = [LOCAL_NOTE] + (
            [f"burst_policy {policy}: applies to EBS on AWS only; ignored here"]
            if policy != "as-is"
            else []
        )
    run["budget_usd"] = budget
    run["burst_policy"] = policy
    return {"run": run, "cells": cells}


LOCAL_NOTE = (
    "local storage has no published ceiling: expected IOPS/throughput are unknown "
    "(limited_by unknown) and the report shows no expected-vs-measured block"
)


def _no_ceiling_warning(warning: str) -> bool:
    return warning.endswith(": no published ceiling") or warning.endswith(
        "no figure for storage: limited_by unknown"
    )


def budget_problem(plan: Any, region: str | None = None) -> str | None:
    """The `limits.budget_usd` message if the plan's estimate exceeds the budget."""
    budget = getattr(plan.matrix.limits, "budget_usd", None)
    if budget is None or plan.target != "aws":
        return None
    run = plan_annotations(plan, region)["run"]
    mine = run.get("matrix_prices") or {}
    if not run["known_region"] and not mine.get("sections"):
        return (
            f"no prices for {run['region']} (the shipped table has "
            f"{', '.join(sorted(price_table()['regions']))}): the budget cannot be checked; "
            "give the region's rates in the matrix's prices, or leave budget_usd out"
        )
    estimate = run["estimated_cost_usd"]
    unknown = run["cost_unknown"]
    if estimate <= budget and unknown:
        # a budget is a cap: a sum of the known items could pass and the run cost more
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        return (
            f"the estimate ({usd_text(estimate)} in {run['region']}) leaves out {unknown[0]}"
            f"{more}: the budget cannot be checked; give missing rates in the matrix's "
            "prices, or leave budget_usd out"
        )
    if estimate <= budget:
        return None
    more = " (known prices only; some are unknown)" if unknown else ""
    return (
        f"plan estimated at {usd_text(estimate)}{more} in {run['region']} "
        f"(prices as of {run['prices_as_of']}{_matrix_prices_text(run)}), "
        f"over the budget of {usd_text(budget)}"
    )


def usd_text(amount: float) -> str:
    """`$1,234.56`; an amount under a cent keeps two significant digits (`$0.0031`), so a
    budget of a fraction of a cent and the estimate over it never both read `$0.00`."""
    if amount == 0 or abs(amount) >= 0.005:
        return f"${amount:,.2f}"
    digits = 1 - math.floor(math.log10(abs(amount)))
    return f"${amount:.{digits}f}"


def _matrix_prices_text(run: Mapping[str, Any]) -> str:
    mine = run.get("matrix_prices")
    if not mine:
        return ""
    if not mine["sections"]:
        return (
            f"; the matrix's prices are for {', '.join(mine['regions'])}, none for {run['region']}"
        )
    return (
        f"; {', '.join(mine['sections'])} from the matrix's prices as of {mine['as_of']}: "
        f"{mine['source']}"
    )


def render_annotations(plan: Any, region: str | None = None) -> str:
    """Text for `iofleet plan` (table format): expectations, warnings and cost."""
    notes = plan_annotations(plan, region)
    if plan.target != "aws":
        lines = ["", *(f"note: {n}" for n in notes["run"].get("notes", []))]
        for cell, entry in zip(plan.cells, notes["cells"], strict=True):
            lines += [f"  {cell.cell_id}: ! {w}" for w in entry["warnings"]]
        return "\n".join(lines)
    out: list[str] = ["", f"expected ceilings (burst_policy {notes['run']['burst_policy']}):"]
    for cell, entry in zip(plan.cells, notes["cells"], strict=True):
        cost = entry.get("cost")
        cost_text = ""
        if cost is not None:
            cost_text = f"  ~${entry['estimated_cost_usd']:,.2f}"
            if not cost["complete"]:
                cost_text += " + unknown"
        out.append(f"  {cell.cell_id}{cost_text}")
        for e in entry["expected"]:
            iops = "?" if e["expected_iops"] is None else f"{e['expected_iops']:,.0f}"
            bw = e["expected_bw_bytes"]
            mibs = "?" if bw is None else f"{bw / 1048576:,.1f}"
            burst = ""
            if e["seconds_to_exhaust"] is not None:
                burst = f", burst empties after ~{e['seconds_to_exhaust']:,.0f} s"
            out.append(
                f"    w{e['workload_index']:02d} {e['job']} {e['direction']}: "
                f"{iops} IOPS, {mibs} MiB/s, limited by {e['limited_by']}{burst}"
            )
        for w in entry["warnings"]:
            out.append(f"    ! {w}")
    run = notes["run"]
    if plan.target == "aws":
        line = (
            f"estimated cost: ${run['estimated_cost_usd']:,.2f} in {run['region']} "
            f"(prices as of {run['prices_as_of']}{_matrix_prices_text(run)})"
        )
        if not run["cost_complete"]:
            line += f"; unknown: {len(run['cost_unknown'])} item(s), not included"
        if run["budget_usd"] is not None:
            line += f"; budget {usd_text(run['budget_usd'])}"
        out.append(line)
    return "\n".join(out)
