"""The fleet_totals view and the failures query on Trino (Athena's engine) give what
they give on DuckDB.

Hand-built rows go into Trino memory-catalog tables and a DuckDB warehouse; the views
`cells` and `fleet_totals` are created from iofleet/results/sql/ on both (unchanged on Trino,
transpiled by sqlglot for DuckDB), and their rows must agree.
"""

from __future__ import annotations

from typing import Any

import pytest
from trino_client import TrinoClient

from iofleet.results import sql as view_files
from iofleet.results.schema import APP_RUNS, BURST_METRICS, EXPECTATIONS, FIO_RESULTS, SLOTS, Table
from iofleet.results.warehouse import Warehouse, transpile_view
from tests.cloud.test_start_skew_trino import load_planted

BASE_US = 1_795_237_921_000_000


def _data() -> dict[Table, list[dict[str, Any]]]:
    slots = [
        SLOTS.row(
            run_id="r",
            cell_id="c000",
            slot_index=i,
            cell_index=0,
            fleet_size=2,
            storage_label="gp3",
            storage_type="ebs",
            status=status,
            exit_code=code,
            error=error,
            barrier_passed_us=BASE_US + offset,
        )  # fmt: skip
        for i, (offset, status, code, error) in enumerate(
            [(0, "SUCCEEDED", 0, None), (250_000, "FAILED", 1, "w01 app b: exit 3")]
        )
    ] + [
        SLOTS.row(
            run_id="r",
            cell_id="c001",
            slot_index=0,
            cell_index=1,
            fleet_size=1,
            storage_label="io2",
            storage_type="ebs",
        )  # fmt: skip
    ]
    fio = [
        FIO_RESULTS.row(
            run_id="r",
            cell_id=cell,
            slot_index=slot,
            workload_index=w,
            workload=f"w{w}",
            job="j",
            job_index=0,
            direction="read",
            iops=iops,
            bw_bytes=bw,
            runtime_ms=ms,
            error=err,
        )  # fmt: skip
        for cell, slot, w, iops, bw, ms, err in [
            ("c000", 0, 0, 2900.5, 47_000_000, 10_000, 0),
            ("c000", 1, 0, 3100.25, 51_000_000, 9_500, 0),
            ("c000", 0, 2, 100.0, 1_600_000, 4_000, 0),
            ("c000", 1, 2, 90.0, 1_500_000, 4_100, 5),
            ("c001", 0, 0, 17_500.0, 270_000_000, 10_000, 0),
        ]
    ]
    expectations = [
        EXPECTATIONS.row(
            run_id="r",
            cell_id=cell,
            workload_index=0,
            workload="w0",
            job="j",
            direction="read",
            expected_iops=iops,
            expected_bw_bytes=bw,
            limited_by="volume",
        )  # fmt: skip
        for cell, iops, bw in [("c000", 3000.0, 131_072_000), ("c001", 16_000.0, None)]
    ]
    burst = [
        BURST_METRICS.row(run_id="r", cell_id="c000", slot_index=0, metric=m, value=v)
        for m, v in [("VolumeIOPSExceededCheck", 1.0), ("EBSIOBalance%", 40.0)]
    ]
    apps = [
        APP_RUNS.row(
            run_id="r",
            cell_id="c000",
            slot_index=1,
            workload_index=1,
            app="b",
            phase="run",
            exit_code=3,
            wall_seconds=1.5,
        )  # fmt: skip
    ]
    return {SLOTS: slots, FIO_RESULTS: fio, EXPECTATIONS: expectations, BURST_METRICS: burst,
            APP_RUNS: apps}  # fmt: skip


def _trino(trino_server: Any, unique: str) -> TrinoClient:
    data = {table.name: rows for table, rows in _data().items()}
    return load_planted(trino_server, f"fleet_{unique}", data)


def _duck() -> Warehouse:
    wh = Warehouse(":memory:")
    for table, rows in _data().items():
        wh.insert_rows(table, rows)
    return wh


def test_fleet_totals_and_failures_on_trino_equal_duckdb(trino_server: Any, unique: str) -> None:
    trino = _trino(trino_server, unique)
    order = "ORDER BY cell_id, workload_index"
    failures = view_files.query_sql("failures")
    with _duck() as wh:
        want = wh.query(f"SELECT * FROM fleet_totals {order}")
        want_fail = wh.query(
            f"SELECT * FROM ({transpile_view(failures)}) ORDER BY cell_id, slot_index, level"
        )
    got = trino.execute(f"SELECT * FROM fleet_totals {order}").dicts()
    got_fail = trino.execute(
        f"SELECT * FROM ({failures}) ORDER BY cell_id, slot_index, level"
    ).dicts()
    # floats may differ in the last bits (sums may add in another order); the rest exactly
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for g, w in zip(got, want, strict=True):
        for key, value in w.items():
            if isinstance(value, float):
                assert g[key] == pytest.approx(value, rel=1e-12), key
            else:
                assert g[key] == value, key
    assert got_fail == want_fail
    # CloudWatch's exceeded checks are per slot over the whole run, not per workload: the
    # cell's second fio workload (no expectation) carries the same evidence as its first
    assert [r["binding"] for r in got] == [
        "volume-exceeded-check",
        "volume-exceeded-check",
        "suspect: above ceiling",
    ]
    assert got[0]["overlap_s"] == 9.5 and got[0]["total_iops"] == 6000.75
    assert {r["level"] for r in got_fail} == {"slot", "fio", "app"}
