"""The decision table: which configuration to buy, at which fleet size, with which tail.

A configuration is a cell without its repeat (`CONFIG_FIELDS`: instance type x
storage x fleet size); its repeats are pooled (every slot of every repeat is one
sample, as in `iofleet compare`). Per workload:

- the configurations ranked by the chosen metric's statistic across slots
  (default P50 of IOPS for fio, of the median latency for ioping, of the wall
  time for an app; a `--target` condition on the workload's metric chooses both),
  beside their cost from the plan (`cell_costs`, iofleet/plan/cost.py: per run, per
  instance-hour) and per outcome: $ per 1k IOPS (the run's cost over the
  fleet's aggregate IOPS / 1000, fleet IOPS = the sum of its slots' IOPS, mean
  over repeats) and $ per build (the run's cost over its successful builds);
- whether each meets the target, and the cheapest per slot that does (ties:
  the better metric);
- the cost-performance Pareto front: configurations no other one beats on both
  cost per slot (the run's cost / fleet size: what one instance's measurement,
  one build, costs, so fleets of different sizes compare fairly) and the ranked
  per-slot statistic (unknown cost: never on the front). "Cheapest" is by cost
  per slot too.

With two or more fleet sizes: the seed-004 pivot (storage rows x fleet-size
columns, P0..P100 of the metric per cell of the pivot) and the scaling curve of
the per-slot statistic with its knee (`knee`: the largest fleet size before
per-slot performance is more than KNEE_DROP worse than at the smallest fleet
size; docs/decisions.md).

The target grammar (`parse_target`), strict by design:

    TARGET     := CONDITION (" and " CONDITION)*
    CONDITION  := STAT "_" METRIC OP NUMBER [UNIT]
    STAT       := p0 | p50 | p75 | p90 | p98 | p100 | mean
    OP         := <= | < | >= | >
    NUMBER     := digits [ "." digits ]

METRIC and its unit: `TARGET_METRICS` (a unit is required where the metric has
several, refused where it has one fixed by its name). Plain Python (no numpy): the
Summarize Lambda renders the decision table.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from iofleet.errors import UsageError
from iofleet.quote import quote

STATS: dict[str, float | None] = {
    "p0": 0.0,
    "p50": 50.0,
    "p75": 75.0,
    "p90": 90.0,
    "p98": 98.0,
    "p100": 100.0,
    "mean": None,
}
PCT_NAMES = ("p0", "p50", "p75", "p90", "p98", "p100")
OPS = ("<=", ">=", "<", ">")
RATE_UNITS = {
    "B/s": 1.0,
    "KB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "KiB/s": 1024.0,
    "MiB/s": 1024.0**2,
    "GiB/s": 1024.0**3,
}
TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
KNEE_DROP = 0.10
"""Per-slot performance more than 10% worse than at the smallest fleet size: past the knee."""


@dataclass(frozen=True)
class TargetMetric:
    source: str  # slot_metrics metric_source: fio | ioping | app
    metric: str  # slot_metrics metric
    scale: float | None = None  # the value's unit is fixed by the name: value x scale
    units: Mapping[str, float] | None = None  # else the unit is required, one of these
    doc: str = ""


TARGET_METRICS: dict[str, TargetMetric] = {
    "build_minutes": TargetMetric("app", "wall_seconds", 60.0, doc="app run wall time, minutes"),
    "build_seconds": TargetMetric("app", "wall_seconds", 1.0, doc="app run wall time, seconds"),
    "iops": TargetMetric("fio", "iops", 1.0, doc="fio IOPS per slot"),
    "throughput": TargetMetric("fio", "bw_bytes", units=RATE_UNITS, doc="fio bytes/s per slot"),
    "clat_mean": TargetMetric("fio", "clat_mean_ns", units=TIME_UNITS, doc="completion latency"),
    "clat_p50": TargetMetric("fio", "clat_p50_ns", units=TIME_UNITS),
    "clat_p90": TargetMetric("fio", "clat_p90_ns", units=TIME_UNITS),
    "clat_p99": TargetMetric("fio", "clat_p99_ns", units=TIME_UNITS),
    "clat_p99_9": TargetMetric("fio", "clat_p99_9_ns", units=TIME_UNITS),
    "clat_max": TargetMetric("fio", "clat_max_ns", units=TIME_UNITS),
    "ioping_min": TargetMetric("ioping", "lat_min_ns", units=TIME_UNITS, doc="ioping latency"),
    "ioping_median": TargetMetric("ioping", "lat_median_ns", units=TIME_UNITS),
    "ioping_mean": TargetMetric("ioping", "lat_mean_ns", units=TIME_UNITS),
    "ioping_max": TargetMetric("ioping", "lat_max_ns", units=TIME_UNITS),
}
HIGHER_IS_BETTER = frozenset({"iops", "bw_bytes"})
DEFAULT_METRIC = {
    "fio": ("iops", "bw_bytes"),
    "ioping": ("lat_median_ns",),
    "app": ("wall_seconds",),
}
CONFIG_FIELDS = ("instance_type", "storage_label", "storage_type", "storage_detail", "fleet_size")
WORKLOAD_FIELDS = ("metric_source", "workload_index", "workload", "job", "direction")

DECISION_COLUMNS = (
    "run_id",
    *WORKLOAD_FIELDS,
    "rank",
    *CONFIG_FIELDS,
    "repeats",
    "slots",
    "metric",
    "unit",
    "stat",
    "value",
    *PCT_NAMES,
    "mean",
    "usd_per_run",
    "usd_per_slot",
    "usd_per_instance_hour",
    "usd_per_1k_iops",
    "usd_per_build",
    "cost_complete",
    "meets_target",
    "cheapest_meeting_target",
    "pareto",
)
PIVOT_COLUMNS = (
    "run_id",
    *WORKLOAD_FIELDS,
    "instance_type",
    "storage_label",
    "storage_type",
    "storage_detail",
    "fleet_size",
    "metric",
    "unit",
    "repeats",
    "slots",
    *PCT_NAMES,
)
SCALING_COLUMNS = (
    "run_id",
    *WORKLOAD_FIELDS,
    "instance_type",
    "storage_label",
    "storage_type",
    "storage_detail",
    "fleet_size",
    "metric",
    "unit",
    "stat",
    "value",
    "change",
    "past_knee",
    "knee_fleet_size",
    "knee_found",
)


@dataclass(frozen=True)
class Condition:
    text: str
    stat: str
    name: str
    op: str
    # in the metric's warehouse unit (ns, B/s, s, IOPS): the double nearest the decimal as
    # written times its unit (1.001 us is 1001.0 ns, where the float product is
    # 1000.9999999999999), so a measured value equal to the target, as the report prints
    # it, meets it
    value: float

    @property
    def spec(self) -> TargetMetric:
        return TARGET_METRICS[self.name]

    def holds(self, measured: float) -> bool:
        return {
            "<=": measured <= self.value,
            "<": measured < self.value,
            ">=": measured >= self.value,
            ">": measured > self.value,
        }[self.op]


_COND = re.compile(
    r"(?P<stat>[a-z0-9]+)_(?P<name>[a-z0-9_]+?)[ ]*(?P<op><=|>=|<|>)[ ]*"
    r"(?P<num>[0-9]+(?:\.[0-9]+)?)[ ]*(?P<unit>[A-Za-z/]+)?",
    re.ASCII,
)


def parse_target(text: str) -> list[Condition]:
    """`--target` text -> its conditions; UsageError (`--target: ...`, exit 2) when bad."""

    def bad(message: str) -> UsageError:
        return UsageError(f"--target: {message}")

    if not text or not text.strip():
        raise bad("empty; expected e.g. 'p98_build_minutes<=105'")
    out = []
    # `and` in any case, between blanks or at either end: a dangling one leaves an empty part
    for part in re.split(r"(?:^|[ ]+)and(?=[ ]|$)", text.strip(), flags=re.IGNORECASE):
        part = part.strip()
        if not part:
            raise bad(f"{quote(text)}: 'and' needs a condition on each side")
        said = quote(part)  # the condition as each refusal below quotes it
        m = _COND.fullmatch(part)
        if not m:
            raise bad(
                f"{said} is not STAT_METRIC OP NUMBER [UNIT] "
                "(e.g. 'p98_build_minutes<=105', 'p50_throughput>=200MiB/s')"
            )
        stat, name, op, unit = m["stat"], m["name"], m["op"], m["unit"]
        if stat not in STATS:
            raise bad(f"{said}: unknown statistic {quote(stat)} (known: {', '.join(STATS)})")
        if name not in TARGET_METRICS:
            raise bad(f"{said}: unknown metric {quote(name)} (known: {', '.join(TARGET_METRICS)})")
        spec = TARGET_METRICS[name]
        number = float(m["num"])
        if spec.units is None:
            if unit is not None:
                raise bad(f"{said}: {name} takes no unit (its unit is in its name)")
            factor = spec.scale or 1.0
        else:
            if unit is None or unit not in spec.units:
                raise bad(f"{said}: {name} needs a unit, one of {', '.join(spec.units)}")
            factor = spec.units[unit]
        if not math.isfinite(number * factor):
            raise bad(f"{said}: the number is too large")
        # every factor is a whole number: the product is exact, then rounded once
        value = float(Fraction(m["num"]) * Fraction(factor))
        out.append(Condition(part, stat, name, op, value))
    return out


# --------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], p: float) -> float:
    """numpy.percentile(values, p) (method "linear"), computed as numpy does, in plain
    Python: the Summarize Lambda renders the decision table without numpy. Virtual
    index (n - 1) x p/100, then numpy's two-sided lerp (from the upper neighbour when
    the fraction is >= 0.5), so the result is numpy's to the bit (tests/unit/test_decide.py)."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise ValueError("percentile of no values")
    index = (len(ordered) - 1) * (p / 100)
    below = math.floor(index)
    above = min(below + 1, len(ordered) - 1)
    a, b = ordered[below], ordered[above]
    t = index - below
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def stat_value(values: Sequence[float], stat: str) -> float:
    p = STATS[stat]
    if p is None:
        return math.fsum(values) / len(values)
    return percentile(values, p)


