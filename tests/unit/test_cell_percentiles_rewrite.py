"""`slot_metrics` and `cell_percentiles` (one pass over the fio rows, issue 13) give every
row the views gave before, on DuckDB.

The reference is the views' text before the rewrite (tests/data/sql_reference/, from
commit 50ca1ab; its percentile interpolation since brought to numpy's two-sided form,
as the view's was, decision 79), created beside the warehouse's own views as
`ref_slot_metrics` and `ref_cell_percentiles` over the same planted rows. The planted rows cover what the
views must get right: a job several times in one slot (summed / maxed), fio rows with
an error or a NULL error, NULL and NaN measurements (left out, a metric NULL in every
slot of a cell giving no row), ioping requests (odd and even counts, NULL times), app
runs that failed or have no wall time, ties, and a cell without a slot row.
tests/cloud/test_cell_percentiles_trino.py runs the same rows on Trino.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iofleet.results.schema import APP_RUNS, FIO_RESULTS, IOPING_REQUESTS, SLOTS, Table
from iofleet.results.warehouse import Warehouse, transpile_view

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "sql_reference"
SEEDS = (1, 2, 3)
FIO_METRICS = (
    "iops",
    "bw_bytes",
    "clat_mean_ns",
    "clat_p50_ns",
    "clat_p90_ns",
    "clat_p99_ns",
    "clat_p99_9_ns",
    "clat_max_ns",
)


def reference_sql() -> dict[str, str]:
    """The views before the rewrite, reading each other as `ref_<name>`."""
    slot_metrics = (REFERENCE / "slot_metrics.sql").read_text(encoding="utf-8").strip()
    cell_percentiles = (REFERENCE / "cell_percentiles.sql").read_text(encoding="utf-8").strip()
    assert "FROM slot_metrics" in cell_percentiles
    return {
        "ref_slot_metrics": slot_metrics,
        "ref_cell_percentiles": cell_percentiles.replace(
            "FROM slot_metrics", "FROM ref_slot_metrics"
        ),
    }


def planted(seed: int, nan: bool = True) -> dict[Table, list[dict[str, Any]]]:
    """Rows of 2 runs x 3 cells (c002 has no slot rows) x up to 9 slots, deterministic.
    `nan=False` plants NULL where NaN would go (Trino's max() and DuckDB's treat NaN
    differently, so NaN rows are compared within one engine only)."""
    rnd = random.Random(seed)

    def value(kind: str) -> Any:
        roll = rnd.random()
        if roll < 0.06:
            return None
        if kind == "double" and roll < 0.1:
            return math.nan if nan else None
        if roll < 0.25:  # ties across slots
            return 1000 if kind == "bigint" else 1000.0
        if kind == "bigint":
            return rnd.randint(0, 10**9)
        return rnd.choice([rnd.uniform(0, 1e6), rnd.uniform(0, 1) * 10 ** rnd.randint(-3, 12)])

    slots, fio, ioping, apps = [], [], [], []
    for run in ("run-a", "run-b"):
        for cell_index, cell in enumerate(("c000", "c001", "c002")):
            n = rnd.randint(1, 9)
            for slot in range(n):
                if cell != "c002":
                    slots.append(
                        SLOTS.row(
                            run_id=run,
                            cell_id=cell,
                            slot_index=slot,
                            cell_index=cell_index,
                            fleet_size=n,
                            storage_label=f"label-{cell_index}",
                            storage_type="ebs",
                            status="SUCCEEDED" if rnd.random() < 0.8 else "FAILED",
                        )
                    )
                for w, workload in enumerate(("randread", "seqwrite")):
                    for job in ("job-a", None):
                        for direction in ("read", "write"):
                            # numjobs without group_reporting: the job several times
                            for job_index in range(rnd.choice([1, 1, 1, 2, 3])):
                                fio.append(
                                    FIO_RESULTS.row(
                                        run_id=run,
                                        cell_id=cell,
                                        slot_index=slot,
                                        workload_index=w,
                                        workload=workload,
                                        job=job,
                                        job_index=job_index,
                                        direction=direction,
                                        error=rnd.choice([0, 0, 0, 0, 0, None, 5]),
                                        iops=value("double"),
                                        bw_bytes=value("bigint"),
                                        clat_mean_ns=value("double"),
                                        clat_p50_ns=value("bigint"),
                                        clat_p90_ns=value("bigint"),
                                        clat_p99_ns=value("bigint"),
                                        # a metric fio did not report for this cell at all
                                        clat_p99_9_ns=None if cell == "c001" else value("bigint"),
                                        clat_max_ns=value("bigint"),
                                    )
                                )
                for operation in ("read", "write"):
                    for request in range(rnd.randint(0, 6)):
                        ioping.append(
                            IOPING_REQUESTS.row(
                                run_id=run,
                                cell_id=cell,
                                slot_index=slot,
                                workload_index=2,
                                request=request,
                                operation=operation,
                                time_ns=value("bigint"),
                            )
                        )
                for phase in ("build", "run"):
                    apps.append(
                        APP_RUNS.row(
                            run_id=run,
                            cell_id=cell,
                            slot_index=slot,
                            workload_index=3,
                            app="kernel",
                            phase=phase,
                            exit_code=rnd.choice([0, 0, 0, 2]),
                            wall_seconds=value("double"),
                        )
                    )
    return {SLOTS: slots, FIO_RESULTS: fio, IOPING_REQUESTS: ioping, APP_RUNS: apps}


def sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((v is None, repr(v)) for v in row.values())


def same(a: Any, b: Any) -> bool:
    """Equal, bit for bit for floats (NaN equal to NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and repr(a) == repr(b))
    return type(a) is type(b) and a == b


