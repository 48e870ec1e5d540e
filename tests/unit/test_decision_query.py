"""queries/decision.sql (the QuickSight dashboard's data set) against the report's own
decision table (iofleet.results.decide) on the same warehouse: same ranks, same pooled
percentiles (numpy's linear interpolation), same cost per run and per slot."""

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
    ranked = [r for r in rows if r["ranked"]]
    # then: the ranked rows are the report's rows, rank for rank, to the bit
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
        rows = named_query(wh, "decision", [RUN], 'workload_index, metric, "rank"')
    labels = {r["chart_label"] for r in rows if r["metric"] in ("iops", "wall_seconds")}
    assert "w00 randread (read) | gp3 x3 m6i.large" in labels
    assert "w01 build | efs x1 m6i.large" in labels