def better(a: float, b: float, higher: bool) -> bool:
    """a strictly better than b."""
    return a > b if higher else a < b


def pareto_front(points: Sequence[tuple[float | None, float]], higher: bool) -> list[bool]:
    """Per (cost, performance) point: on the front (no other point has cost <= and
    performance at least as good, one of them strictly). Unknown cost: False."""
    out = []
    for i, (cost, perf) in enumerate(points):
        if cost is None or math.isnan(perf):
            out.append(False)
            continue
        dominated = False
        for j, (c2, p2) in enumerate(points):
            if j == i or c2 is None or math.isnan(p2):
                continue
            no_worse = c2 <= cost and (p2 >= perf if higher else p2 <= perf)
            strictly = c2 < cost or better(p2, perf, higher)
            if no_worse and strictly:
                dominated = True
                break
        out.append(not dominated)
    return out


def knee(
    points: Sequence[tuple[int, float]], higher: bool, drop: float = KNEE_DROP
) -> tuple[int | None, bool]:
    """(fleet size, value) points -> (knee fleet size, found). The knee is the largest
    fleet size before the first one whose value is more than `drop` worse than the
    smallest fleet size's; found=False: no such drop (the knee is at least the
    largest size measured, which is returned). (None, False): fewer than two sizes
    or a zero baseline."""
    pts = sorted(points)
    if len(pts) < 2 or pts[0][1] == 0:
        return None, False
    base = pts[0][1]
    prev = pts[0][0]
    for size, value in pts[1:]:
        change = (base - value) / abs(base) if higher else (value - base) / abs(base)
        if change > drop:
            return prev, True
        prev = size
    return prev, False


