"""queries/decision.sql (the QuickSight dashboard's data set) against the report's own
decision table (iofleet.results.decide) on the same warehouse: same ranks, same pooled
percentiles (numpy's linear interpolation), same cost per run, slot, instance-hour, 1k
IOPS and build, the same Pareto front, and, for a target, the same rows meeting it and
the same cheapest one (as the dashboard's calculated fields pick them). DuckDB runs the
query; tests/cloud/test_athena_report.py runs it on Trino."""

from __future__ import annotations

import random
from typing import Any

import pytest

from iofleet.report.decision import load_decision
from iofleet.results.decide import PCT_NAMES
from iofleet.results.source import named_query
from iofleet.results.warehouse import Warehouse

RUN = "dq-20261121t051200z"
CONFIG = ("instance_type", "storage_label", "storage_type", "storage_detail", "fleet_size")


def _warehouse(seed: int) -> Warehouse:
    """Random cells: 3 storages x fleets of 1, 3 and 4 x 1-3 repeats; fio IOPS and an app's
    wall time per slot (some ties), plan costs on all cells but one storage's."""
    rng = random.Random(seed)
    wh = Warehouse(":memory:")
    slots, fio, app, costs = [], [], [], []
    index = 0
    for label, base in (("gp3", 3000.0), ("io2", 3100.0), ("efs", 2900.0)):
        for fleet in (1, 3, 4):
            for repeat in range(1, rng.randint(1, 3) + 1):
                cell = f"c{index:03d}-{label}-x{fleet}-r{repeat}"
                for s in range(fleet):
                    slots.append(
                        {
                            "run_id": RUN, "cell_id": cell, "slot_index": s, "cell_index": index,
                            "instance_type": "m6i.large", "storage_label": label,
                            "storage_type": "ebs", "storage_detail": label,
                            "fleet_size": fleet, "repeat": repeat, "status": "SUCCEEDED",
                        }
                    )  # fmt: skip
                    iops = float(rng.choice([base, base + rng.randint(-300, 300) + rng.random()]))
                    fio.append(
                        {
                            "run_id": RUN, "cell_id": cell, "slot_index": s, "workload_index": 0,
                            "workload": "randread", "job": "randread", "job_index": 0,
                            "direction": "read", "iops": iops, "bw_bytes": int(iops * 16384),
                            "error": 0, "clat_mean_ns": rng.uniform(1e5, 9e5),
                        }
                    )  # fmt: skip
                    app.append(
                        {
                            "run_id": RUN, "cell_id": cell, "slot_index": s, "workload_index": 1,
                            "app": "build", "phase": "run", "exit_code": 0,
                            "wall_seconds": round(rng.uniform(50, 90), rng.choice([0, 3])),
                        }
                    )  # fmt: skip
                if label != "efs":
                    costs.append(
                        {
                            "run_id": RUN, "cell_id": cell,
                            "estimated_cost_usd": rng.uniform(0.01, 2.0) * fleet,
                            "slot_seconds": 600.0, "cost_complete": True,
                        }
                    )  # fmt: skip
                index += 1
    for table, rows in (("slots", slots), ("fio_results", fio), ("app_runs", app)):
        wh.insert_rows(table, rows)
    wh.insert_rows("cell_costs", costs)
    return wh


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["metric_source"], r["workload_index"], r["metric"], *(r[f] for f in CONFIG))


@pytest.mark.parametrize("seed", range(6))
def test_decision_query_ranks_and_prices_as_the_report_does(seed: int) -> None:
    with _warehouse(seed) as wh:
        # when: the dashboard's query and the report's decision table read one warehouse
        rows = named_query(wh, "decision", [RUN], 'workload_index, metric, "rank"')
        report = load_decision(wh, RUN)["decision"]
    ranked = [r for r in rows if r["ranked"] and r["stat"] == "p50"]
    # then: the ranked rows at P50 are the report's rows, rank for rank, to the bit
    assert {r["metric"] for r in ranked} == {"iops", "wall_seconds"}
    assert [_key(r) for r in ranked] == [_key(r) for r in report]
    for got, want in zip(ranked, report, strict=True):
        assert got["rank"] == want["rank"]
        assert (got["slots"], got["repeats"], got["unit"]) == (
            want["slots"], want["repeats"], want["unit"],
        )  # fmt: skip
        for p in PCT_NAMES:
            assert got[p] == want[p], (p, got, want)
        for usd in ("usd_per_run", "usd_per_slot"):
            if want[usd] is None:
                assert got[usd] is None
            else:
                assert got[usd] == pytest.approx(want[usd], rel=1e-12)
    # and: every other metric has its own ladder and rank per configuration
    assert {r["metric"] for r in rows} >= {"bw_bytes", "clat_mean_ns"}
    assert all(r["configuration"].endswith(" m6i.large") for r in rows)