def assert_same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert got and len(got) == len(want)
    got, want = sorted(got, key=sort_key), sorted(want, key=sort_key)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w)
        bad = {k: (g[k], w[k]) for k in w if not same(g[k], w[k])}
        assert not bad, (w, bad)


@pytest.fixture(scope="module", params=SEEDS)
def wh(request: pytest.FixtureRequest) -> Iterator[Warehouse]:
    with Warehouse(":memory:") as w:
        for table, rows in planted(request.param).items():
            w.insert_rows(table, rows)
        for name, sql in reference_sql().items():
            w.con.execute(f"CREATE VIEW {name} AS {transpile_view(sql)}")
        yield w


@pytest.mark.parametrize("view", ["slot_metrics", "cell_percentiles"])
def test_view_rows_equal_the_reference(wh: Warehouse, view: str) -> None:
    got = wh.query(f"SELECT * FROM {view}")
    want = wh.query(f"SELECT * FROM ref_{view}")
    assert_same_rows(got, want)
    types = "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {})"
    assert wh.query(types.format(view)) == wh.query(types.format(f"ref_{view}"))


def test_one_run_rows_equal_the_reference(wh: Warehouse) -> None:
    # what `iofleet report` asks: the warehouse's own method for one run
    got = wh.cell_percentiles("run-b")
    want = wh.query("SELECT * FROM ref_cell_percentiles WHERE run_id = ?", ["run-b"])
    assert_same_rows(got, want)


def test_planted_rows_reach_every_branch(wh: Warehouse) -> None:
    # the comparison above means something only if the planted rows exercise each case
    rows = wh.query("SELECT * FROM ref_cell_percentiles")
    sources = {r["metric_source"] for r in rows}
    assert sources == {"fio", "ioping", "app"}
    fio = [r for r in rows if r["metric_source"] == "fio"]
    assert {r["metric"] for r in fio} == set(FIO_METRICS)
    # a metric NULL in every slot of c001 gives no row; NULL/NaN slots are left out
    assert not [r for r in fio if r["cell_id"] == "c001" and r["metric"] == "clat_p99_9_ns"]
    counts = {(r["run_id"], r["cell_id"], r["workload_index"], r["job"], r["direction"]): set()
              for r in fio}  # fmt: skip
    for r in fio:
        counts[(r["run_id"], r["cell_id"], r["workload_index"], r["job"], r["direction"])].add(
            r["slots"]
        )
    assert any(len(c) > 1 for c in counts.values())
    assert any(r["cell_index"] is None for r in rows)  # c002 has no slot rows
    summed = wh.query(
        "SELECT count(*) AS n FROM (SELECT 1 FROM fio_results WHERE coalesce(error, 0) = 0 "
        "GROUP BY run_id, cell_id, slot_index, workload_index, workload, job, direction "
        "HAVING count(*) > 1)"
    )[0]["n"]
    assert summed > 0
