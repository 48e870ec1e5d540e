"""The fleet_totals view (iofleet/results/sql/fleet_totals.sql) against a Python reference on
hand-built rows: overlap window, summed rates, ceilings and the binding verdict."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iofleet.results.schema import BURST_METRICS, EXPECTATIONS, FIO_RESULTS, SLOTS
from iofleet.results.warehouse import Warehouse

_runs = itertools.count()


@pytest.fixture(scope="module")
def wh() -> Iterator[Warehouse]:
    with Warehouse(":memory:") as w:
        yield w


def _slot_rows(wh: Warehouse, run: str, barriers: list[int]) -> None:
    """One slots row per barrier_passed_us, a fleet of that many in cell c000."""
    wh.insert_rows(
        SLOTS,
        [
            SLOTS.row(
                run_id=run,
                cell_id="c000",
                slot_index=i,
                cell_index=0,
                fleet_size=len(barriers),
                storage_label="s",
                barrier_passed_us=passed,
            )  # fmt: skip
            for i, passed in enumerate(barriers)
        ],
    )


def _load(
    wh: Warehouse,
    run: str,
    slots: list[tuple[int, list[tuple[float, float, int]]]],
    *,
    expected: tuple[float | None, int | None, str] | None = None,
    burst: list[tuple[str, float]] = (),  # type: ignore[assignment]
) -> None:
    """slots: (barrier_passed_us, [(iops, bw, runtime_ms) per workload_index 0, 1, ...])."""
    _slot_rows(wh, run, [passed for passed, _ in slots])
    rows = []
    for i, (_, jobs) in enumerate(slots):
        for w, (iops, bw, ms) in enumerate(jobs):
            rows.append(
                FIO_RESULTS.row(
                    run_id=run,
                    cell_id="c000",
                    slot_index=i,
                    workload_index=w,
                    workload=f"w{w}",
                    job="j",
                    job_index=0,
                    direction="read",
                    iops=iops,
                    bw_bytes=int(bw),
                    runtime_ms=ms,
                    error=0,
                )  # fmt: skip
            )
    wh.insert_rows(FIO_RESULTS, rows)
    if expected:
        wh.insert_rows(
            EXPECTATIONS,
            [
                EXPECTATIONS.row(
                    run_id=run,
                    cell_id="c000",
                    workload_index=w,
                    workload=f"w{w}",
                    job="j",
                    direction="read",
                    expected_iops=expected[0],
                    expected_bw_bytes=expected[1],
                    limited_by=expected[2],
                )  # fmt: skip
                for w in range(len(slots[0][1]))
            ],
        )
    wh.insert_rows(
        BURST_METRICS,
        [
            BURST_METRICS.row(run_id=run, cell_id="c000", slot_index=0, metric=m, value=v)
            for m, v in burst
        ],
    )


def _rows(wh: Warehouse, run: str) -> list[dict]:
    return wh.query("SELECT * FROM fleet_totals WHERE run_id = ? ORDER BY workload_index", [run])


slot_st = st.tuples(
    st.integers(min_value=1_700_000_000_000_000, max_value=1_700_000_000_000_000 + 5_000_000),
    st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=1e6, allow_nan=False),
            st.integers(min_value=0, max_value=10**10),
            st.integers(min_value=1, max_value=100_000),
        ),
        min_size=2,
        max_size=2,
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(slot_st, min_size=1, max_size=6))
def test_overlap_window_and_totals_match_a_python_reference(wh: Warehouse, slots: list) -> None:
    run = f"ft-{next(_runs)}"
    _load(wh, run, slots)
    rows = _rows(wh, run)
    assert len(rows) == 2
    for w, row in enumerate(rows):
        starts = [p + sum(jobs[k][2] for k in range(w)) * 1000 for p, jobs in slots]
        ends = [s + jobs[w][2] * 1000 for s, (_, jobs) in zip(starts, slots, strict=True)]
        overlap = max(0, min(ends) - max(starts)) / 1e6
        assert row["slots"] == len(slots)
        assert row["overlap_s"] == pytest.approx(overlap, abs=1e-6)
        assert row["total_iops"] == pytest.approx(sum(j[w][0] for _, j in slots))
        assert row["total_bw_bytes"] == pytest.approx(sum(j[w][1] for _, j in slots))
        longest = max(j[w][2] for _, j in slots) / 1000
        assert row["overlap_fraction"] == pytest.approx(overlap / longest, abs=1e-9)
        assert row["binding"] == "unknown"
        assert row["suspect"] is False


@pytest.mark.parametrize(
    ("iops", "burst", "binding", "suspect"),
    [
        (950.0, [], "volume", False),  # 2 x 950 of 2 x 1000: at the predicted limit
        (1100.0, [], "suspect: above ceiling", True),  # page cache, unfilled file ...
        (500.0, [], "below ceiling", False),
        (500.0, [("BurstBalance", 0.0)], "burst-bucket empty", False),
        (500.0, [("BurstBalance", 40.0)], "below ceiling", False),
        (500.0, [("VolumeIOPSExceededCheck", 1.0)], "volume-exceeded-check", False),
        (500.0, [("InstanceEBSIOPSExceededCheck", 1.0)], "instance-exceeded-check", False),
        (500.0, [("PercentIOLimit", 100.0)], "efs io limit", False),
    ],
)
def test_binding_limit_from_ceiling_and_throttling_evidence(
    wh: Warehouse, iops: float, burst: list, binding: str, suspect: bool
) -> None:
    run = f"ft-{next(_runs)}"
    base = 1_700_000_000_000_000
    _load(
        wh,
        run,
        [(base, [(iops, 0, 10_000)]), (base + 500_000, [(iops, 0, 10_000)])],
        expected=(1000.0, None, "volume"),
        burst=burst,
    )
    (row,) = _rows(wh, run)
    assert row["expected_total_iops"] == pytest.approx(2000.0)  # per-slot ceiling x fleet size
    assert row["iops_ratio"] == pytest.approx(2 * iops / 2000.0)
    assert row["overlap_s"] == pytest.approx(9.5)
    assert row["binding"] == binding
    assert row["suspect"] is suspect


def test_a_slot_without_a_barrier_instant_leaves_the_window_unknown(wh: Warehouse) -> None:
    run = f"ft-{next(_runs)}"
    _load(wh, run, [(1_700_000_000_000_000, [(10.0, 1, 1000)]), (None, [(20.0, 1, 1000)])])  # type: ignore[list-item]
    (row,) = _rows(wh, run)
    assert row["total_iops"] == pytest.approx(30.0)
    assert row["overlap_s"] is None and row["window_start_us"] is None


def _timed_jobs(wh: Warehouse, run: str, rows: list[dict]) -> None:
    """fio_results rows of workload 0 in cell c000, 100 IOPS of reads each: the fields given
    (slot, job, its group, runtime and fio's own times) over those."""
    wh.insert_rows(
        FIO_RESULTS,
        [
            FIO_RESULTS.row(
                **{"run_id": run, "cell_id": "c000", "workload_index": 0, "workload": "w"},
                **{"direction": "read", "iops": 100.0, "bw_bytes": 409600, "error": 0},
                **row,
            )
            for row in rows
        ],
    )


@pytest.mark.parametrize("b_group", [0, 1])
def test_windows_come_from_fios_own_end_in_a_workload_of_one_group(
    wh: Warehouse, b_group: int
) -> None:
    # given two slots whose fio runs ended 500 ms apart (an app before fio, a slow
    # layout: nothing the barrier instant says), each with job a (1 s) and job b (2 s);
    # the barrier instants are 1 h apart
    run, end = f"r{next(_runs)}", 1_795_000_000_000
    _slot_rows(wh, run, [0, 3_600_000_000])
    _timed_jobs(
        wh,
        run,
        [
            {"slot_index": i, "job": job, "job_index": g, "groupid": g, "runtime_ms": ms}
            | {"fio_ended_ms": end + i * 500}
            for i in range(2)
            for job, g, ms in (("a", 0, 1000), ("b", b_group, 2000))
        ],
    )
    rows = wh.con.execute(
        "SELECT job, overlap_s FROM fleet_totals WHERE run_id = ? ORDER BY job", [run]
    ).fetchall()
    if b_group == 0:
        # one group: both jobs end where fio ended. a ran in [end-1 s, end] and
        # [end-0.5 s, end+0.5 s]: together 0.5 s; b in [end-2 s, end] and [end-1.5 s,
        # end+0.5 s]: together 1.5 s
        assert rows == [("a", 0.5), ("b", 1.5)]
    else:
        # two groups: fio's groupid does not say whether b waited for a (stonewall) or ran
        # beside it (new_group): placed from the barrier, as before, 1 h apart
        assert rows == [("a", 0.0), ("b", 0.0)]


@pytest.mark.parametrize("b_group", [0, 1])
def test_windows_come_from_each_jobs_own_start_where_fio_gives_it(
    wh: Warehouse, b_group: int
) -> None:
    # given fio 3.36's job_start on every job: two slots whose fio runs began 500 ms apart
    # (barrier instants 1 h apart), job a for 1 s, then job b for 2 s from a's end
    # (b_group 1: stonewall) or, in one group, from a's start as well
    run, t0 = f"r{next(_runs)}", 1_795_000_000_000
    _slot_rows(wh, run, [0, 3_600_000_000])
    b_after = 1000 if b_group else 0
    _timed_jobs(
        wh,
        run,
        [
            {"slot_index": i, "job": job, "job_index": g, "groupid": g, "runtime_ms": ms}
            | {"fio_ended_ms": t0 + i * 500 + b_after + 2000}
            | {"fio_started_ms": t0 + i * 500 + after}
            for i in range(2)
            for job, g, ms, after in (("a", 0, 1000, 0), ("b", b_group, 2000, b_after))
        ],
    )
    rows = wh.con.execute(
        "SELECT job, overlap_s, window_start_us FROM fleet_totals WHERE run_id = ? ORDER BY job",
        [run],
    ).fetchall()
    # a in [t0, t0+1 s] and [t0+0.5 s, t0+1.5 s]: 0.5 s together, from slot 1's start;
    # b, 2 s on each slot 500 ms apart: 1.5 s together, in either group layout
    assert rows == [
        ("a", 0.5, (t0 + 500) * 1000),
        ("b", 1.5, (t0 + 500 + b_after) * 1000),
    ]