def test_chart_labels_name_the_workload_and_configuration() -> None:
    with _warehouse(1) as wh:
        rows = named_query(wh, "decision", [RUN], 'workload_index, metric, stat, "rank"')
    labels = {r["chart_label"] for r in rows if r["metric"] in ("iops", "wall_seconds")}
    assert "w00 randread (read) | gp3 x3 m6i.large" in labels
    assert "w01 build | efs x1 m6i.large" in labels


# --- the dashboard's target, Pareto front and cost per outcome --------------------------

COST_FIELDS = (
    "usd_per_run", "usd_per_slot", "usd_per_instance_hour", "usd_per_1k_iops", "usd_per_build",
)  # fmt: skip


def _dashboard_rows(rows: list[dict[str, Any]], target: Any) -> list[dict[str, Any]]:
    """What the QuickSight decision table shows for a target (infra/constructs/dashboard_target.py's
    calculated fields, written here over the query's rows): per workload the rows of the
    target's metric and statistic if the workload measured that metric, else its default
    ranked metric at P50; meets = the row's value against the threshold; cheapest = the
    meeting row (known cost) with the least cost_order."""
    out = []
    for r in rows:
        applies = target is not None and f",{target.spec.metric}," in r["workload_metrics"]
        if applies:
            shown = r["metric"] == target.spec.metric and r["stat"] == target.stat
        else:
            shown = r["ranked"] and r["stat"] == "p50"
        if shown:
            meets = target.holds(r["value"]) if applies else None
            out.append({**r, "meets_target": meets})
    for r in out:
        mates = [
            m for m in out
            if _workload(m) == _workload(r) and m["meets_target"] and m["usd_per_slot"] is not None
        ]  # fmt: skip
        r["cheapest_meeting_target"] = bool(
            r in mates and r["cost_order"] == min(m["cost_order"] for m in mates)
        )
    return out


def _workload(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["metric_source"], r["workload_index"], r["workload"], r["job"], r["direction"])


def _same_as_report(rows: list[dict[str, Any]], report: list[dict[str, Any]]) -> None:
    order = sorted(rows, key=lambda r: (r["workload_index"], r["rank"]))
    assert [_key(r) for r in order] == [_key(r) for r in report]
    for got, want in zip(order, report, strict=True):
        assert (got["rank"], got["stat"], got["slots"], got["repeats"]) == (
            want["rank"], want["stat"], want["slots"], want["repeats"],
        )  # fmt: skip
        assert got["value"] == pytest.approx(want["value"], rel=1e-12)
        for f in COST_FIELDS:
            if want[f] is None:
                assert got[f] is None, (f, got, want)
            else:
                assert got[f] == pytest.approx(want[f], rel=1e-12), (f, got, want)
        assert got["cost_complete"] == want["cost_complete"]
        assert got["pareto"] == want["pareto"], (got, want)
        assert got["meets_target"] == want["meets_target"], (got, want)
        assert got["cheapest_meeting_target"] == want["cheapest_meeting_target"], (got, want)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "target",
    [None, "p98_build_minutes<=1.3", "p50_iops>=3000", "mean_build_seconds<70", "p0_iops>2900"],
)
def test_dashboard_rows_are_the_reports_decision_table(seed: int, target: str | None) -> None:
    from iofleet.results.decide import parse_target

    conditions = parse_target(target) if target else []
    with _warehouse(seed) as wh:
        # when: the dashboard's query and the report's decision table (with the target)
        rows = named_query(wh, "decision", [RUN], 'workload_index, metric, stat, "rank"')
        report = load_decision(wh, RUN, conditions)["decision"]
    # then: the rows the dashboard shows for that target are the report's, column for column
    _same_as_report(_dashboard_rows(rows, conditions[0] if conditions else None), report)