# --------------------------------------------------------------------- the table


def _key(row: Mapping[str, Any], fields: Sequence[str]) -> tuple[Any, ...]:
    return tuple(row.get(f) for f in fields)


def _sort_key(value: Any) -> tuple[bool, str]:
    return (
        value is None,
        "" if value is None else f"{value:>20}" if isinstance(value, int) else str(value),
    )


def _applies(cond: Condition, source: str, metrics: Iterable[str]) -> bool:
    return cond.spec.source == source and cond.spec.metric in set(metrics)


def check_target_measured(
    conditions: Sequence[Condition], rows: Sequence[Mapping[str, Any]]
) -> None:
    """UsageError when a condition's metric is measured by no workload of the run."""
    have = {(r["metric_source"], r["metric"]) for r in rows}
    for c in conditions:
        if (c.spec.source, c.spec.metric) not in have:
            measured = sorted(n for n, s in TARGET_METRICS.items() if (s.source, s.metric) in have)
            raise UsageError(
                f"--target: {quote(c.text)}: this run measured no {c.name} "
                f"(its metrics: {', '.join(measured) or 'none'})"
            )


def decide(
    slot_values: Sequence[Mapping[str, Any]],
    costs: Mapping[str, Mapping[str, Any]],
    conditions: Sequence[Condition] = (),
) -> dict[str, list[dict[str, Any]]]:
    """slot_values rows of one run + cell_costs rows by cell_id -> {"decision": rows,
    "pivot": rows, "scaling": rows} (DECISION_COLUMNS, PIVOT_COLUMNS, SCALING_COLUMNS)."""
    by_workload: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in slot_values:
        by_workload[_key(r, WORKLOAD_FIELDS)].append(r)
    decision: list[dict[str, Any]] = []
    pivot: list[dict[str, Any]] = []
    scaling: list[dict[str, Any]] = []
    for wkey in sorted(by_workload, key=lambda k: tuple(_sort_key(v) for v in (k[1], *k))):
        rows = by_workload[wkey]
        source = wkey[0]
        metrics = {r["metric"] for r in rows}
        applying = [c for c in conditions if _applies(c, source, metrics)]
        if applying:
            metric, stat = applying[0].spec.metric, applying[0].stat
        else:
            default = next((m for m in DEFAULT_METRIC.get(source, ()) if m in metrics), None)
            if default is None:
                continue
            metric, stat = default, "p50"
        higher = metric in HIGHER_IS_BETTER
        configs = _configs(rows, costs, metric)
        wl = dict(zip(WORKLOAD_FIELDS, wkey, strict=True))
        run_id = rows[0].get("run_id")
        out = []
        for cfg, info in configs.items():
            values = info["values"][metric]
            pcts = {n: stat_value(values, n) for n in PCT_NAMES}
            meets = None
            if applying:
                meets = all(
                    c.spec.metric in info["values"]
                    and c.holds(stat_value(info["values"][c.spec.metric], c.stat))
                    for c in applying
                )
            out.append(
                {
                    "run_id": run_id,
                    **wl,
                    **dict(zip(CONFIG_FIELDS, cfg, strict=True)),
                    "repeats": len(info["repeats"]),
                    "slots": len(values),
                    "metric": metric,
                    "unit": info["unit"].get(metric),
                    "stat": stat,
                    "value": stat_value(values, stat),
                    **pcts,
                    "mean": stat_value(values, "mean"),
                    **info["cost"],
                    "meets_target": meets,
                    "cheapest_meeting_target": False,
                }
            )
        out.sort(key=lambda r: (-r["value"] if higher else r["value"], _cfg_sort(r)))
        for rank, r in enumerate(out, 1):
            r["rank"] = rank
        front = pareto_front([(r["usd_per_slot"], r["value"]) for r in out], higher)
        for r, on in zip(out, front, strict=True):
            r["pareto"] = on
        meeting = [r for r in out if r["meets_target"] and r["usd_per_slot"] is not None]
        if meeting:
            best = min(meeting, key=lambda r: (r["usd_per_slot"], r["rank"]))
            best["cheapest_meeting_target"] = True
        decision += [{c: r.get(c) for c in DECISION_COLUMNS} for r in out]
        sizes = {r["fleet_size"] for r in out if r["fleet_size"] is not None}
        if len(sizes) >= 2:
            p, s = _pivot_and_scaling(out, higher)
            pivot += p
            scaling += s
    return {"decision": decision, "pivot": pivot, "scaling": scaling}


