"""The SQL views (iofleet/results/sql/) against reference implementations on random data."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sqlglot
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from iofleet.results import sql as view_files
from iofleet.results.ingest import fold_bin_rows
from iofleet.results.schema import (
    APP_RUNS,
    FIO_LATENCY_BINS,
    FIO_LATENCY_HISTOGRAMS,
    FIO_RESULTS,
    IOPING_REQUESTS,
    SLOTS,
)
from iofleet.results.warehouse import Warehouse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
PCTS = view_files.PERCENTILES
_run_numbers = itertools.count()

values_st = st.lists(
    st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=40,
)
# bins per slot: {bin_ns: count}
slot_bins_st = st.dictionaries(
    st.integers(min_value=1, max_value=10**10),
    st.integers(min_value=1, max_value=10**6),
    min_size=1,
    max_size=30,
)


@pytest.fixture(scope="module")
def wh() -> Iterator[Warehouse]:
    with Warehouse(":memory:") as w:
        yield w


def _new_run() -> str:
    return f"run-{next(_run_numbers)}"


def _add_slots(wh: Warehouse, run_id: str, n: int, cell_id: str = "c000") -> None:
    wh.insert_rows(
        SLOTS,
        [
            SLOTS.row(run_id=run_id, cell_id=cell_id, slot_index=i, cell_index=0, fleet_size=n)
            for i in range(n)
        ],
    )


def _fio_row(run_id: str, slot_index: int, **values: object) -> dict[str, object]:
    """A fio_results row of cell c000, workload 0 ("w"), job "j" #0, direction read;
    `values` sets the measurements and overrides any of those."""
    key: dict[str, object] = {
        "cell_id": "c000",
        "workload_index": 0,
        "workload": "w",
        "job": "j",
        "job_index": 0,
        "direction": "read",
        "error": 0,
    }
    return FIO_RESULTS.row(run_id=run_id, slot_index=slot_index, **{**key, **values})


def _assert_cell_percentiles(
    wh: Warehouse, run_id: str, metric: str, expected: list[float]
) -> dict[str, object]:
    """The run's one cell_percentiles row for `metric`: P0..P100 equal numpy's linear
    percentiles, to the last bit (the README says "exact: equal to numpy's")."""
    (row,) = wh.query(
        "SELECT * FROM cell_percentiles WHERE run_id = ? AND metric = ?", [run_id, metric]
    )
    got = [row[f"p{p}"] for p in PCTS]
    assert got == [float(np.percentile(expected, p)) for p in PCTS], (metric, expected)
    return row


def _bin_rule(bins: dict[int, int], p: float) -> int:
    """Reference: smallest bin value whose cumulative count reaches ceil(p/100 * total),
    p as fio holds it (the double nearest the decimal) and the product exact, as fio's
    long double comparison gives it: 99.9 is slightly above 99.9, so 1,000 samples
    need the 1,000th, not the 999th."""
    total = sum(bins.values())
    need = math.ceil(Fraction(p) * total / 100)
    running = 0
    for value in sorted(bins):
        running += bins[value]
        if running >= need:
            return value
    raise AssertionError("unreachable")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=values_st)
# numpy takes the upper neighbour when the fraction is >= 0.5: p90 is 360282.60000000003,
# one unit in the last place above the lower neighbour's 360282.6
@example(values=[29965.0, 117385.0, 421007.0])
def test_cell_percentiles_equal_numpy_linear_over_fio_slot_values(
    wh: Warehouse, values: list[float]
) -> None:
    # given one fio iops value per slot
    run_id = _new_run()
    _add_slots(wh, run_id, len(values))
    wh.insert_rows(
        FIO_RESULTS,
        [_fio_row(run_id, i, iops=v) for i, v in enumerate(values)],
    )
    # when / then
    row = _assert_cell_percentiles(wh, run_id, "iops", values)
    assert row["slots"] == len(values)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=values_st)
def test_cell_percentiles_equal_numpy_linear_over_app_wall_seconds(
    wh: Warehouse, values: list[float]
) -> None:
    run_id = _new_run()
    _add_slots(wh, run_id, len(values))
    wh.insert_rows(
        APP_RUNS,
        [
            APP_RUNS.row(
                run_id=run_id,
                cell_id="c000",
                slot_index=i,
                workload_index=2,
                app="build",
                phase="run",
                exit_code=0,
                wall_seconds=v,
            )
            for i, v in enumerate(values)
        ],
    )
    row = _assert_cell_percentiles(wh, run_id, "wall_seconds", values)
    assert (row["metric_source"], row["workload"], row["unit"]) == ("app", "build", "s")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    per_slot=st.lists(
        st.lists(st.integers(min_value=1, max_value=10**9), min_size=1, max_size=25),
        min_size=1,
        max_size=8,
    )
)
@example(per_slot=[[29965], [117385], [421007]])  # integer columns too: p90 as above
def test_ioping_slot_median_is_numpy_median_and_spread_across_slots_is_linear(
    wh: Warehouse, per_slot: list[list[int]]
) -> None:
    run_id = _new_run()
    _add_slots(wh, run_id, len(per_slot))
    wh.insert_rows(
        IOPING_REQUESTS,
        [
            IOPING_REQUESTS.row(
                run_id=run_id,
                cell_id="c000",
                slot_index=s,
                workload_index=1,
                request=k + 1,
                operation="read",
                size_bytes=4096,
                time_ns=t,
            )
            for s, times in enumerate(per_slot)
            for k, t in enumerate(times)
        ],
    )
    _assert_cell_percentiles(
        wh, run_id, "lat_median_ns", [float(np.median(times)) for times in per_slot]
    )
    _assert_cell_percentiles(wh, run_id, "lat_max_ns", [max(times) for times in per_slot])


def test_fio_rows_with_an_error_are_left_out_of_cell_percentiles(wh: Warehouse) -> None:
    run_id = _new_run()
    _add_slots(wh, run_id, 3)
    wh.insert_rows(
        FIO_RESULTS,
        [
            _fio_row(run_id, i, direction="write", iops=iops, error=err)
            for i, (iops, err) in enumerate([(100.0, 0), (5.0, 28), (300.0, 0)])
        ],
    )
    (row,) = wh.query(
        "SELECT slots, p0, p100 FROM cell_percentiles WHERE run_id = ? AND metric = 'iops'",
        [run_id],
    )
    assert row == {"slots": 2, "p0": 100.0, "p100": 300.0}


def test_separate_numjobs_entries_sum_iops_within_a_slot(wh: Warehouse) -> None:
    run_id = _new_run()
    _add_slots(wh, run_id, 1)
    wh.insert_rows(
        FIO_RESULTS,
        [
            _fio_row(run_id, 0, job_index=k, direction="write", iops=10.0 * (k + 1))
            for k in range(3)
        ],
    )
    (row,) = wh.query(
        "SELECT slots, p50 FROM cell_percentiles WHERE run_id = ? AND metric = 'iops'", [run_id]
    )
    assert row == {"slots": 1, "p50": 60.0}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(slots=st.lists(slot_bins_st, min_size=1, max_size=6))
@example(slots=[{1: 600, 2: 1}, {1: 399}])  # 1,000 samples: p99.9 needs the 1,000th
def test_fleet_latency_equals_the_bin_rule_on_bins_merged_across_slots(
    wh: Warehouse, slots: list[dict[int, int]]
) -> None:
    # given histogram bins for each slot
    run_id = _new_run()
    _add_slots(wh, run_id, len(slots))
    wh.insert_rows(  # stored as histograms: the bin rows folded per slot
        FIO_LATENCY_HISTOGRAMS,
        fold_bin_rows(
            FIO_LATENCY_BINS.row(
                run_id=run_id,
                cell_id="c000",
                slot_index=s,
                workload_index=0,
                workload="w",
                job="j",
                job_index=0,
                direction="read",
                bin_ns=b,
                count=c,
            )
            for s, bins in enumerate(slots)
            for b, c in bins.items()
        ),
    )
    merged: dict[int, int] = {}
    for bins in slots:
        for b, c in bins.items():
            merged[b] = merged.get(b, 0) + c
    # when
    (row,) = wh.query("SELECT * FROM fleet_latency WHERE run_id = ?", [run_id])
    # then
    assert row["total_count"] == sum(merged.values())
    assert row["slots"] == len(slots)
    assert row["p0_ns"] == min(merged)
    assert row["p100_ns"] == max(merged)
    for col, p in [
        ("p50_ns", 50),
        ("p75_ns", 75),
        ("p90_ns", 90),
        ("p98_ns", 98),
        ("p99_ns", 99),
        ("p99_9_ns", 99.9),
        ("p99_99_ns", 99.99),
    ]:
        assert row[col] == _bin_rule(merged, p), col


def _fio_doc(name: str) -> dict:
    text = (FIXTURES / name).read_text()
    return json.loads(text[text.index("{") :])


@pytest.mark.parametrize(
    "fixture",
    [
        "jsonplus-numjobs-grouped.json",
        "jsonplus-randrw-default-percentiles.json",
        # 1,000 reads: fio's p99.9 is the 1,000th sample, not the 999th
        "versions/fio-3.33-jsonplus-1000-reads.json",
    ],
)
def test_fleet_latency_reproduces_fios_own_percentiles_from_its_bins(
    wh: Warehouse, fixture: str
) -> None:
    # given the json+ bins of a real fio run, loaded as one slot
    doc = _fio_doc(fixture)
    run_id = _new_run()
    _add_slots(wh, run_id, 1)
    expected: dict[str, dict[str, int]] = {}
    rows = []
    for index, job in enumerate(doc["jobs"]):
        for direction in ("read", "write"):
            clat = job[direction]["clat_ns"]
            if job[direction]["total_ios"] == 0:
                continue
            expected[direction] = clat["percentile"]
            rows += [
                FIO_LATENCY_BINS.row(
                    run_id=run_id,
                    cell_id="c000",
                    slot_index=0,
                    workload_index=0,
                    workload="w",
                    job=job["jobname"],
                    job_index=index,
                    direction=direction,
                    bin_ns=int(b),
                    count=c,
                )
                for b, c in clat["bins"].items()
            ]
    wh.insert_rows(FIO_LATENCY_HISTOGRAMS, fold_bin_rows(rows))
    # when
    got = {
        r["direction"]: r
        for r in wh.query("SELECT * FROM fleet_latency WHERE run_id = ?", [run_id])
    }
    # then every percentile fio printed is reproduced exactly from the bins
    assert set(got) == set(expected)
    columns = {
        "50.000000": "p50_ns",
        "75.000000": "p75_ns",
        "90.000000": "p90_ns",
        "98.000000": "p98_ns",
        "99.000000": "p99_ns",
        "99.900000": "p99_9_ns",
        "99.990000": "p99_99_ns",
    }
    for direction, fio_pcts in expected.items():
        compared = [k for k in fio_pcts if k in columns]
        assert len(compared) >= 3
        for key in compared:
            assert got[direction][columns[key]] == fio_pcts[key], (direction, key)


@pytest.mark.parametrize("name", view_files.VIEW_NAMES)
def test_view_sql_parses_as_trino_and_uses_no_approximate_or_engine_only_functions(
    name: str,
) -> None:
    text = view_files.view_sql(name)
    parsed = sqlglot.parse_one(text, read="trino")
    assert isinstance(parsed, sqlglot.exp.Query)
    lowered = text.lower()
    for banned in ("approx_percentile", "percentile_cont", "quantile", "median(", "list(", "::"):
        assert banned not in lowered, banned


def test_view_sql_has_no_division_of_integer_columns() -> None:
    # Trino divides integers as integers, DuckDB as doubles: every '/' must divide DOUBLEs.
    for name in view_files.VIEW_NAMES:
        for div in sqlglot.parse_one(view_files.view_sql(name), read="trino").find_all(
            sqlglot.exp.Div
        ):
            for side in (div.this, div.expression):
                assert isinstance(side, sqlglot.exp.Cast) and side.to.is_type("double"), (
                    name,
                    div.sql(),
                )


# --- start_skew ---------------------------------------------------------------------

EPOCH = datetime(1970, 1, 1)
BASE_US = 1_795_237_921_000_000  # 2026-11-21 05:12:01 UTC
# per slot: (pass offset from the release in us or None: never passed, late us,
#            clock synced, maxerror us, esterror us, host)
skew_slots_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(min_value=0, max_value=10**8)),
        st.integers(min_value=0, max_value=10**6),
        st.booleans(),
        st.integers(min_value=0, max_value=16_000_000),
        st.integers(min_value=0, max_value=16_000_000),
        st.sampled_from(["ip-10-0-0-1", "ip-10-0-0-2", "ip-10-0-0-3"]),
    ),
    min_size=1,
    max_size=12,
)


def _stamp(epoch_us: int) -> str:
    return (EPOCH + timedelta(microseconds=epoch_us)).strftime("%Y-%m-%d %H:%M:%S.%f")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(slots=skew_slots_st)
def test_start_skew_is_latest_minus_earliest_pass_with_the_worst_clock_error(
    wh: Warehouse, slots: list[tuple[int | None, int, bool, int, int, str]]
) -> None:
    # given one cell whose slots passed the barrier at these offsets (or never)
    run_id = _new_run()
    released = BASE_US
    wh.insert_rows(
        SLOTS,
        [
            SLOTS.row(
                run_id=run_id,
                cell_id="c000",
                slot_index=i,
                cell_index=0,
                fleet_size=len(slots),
                barrier_released_at=_stamp(released) if offset is not None else None,
                barrier_passed_at=_stamp(released + offset) if offset is not None else None,
                barrier_passed_us=released + offset if offset is not None else None,
                barrier_late_us=late if offset is not None else None,
                clock_synced=synced,
                clock_max_error_us=maxerr,
                clock_est_error_us=esterr,
                hostname=host,
            )
            for i, (offset, late, synced, maxerr, esterr, host) in enumerate(slots)
        ],
    )
    # when
    (row,) = wh.query("SELECT * FROM start_skew WHERE run_id = ?", [run_id])
    # then: the reference, in Python over the slots that passed
    passed = [s for s in slots if s[0] is not None]
    assert row["slots_reported"] == len(slots)
    assert row["slots_passed"] == len(passed)
    if not passed:
        assert row["start_skew_us"] is None and row["released_at"] is None
        return
    offsets = [s[0] for s in passed if s[0] is not None]
    skew = max(offsets) - min(offsets)
    worst = max(s[3] for s in passed)
    assert row["start_skew_us"] == skew
    assert row["release_instants"] == 1
    assert row["released_at"] == EPOCH + timedelta(microseconds=released)
    assert row["first_passed_at"] == EPOCH + timedelta(microseconds=released + min(offsets))
    assert row["last_passed_at"] == EPOCH + timedelta(microseconds=released + max(offsets))
    assert row["max_late_us"] == max(s[1] for s in passed)
    assert row["clock_max_error_us"] == worst
    assert row["clock_est_error_us"] == max(s[4] for s in passed)
    assert row["slots_unsynced"] == sum(1 for s in passed if not s[2])
    hosts = len({s[5] for s in passed})
    assert row["hosts"] == hosts
    # one host: one clock, its error cancels; several: each may be off by its maxerror
    assert row["start_skew_bound_us"] == (skew if hosts == 1 else skew + 2 * worst)


def test_start_skew_is_one_row_per_cell_with_hand_built_instants(wh: Warehouse) -> None:
    # given two cells: three slots passing 0, 1,250 and 400 us after the release, and a
    # one-slot cell that never passed (its barrier timed out)
    run_id = _new_run()
    rows = [
        SLOTS.row(
            run_id=run_id,
            cell_id="c000",
            slot_index=i,
            cell_index=0,
            fleet_size=3,
            barrier_released_at=_stamp(BASE_US),
            barrier_passed_at=_stamp(BASE_US + d),
            barrier_passed_us=BASE_US + d,
            barrier_late_us=0,
            clock_synced=True,
            clock_max_error_us=e,
            clock_est_error_us=10,
            hostname=f"ip-10-0-0-{i}",
        )
        for i, (d, e) in enumerate([(0, 900), (1250, 2100), (400, 1500)])
    ]
    rows.append(SLOTS.row(run_id=run_id, cell_id="c001", slot_index=0, cell_index=1, fleet_size=1))
    wh.insert_rows(SLOTS, rows)
    # when
    got = wh.query(
        "SELECT cell_id, slots_passed, start_skew_us, clock_max_error_us, start_skew_bound_us, "
        "slots_unsynced FROM start_skew WHERE run_id = ? ORDER BY cell_index",
        [run_id],
    )
    # then
    assert got == [
        {
            "cell_id": "c000",
            "slots_passed": 3,
            "start_skew_us": 1250,
            "clock_max_error_us": 2100,
            "start_skew_bound_us": 1250 + 2 * 2100,
            "slots_unsynced": 0,
        },
        {
            "cell_id": "c001",
            "slots_passed": 0,
            "start_skew_us": None,
            "clock_max_error_us": None,
            "start_skew_bound_us": None,
            "slots_unsynced": None,
        },
    ]