def planted_rows() -> dict[str, list[dict[str, Any]]]:
    """Five configurations of one fio job and one build, numbers chosen by hand:

    config     slots (IOPS)            wall s per slot            cost/run (cells)  fleet
    A gp3 x2   1000 3000               6000 6600                  2.00              2
    B io2 x2   r1 2500 2500, r2 3500 3500  r1 6000 6000, r2 6300 6300  4.00, 6.00   2
    C efs x1   1500                    5400                       3.00              1
    D st1 x4   1000 x4                 7200 x3 (one build failed) 0.80              4
    E gp2 x2   5000 5000               5000 5000                  unknown           2
    """
    plan = {
        "A": ("gp3", 2, [([1000.0, 3000.0], [6000.0, 6600.0], 2.0)]),
        "B": ("io2", 2, [([2500.0] * 2, [6000.0] * 2, 4.0), ([3500.0] * 2, [6300.0] * 2, 6.0)]),
        "C": ("efs", 1, [([1500.0], [5400.0], 3.0)]),
        "D": ("st1", 4, [([1000.0] * 4, [7200.0, 7200.0, 7200.0, None], 0.8)]),
        "E": ("gp2", 2, [([5000.0] * 2, [5000.0] * 2, None)]),
    }
    slots, fio, app, costs = [], [], [], []
    index = 0
    for label, fleet, repeats in plan.values():
        for repeat, (iops, walls, usd) in enumerate(repeats, 1):
            cell = f"c{index:03d}-{label}-r{repeat}"
            for s in range(fleet):
                slots.append(
                    {
                        "run_id": RUN, "cell_id": cell, "slot_index": s, "cell_index": index,
                        "instance_type": "m6i.large", "storage_label": label,
                        "storage_type": "ebs", "storage_detail": label, "fleet_size": fleet,
                        "repeat": repeat, "status": "SUCCEEDED",
                    }
                )  # fmt: skip
                fio.append(
                    {
                        "run_id": RUN, "cell_id": cell, "slot_index": s, "workload_index": 0,
                        "workload": "randread", "job": "randread", "job_index": 0,
                        "direction": "read", "iops": iops[s], "bw_bytes": int(iops[s] * 4096),
                        "error": 0,
                    }
                )  # fmt: skip
                app.append(
                    {
                        "run_id": RUN, "cell_id": cell, "slot_index": s, "workload_index": 1,
                        "app": "build", "phase": "run",
                        "exit_code": 0 if walls[s] is not None else 2,
                        "wall_seconds": walls[s] if walls[s] is not None else 99.0,
                    }
                )  # fmt: skip
            if usd is not None:
                costs.append(
                    {
                        "run_id": RUN, "cell_id": cell, "estimated_cost_usd": usd,
                        "slot_seconds": 3600.0, "cost_complete": label != "st1",
                    }
                )  # fmt: skip
            index += 1
    return {"slots": slots, "fio_results": fio, "app_runs": app, "cell_costs": costs}


def _planted() -> Warehouse:
    wh = Warehouse(":memory:")
    for table, rows in planted_rows().items():
        wh.insert_rows(table, rows)
    return wh