def _cfg_sort(r: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(_sort_key(r.get(f)) for f in CONFIG_FIELDS)


def _configs(
    rows: Sequence[Mapping[str, Any]], costs: Mapping[str, Mapping[str, Any]], metric: str
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per configuration: pooled values per metric, repeats (cell ids) and its cost."""
    configs: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        info = configs.setdefault(
            _key(r, CONFIG_FIELDS),
            {"values": defaultdict(list), "unit": {}, "repeats": {}, "per_cell": defaultdict(list)},
        )
        info["values"][r["metric"]].append(float(r["value"]))
        info["unit"][r["metric"]] = r.get("unit")
        info["repeats"][r["cell_id"]] = r.get("repeat")
        info["per_cell"][(r["cell_id"], r["metric"])].append(float(r["value"]))
    for cfg, info in list(configs.items()):
        if metric not in info["values"]:
            del configs[cfg]
            continue
        info["cost"] = _cost(info, costs, fleet_size=cfg[-1])
    return configs


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _cost(
    info: Mapping[str, Any], costs: Mapping[str, Mapping[str, Any]], fleet_size: int | None
) -> dict[str, Any]:
    cells = list(info["repeats"])
    known = [
        costs[c] for c in cells if c in costs and costs[c].get("estimated_cost_usd") is not None
    ]
    out: dict[str, Any] = {
        "usd_per_run": None,
        "usd_per_slot": None,
        "usd_per_instance_hour": None,
        "usd_per_1k_iops": None,
        "usd_per_build": None,
        "cost_complete": None,
    }
    if len(known) != len(cells):
        return out
    usd = _mean([float(c["estimated_cost_usd"]) for c in known])
    assert usd is not None
    out["usd_per_run"] = usd
    if fleet_size:
        out["usd_per_slot"] = usd / fleet_size
    out["cost_complete"] = all(c.get("cost_complete") is not False for c in known)
    seconds = [c.get("slot_seconds") for c in known]
    if fleet_size and all(s for s in seconds):
        hours = fleet_size * _mean([float(s) for s in seconds]) / 3600.0  # type: ignore[arg-type, operator]
        out["usd_per_instance_hour"] = usd / hours
    elif usd == 0.0:
        out["usd_per_instance_hour"] = 0.0
    per_cell = info["per_cell"]
    fleet_iops = _mean([sum(per_cell[(c, "iops")]) for c in cells if (c, "iops") in per_cell])
    if fleet_iops:
        out["usd_per_1k_iops"] = usd / (fleet_iops / 1000.0)
    builds = _mean(
        [len(per_cell[(c, "wall_seconds")]) for c in cells if (c, "wall_seconds") in per_cell]
    )
    if builds:
        out["usd_per_build"] = usd / builds
    return out


def _pivot_and_scaling(
    out: Sequence[Mapping[str, Any]], higher: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    storage_fields = ("instance_type", "storage_label", "storage_type", "storage_detail")
    by_storage: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in out:
        by_storage[_key(r, storage_fields)].append(r)
    pivot, scaling = [], []
    for skey in sorted(by_storage, key=lambda k: tuple(_sort_key(v) for v in k)):
        rows = sorted(by_storage[skey], key=lambda r: r["fleet_size"] or 0)
        for r in rows:
            pivot.append({c: r.get(c) for c in PIVOT_COLUMNS})
        pts = [(int(r["fleet_size"]), float(r["value"])) for r in rows if r["fleet_size"]]
        knee_size, found = knee(pts, higher)
        base = pts[0][1] if pts else None
        for r in rows:
            change = None
            if base:
                change = (float(r["value"]) - base) / abs(base)
            past = (
                found and knee_size is not None and r["fleet_size"] is not None
                and r["fleet_size"] > knee_size
            )  # fmt: skip
            scaling.append(
                {
                    **{c: r.get(c) for c in SCALING_COLUMNS if c in r},
                    "change": change,
                    "past_knee": past,
                    "knee_fleet_size": knee_size,
                    "knee_found": found,
                }
            )
    return pivot, [{c: s.get(c) for c in SCALING_COLUMNS} for s in scaling]
