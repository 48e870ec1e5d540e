"""The decision table (iofleet.results.decide): the target grammar, the Pareto front,
the knee and the ranking/cost/pivot against known answers."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from iofleet.errors import UsageError
from iofleet.results.decide import (
    DECISION_COLUMNS,
    decide,
    knee,
    pareto_front,
    parse_target,
)

PROBES = json.loads(
    (Path(__file__).resolve().parents[1] / "data/probes/report_target/targets.json").read_text()
)


@pytest.mark.parametrize(("text", "expected"), PROBES["accepted"], ids=lambda x: str(x)[:40])
def test_accepted_targets_parse_to_their_conditions_in_warehouse_units(
    text: str, expected: list
) -> None:
    conditions = parse_target(text)
    assert [[c.stat, c.name, c.op, pytest.approx(c.value)] for c in conditions] == expected


@pytest.mark.parametrize(("text", "message"), PROBES["refused"], ids=lambda x: str(x)[:40])
def test_refused_targets_are_one_line_usage_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_target(text)
    line = str(err.value)
    assert line.startswith("--target: ") and message in line and "\n" not in line


def test_pareto_front_against_a_brute_force_reference() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        costs = [None if rng.random() < 0.1 else float(rng.integers(0, 5)) for _ in range(n)]
        perf = [float(rng.integers(0, 5)) for _ in range(n)]
        for higher in (True, False):
            got = pareto_front(list(zip(costs, perf, strict=True)), higher)
            sign = 1 if higher else -1
            for i in range(n):
                if costs[i] is None:
                    assert got[i] is False
                    continue
                dominated = any(
                    costs[j] is not None
                    and costs[j] <= costs[i]
                    and sign * perf[j] >= sign * perf[i]
                    and (costs[j] < costs[i] or sign * perf[j] > sign * perf[i])
                    for j in range(n)
                    if j != i
                )
                assert got[i] is (not dominated)


def test_pareto_front_known_answer() -> None:
    # (cost, IOPS): b is cheaper and better than a; c costs more but is the fastest
    points = [(2.0, 100.0), (1.0, 150.0), (3.0, 300.0), (3.0, 200.0), (None, 999.0)]
    assert pareto_front(points, higher=True) == [False, True, True, False, False]


# seed 004, EFS generalPurpose elastic: build minutes per fleet size (P50 and P98)
SEED_P50 = [(1, 98 + 41 / 60), (10, 98 + 49 / 60), (50, 103 + 30 / 60), (100, 117 + 6 / 60),
            (200, 170 + 45 / 60)]  # fmt: skip
SEED_P98 = [(1, 98 + 54 / 60), (10, 101 + 29 / 60), (50, 119 + 12 / 60), (100, 142 + 36 / 60),
            (200, 207 + 26 / 60)]  # fmt: skip


def test_knee_of_seed_004_efs_elastic() -> None:
    # P50: +4.9% at 50 instances, +18.7% at 100: the knee is 50
    assert knee(SEED_P50, higher=False) == (50, True)
    # P98: +2.6% at 10, +20.5% at 50: the knee is 10
    assert knee(SEED_P98, higher=False) == (10, True)


def test_knee_when_performance_never_drops_or_drops_at_once() -> None:
    assert knee([(1, 1000.0), (10, 950.0), (100, 910.0)], higher=True) == (100, False)
    assert knee([(1, 1000.0), (10, 899.0), (100, 1000.0)], higher=True) == (1, True)
    assert knee([(1, 1000.0)], higher=True) == (None, False)


_slots = itertools.count()


def _values(storage: str, fleet: int, repeat: int, cell: str, metric: str, values: list[float]):
    source = "app" if metric == "wall_seconds" else "fio"
    return [
        {
            "run_id": "r",
            "cell_id": cell,
            "instance_type": "m6i.large",
            "storage_label": storage,
            "storage_type": "ebs",
            "storage_detail": None,
            "fleet_size": fleet,
            "repeat": repeat,
            "slot_index": i,
            "metric_source": source,
            "workload_index": 0 if source == "fio" else 1,
            "workload": "w" if source == "fio" else "build",
            "job": "j" if source == "fio" else None,
            "direction": "read" if source == "fio" else None,
            "metric": metric,
            "unit": "iops" if metric == "iops" else "s",
            "value": v,
        }
        for i, v in enumerate(values)
    ]


def test_decision_ranks_pools_repeats_prices_outcomes_and_finds_the_cheapest_meeting_target():
    rows = (
        _values("gp3", 2, 1, "c0", "iops", [3000, 3100])
        + _values("gp3", 2, 2, "c1", "iops", [2900, 3000])
        + _values("io2", 2, 1, "c2", "iops", [9000, 9500])
        + _values("gp3", 2, 1, "c0", "wall_seconds", [6000, 6300])
        + _values("gp3", 2, 2, "c1", "wall_seconds", [6100, 6500])
        + _values("io2", 2, 1, "c2", "wall_seconds", [5900, 6000])
    )
    costs = {
        "c0": {"estimated_cost_usd": 1.0, "slot_seconds": 1800.0, "cost_complete": True},
        "c1": {"estimated_cost_usd": 1.2, "slot_seconds": 1800.0, "cost_complete": True},
        "c2": {"estimated_cost_usd": 4.0, "slot_seconds": 1800.0, "cost_complete": True},
    }
    out = decide(rows, costs, parse_target("p98_build_minutes<=106 and p50_iops>=2000"))
    fio = [r for r in out["decision"] if r["metric_source"] == "fio"]
    app = [r for r in out["decision"] if r["metric_source"] == "app"]
    assert all(tuple(r) == DECISION_COLUMNS for r in out["decision"])
    # fio: ranked by P50 IOPS over the pooled slots of both gp3 repeats
    assert [r["storage_label"] for r in fio] == ["io2", "gp3"]
    gp3 = fio[1]
    assert (gp3["repeats"], gp3["slots"]) == (2, 4)
    assert gp3["value"] == pytest.approx(np.percentile([3000, 3100, 2900, 3000], 50))
    assert gp3["usd_per_run"] == pytest.approx(1.1)  # mean of the repeats' plan costs
    assert gp3["usd_per_slot"] == pytest.approx(0.55)
    assert gp3["usd_per_instance_hour"] == pytest.approx(1.1 / (2 * 0.5))
    # fleet IOPS per repeat = sum over its slots (6100, 5900), mean 6000
    assert gp3["usd_per_1k_iops"] == pytest.approx(1.1 / 6.0)
    assert fio[0]["usd_per_1k_iops"] == pytest.approx(4.0 / 18.5)
    assert [r["meets_target"] for r in fio] == [True, True]
    assert [r["cheapest_meeting_target"] for r in fio] == [False, True]
    assert [r["pareto"] for r in fio] == [True, True]
    # app: ranked by the target's statistic, P98 build time (lower first)
    assert [r["stat"] for r in app] == ["p98", "p98"]
    assert [r["storage_label"] for r in app] == ["io2", "gp3"]
    assert app[1]["value"] == pytest.approx(np.percentile([6000, 6300, 6100, 6500], 98))
    assert app[1]["meets_target"] is False  # 107.9 min > 106
    assert app[0]["meets_target"] is True and app[0]["cheapest_meeting_target"] is True
    assert app[1]["usd_per_build"] == pytest.approx(1.1 / 2)
    assert out["pivot"] == [] and out["scaling"] == []  # one fleet size


def test_several_fleet_sizes_give_the_seed_004_pivot_and_the_scaling_knee() -> None:
    rows = []
    for n, (size, minutes) in enumerate(SEED_P50):
        rows += _values("efs", size, 1, f"c{n}", "wall_seconds", [minutes * 60] * 3)
    out = decide(rows, {})
    pivot, scaling = out["pivot"], out["scaling"]
    assert [r["fleet_size"] for r in pivot] == [1, 10, 50, 100, 200]
    assert pivot[3]["p50"] == pytest.approx((117 + 6 / 60) * 60)
    assert {r["knee_fleet_size"] for r in scaling} == {50}
    assert [r["past_knee"] for r in scaling] == [False, False, False, True, True]
    assert scaling[2]["change"] == pytest.approx((103.5 - (98 + 41 / 60)) / (98 + 41 / 60))
    assert all(r["usd_per_run"] is None for r in out["decision"])  # no plan cost: unknown
    assert not any(r["pareto"] for r in out["decision"])


def test_cheapest_and_pareto_compare_fleets_of_different_sizes_per_slot() -> None:
    # a fleet of 4 costs more per run but less per slot (per build) than a fleet of 1
    rows = _values("gp3", 1, 1, "c0", "wall_seconds", [100.0]) + _values(
        "gp3", 4, 1, "c1", "wall_seconds", [100.0, 101.0, 102.0, 103.0]
    )
    costs = {"c0": {"estimated_cost_usd": 1.0}, "c1": {"estimated_cost_usd": 3.0}}
    out = decide(rows, costs, parse_target("p100_build_seconds<=110"))
    by_fleet = {r["fleet_size"]: r for r in out["decision"]}
    assert by_fleet[4]["usd_per_slot"] == pytest.approx(0.75)
    assert by_fleet[4]["cheapest_meeting_target"] and not by_fleet[1]["cheapest_meeting_target"]
    assert by_fleet[1]["pareto"] and by_fleet[4]["pareto"]  # faster vs cheaper per slot


def test_percentile_is_numpys_to_the_bit() -> None:
    # given: random samples of every size a fleet gives, with ties and wide ranges
    from iofleet.results.decide import PCT_NAMES, STATS, stat_value

    rng = np.random.default_rng(12)
    for n in (1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 200):
        for scale in (1.0, 1e-6, 3e4, 7e9):
            values = list(rng.lognormal(0, 1, n) * scale)
            values += values[: n // 3]  # ties
            for name in PCT_NAMES:
                # then: the plain-Python percentile (the Lambda has no numpy) equals numpy's
                assert stat_value(values, name) == float(np.percentile(values, STATS[name]))
            assert stat_value(values, "mean") == pytest.approx(float(np.mean(values)), rel=1e-15)


@pytest.mark.parametrize(
    ("text", "measured", "holds"),
    [
        ("p50_ioping_median<=1.001us", 1001.0, True),  # the float product: 1000.9999999999999
        ("p50_ioping_median>=1.001us", 1001.0, True),
        ("p50_ioping_median<1.001us", 1001.0, False),
        ("p100_build_minutes<=0.00834275", 0.500565, True),  # 0.00834275 x 60, exactly
        ("p50_throughput>=0.3MB/s", 300000.0, True),  # 0.3 x 1e6 = 300000.00000000006
        ("p50_ioping_median<=1.001us", 1001.0000000000001, False),  # just above, still seen
    ],
)
def test_a_target_at_a_unit_converted_boundary_is_exact(
    text: str, measured: float, holds: bool
) -> None:
    # given a target written in another unit than the warehouse's, at the measured value
    [condition] = parse_target(text)
    # then the comparison is with the decimal as written, not its rounded float product
    assert condition.holds(measured) is holds