def test_planted_pareto_front_cost_per_outcome_and_cheapest_meeting_the_target() -> None:
    from iofleet.results.decide import parse_target

    (target,) = parse_target("p98_build_minutes<=105")
    with _planted() as wh:
        rows = named_query(wh, "decision", [RUN], 'workload_index, metric, stat, "rank"')
        report = load_decision(wh, RUN, [target])["decision"]
    shown = _dashboard_rows(rows, target)
    by = {(r["metric"], r["storage_label"]): r for r in shown}
    # then: IOPS (P50; the build target does not apply to the fio job): ranked E, B, A, C, D
    iops = sorted((r for r in shown if r["metric"] == "iops"), key=lambda r: r["rank"])
    assert [r["storage_label"] for r in iops] == ["gp2", "io2", "gp3", "efs", "st1"]
    assert [r["value"] for r in iops] == [5000.0, 3000.0, 2000.0, 1500.0, 1000.0]
    # $/1k IOPS = $/run / (fleet IOPS / 1000), fleet IOPS the mean over repeats of the sum
    assert {r["storage_label"]: r["usd_per_1k_iops"] for r in iops} == pytest.approx(
        {"gp3": 2.0 / 4.0, "io2": 5.0 / 6.0, "efs": 3.0 / 1.5, "st1": 0.8 / 4.0, "gp2": None}
    )
    # front on $/slot (D 0.2, A 1.0, B 2.5, C 3.0; E unknown) x P50 IOPS: C is beaten by A
    assert {r["storage_label"] for r in iops if r["pareto"]} == {"st1", "gp3", "io2"}
    assert by[("iops", "io2")]["usd_per_instance_hour"] == pytest.approx(5.0 / 2.0)
    assert by[("iops", "st1")]["cost_complete"] is False
    # and: the build ranked by P98 wall time (the target's statistic): E, C, B, A, D
    build = sorted((r for r in shown if r["metric"] == "wall_seconds"), key=lambda r: r["rank"])
    assert [r["storage_label"] for r in build] == ["gp2", "efs", "io2", "gp3", "st1"]
    assert [r["stat"] for r in build] == ["p98"] * 5
    assert by[("wall_seconds", "gp3")]["value"] == pytest.approx(6588.0)
    # $/build = $/run / successful builds per cell (D: 3 of 4 built)
    assert {r["storage_label"]: r["usd_per_build"] for r in build} == pytest.approx(
        {"gp3": 1.0, "io2": 2.5, "efs": 3.0, "st1": 0.8 / 3.0, "gp2": None}
    )
    # every known-cost configuration is on the wall-time front (each faster one costs more)
    assert {r["storage_label"] for r in build if r["pareto"]} == {"st1", "gp3", "io2", "efs"}
    # meets P98 <= 105 min (6300 s): E, C, B; cheapest per slot with a known cost: B
    assert {r["storage_label"] for r in build if r["meets_target"]} == {"gp2", "efs", "io2"}
    assert [r["storage_label"] for r in build if r["cheapest_meeting_target"]] == ["io2"]
    # and: the report's decision table says the same
    _same_as_report(shown, report)


@pytest.mark.parametrize(
    ("points", "front"),
    [
        # identical points do not beat each other; equal cost and worse value, or equal
        # value and more cost, is beaten
        ({"P": (1.0, 1000.0), "Q": (1.0, 1000.0), "R": (1.0, 900.0), "S": (2.0, 1000.0),
          "T": (0.5, 500.0)}, {"P", "Q", "T"}),
        # one point dominating all; a cheaper and worse one stays on the front
        ({"A": (1.0, 5000.0), "B": (3.0, 4000.0), "C": (0.1, 10.0), "D": (3.0, 4000.0)},
         {"A", "C"}),
        # unknown cost: never on the front, and beats nothing
        ({"A": (None, 9000.0), "B": (2.0, 100.0)}, {"B"}),
    ],
)  # fmt: skip
def test_pareto_front_edges(points: dict[str, tuple[float | None, float]], front: set[str]) -> None:
    rows: dict[str, list[dict[str, Any]]] = {"slots": [], "fio_results": [], "cell_costs": []}
    for index, (label, (usd, iops)) in enumerate(points.items()):
        cell = f"c{index:03d}-{label}"
        rows["slots"].append(
            {
                "run_id": RUN, "cell_id": cell, "slot_index": 0, "cell_index": index,
                "instance_type": "m6i.large", "storage_label": label, "storage_type": "ebs",
                "fleet_size": 1, "repeat": 1, "status": "SUCCEEDED",
            }
        )  # fmt: skip
        rows["fio_results"].append(
            {
                "run_id": RUN, "cell_id": cell, "slot_index": 0, "workload_index": 0,
                "workload": "w", "job": "w", "job_index": 0, "direction": "read",
                "iops": iops, "error": 0,
            }
        )  # fmt: skip
        if usd is not None:
            rows["cell_costs"].append({"run_id": RUN, "cell_id": cell, "estimated_cost_usd": usd})
    with Warehouse(":memory:") as wh:
        for table, trs in rows.items():
            wh.insert_rows(table, trs)
        got = named_query(wh, "decision", [RUN], 'stat, "rank"')
        report = load_decision(wh, RUN)["decision"]
    for stat in ("p0", "p50", "mean"):
        assert {r["storage_label"] for r in got if r["stat"] == stat and r["pareto"]} == front
    assert {r["storage_label"] for r in report if r["pareto"]} == front
