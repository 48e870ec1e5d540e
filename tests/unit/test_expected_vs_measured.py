"""Expectations after a run: run.json's plan -> expectations rows -> the views.

Raw trees are built from real fio output (tests/fixtures); the views run on
DuckDB exactly as the warehouse creates them from the Trino SQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from iofleet.results.ingest import rows_for_artifact
from iofleet.results.schema import EXPECTATIONS, FIO_RESULTS, SLOTS
from iofleet.results.warehouse import Warehouse
from tests.unit.rawtree import cell_doc, write_run

RUN = "demo-20261121t051200z"
CELL = cell_doc()["cell_id"]
MEASURED_IOPS = 19243.512974  # jsonplus-numjobs-grouped.json, job "grouped", write
MEASURED_BW = 315285716


def expected_entry(**changes: object) -> dict:
    entry = {
        "workload_index": 0,
        "workload": "randread",
        "job": "grouped",
        "direction": "write",
        "block_size": 16384,
        "expected_iops": 40000.0,
        "expected_bw_bytes": 655360000,
        "limited_by": "instance",
        "upper_bound": False,
        "seconds_to_exhaust": 1800.0,
        "burst_source": "instance",
        "runtime_s": 180.0,
        "burst_policy": "as-is",
        "phases": [],
    }
    entry.update(changes)
    return entry


def add_plan(run_dir: Path, entries: list[dict], cell_id: str = CELL) -> None:
    doc = json.loads((run_dir / "run.json").read_text())
    doc["plan"] = {"cells": [{"cell_id": cell_id, "expected": entries, "warnings": []}]}
    (run_dir / "run.json").write_text(json.dumps(doc))


@pytest.fixture
def wh() -> Iterator[Warehouse]:
    with Warehouse(":memory:") as w:
        yield w


# -- ingest ----------------------------------------------------------------------


def test_run_json_plan_gives_one_expectations_row_per_entry(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RUN)
    add_plan(run_dir, [expected_entry(), expected_entry(direction="read", expected_iops=None)])

    rows = rows_for_artifact(f"{RUN}/run.json", (run_dir / "run.json").read_text())

    got = rows[EXPECTATIONS.name]
    assert [(r["cell_id"], r["job"], r["direction"]) for r in got] == [
        (CELL, "grouped", "write"),
        (CELL, "grouped", "read"),
    ]
    assert (got[0]["expected_iops"], got[0]["limited_by"], got[0]["upper_bound"]) == (
        40000.0,
        "instance",
        False,
    )
    assert got[1]["expected_iops"] is None


def test_run_json_without_a_plan_gives_no_expectations(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RUN)

    rows = rows_for_artifact(f"{RUN}/run.json", (run_dir / "run.json").read_text())

    assert rows[EXPECTATIONS.name] == []


def test_malformed_expected_entries_are_skipped_not_fatal(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RUN)
    add_plan(run_dir, ["not an object", expected_entry()])

    rows = rows_for_artifact(f"{RUN}/run.json", (run_dir / "run.json").read_text())

    assert len(rows[EXPECTATIONS.name]) == 1
    assert "ingest_errors" not in rows


def test_drain_artifact_is_kept_raw_and_counted_in_no_table() -> None:
    rows = rows_for_artifact(f"{RUN}/{CELL}/slot-0000/w00-drain.json", "{}")

    assert rows == {}


# -- views on real fio output --------------------------------------------------------


def test_every_fio_row_carries_its_expectation_and_ratio(tmp_path: Path, wh: Warehouse) -> None:
    run_dir = write_run(tmp_path, RUN)
    add_plan(run_dir, [expected_entry()])
    wh.ingest_dir(tmp_path)

    rows = wh.query("SELECT * FROM fio_results_expected ORDER BY slot_index")

    assert len(rows) == 2  # two slots, one (job, direction) each
    for row in rows:
        assert (row["expected_iops"], row["limited_by"]) == (40000.0, "instance")
        assert row["iops_ratio"] == pytest.approx(MEASURED_IOPS / 40000)
        assert row["bw_ratio"] == pytest.approx(MEASURED_BW / 655360000)


def test_fio_row_without_an_expectation_has_null_ratio(tmp_path: Path, wh: Warehouse) -> None:
    write_run(tmp_path, RUN)  # run.json has no plan
    wh.ingest_dir(tmp_path)

    rows = wh.query("SELECT limited_by, iops_ratio, bw_ratio FROM fio_results_expected")

    assert rows and all(
        r == {"limited_by": None, "iops_ratio": None, "bw_ratio": None} for r in rows
    )


def test_expected_vs_measured_per_cell_job_and_direction(tmp_path: Path, wh: Warehouse) -> None:
    run_dir = write_run(tmp_path, RUN)
    add_plan(run_dir, [expected_entry()])
    wh.ingest_dir(tmp_path)

    [row] = wh.query("SELECT * FROM expected_vs_measured WHERE run_id = ?", [RUN])

    assert (row["cell_id"], row["storage_label"], row["job"], row["direction"]) == (
        CELL,
        "local-fast",
        "grouped",
        "write",
    )
    assert row["slots"] == 2
    assert row["iops_p50"] == pytest.approx(MEASURED_IOPS)
    assert row["iops_ratio"] == pytest.approx(MEASURED_IOPS / 40000)
    assert row["bw_ratio"] == pytest.approx(MEASURED_BW / 655360000)
    assert (row["limited_by"], row["seconds_to_exhaust"]) == ("instance", 1800.0)


def test_unknown_expectation_gives_null_ratios(tmp_path: Path, wh: Warehouse) -> None:
    run_dir = write_run(tmp_path, RUN)
    unknown = expected_entry(expected_iops=None, expected_bw_bytes=None, limited_by="unknown")
    add_plan(run_dir, [unknown])
    wh.ingest_dir(tmp_path)

    [row] = wh.query("SELECT * FROM expected_vs_measured")

    assert (row["limited_by"], row["iops_ratio"], row["bw_ratio"]) == ("unknown", None, None)
    assert row["iops_p50"] == pytest.approx(MEASURED_IOPS)


def test_expectation_of_a_cell_that_measured_nothing_is_still_listed(
    tmp_path: Path, wh: Warehouse
) -> None:
    run_dir = write_run(tmp_path, RUN)
    add_plan(run_dir, [expected_entry(), expected_entry(job="other", workload_index=3)])
    wh.ingest_dir(tmp_path)

    rows = wh.query(
        "SELECT job, slots, iops_p50, iops_ratio FROM expected_vs_measured ORDER BY job"
    )

    assert rows[1] == {"job": "other", "slots": 0, "iops_p50": None, "iops_ratio": None}


# -- across slots: mean, percentiles and the ratios ------------------------------------


def _slot_rows(wh: Warehouse, iops: list[float], bw: list[int]) -> None:
    wh.insert_rows(
        SLOTS,
        [
            SLOTS.row(run_id="r", cell_id="c", slot_index=i, cell_index=0, fleet_size=len(iops))
            for i in range(len(iops))
        ],
    )
    wh.insert_rows(
        FIO_RESULTS,
        [
            FIO_RESULTS.row(
                run_id="r",
                cell_id="c",
                slot_index=i,
                workload_index=0,
                workload="w",
                job="j",
                job_index=0,
                direction="read",
                iops=v,
                bw_bytes=b,
                error=0,
            )
            for i, (v, b) in enumerate(zip(iops, bw, strict=True))
        ],
    )
    wh.insert_rows(
        EXPECTATIONS,
        [
            EXPECTATIONS.row(
                run_id="r",
                cell_id="c",
                workload_index=0,
                workload="w",
                job="j",
                direction="read",
                expected_iops=100.0,
                expected_bw_bytes=1000,
                limited_by="volume",
            )
        ],
    )


def test_ratios_use_the_median_and_the_worst_slot(wh: Warehouse) -> None:
    _slot_rows(wh, iops=[50.0, 90.0, 100.0, 70.0], bw=[500, 900, 1000, 700])

    [row] = wh.query("SELECT * FROM expected_vs_measured WHERE run_id = 'r'")

    assert row["slots"] == 4
    assert row["iops_mean"] == pytest.approx(77.5)
    assert row["iops_p50"] == pytest.approx(80.0)  # numpy's linear rule: (70 + 90) / 2
    assert row["iops_ratio"] == pytest.approx(0.8)
    assert row["iops_min_ratio"] == pytest.approx(0.5)
    assert row["bw_ratio"] == pytest.approx(0.8)
    assert row["bw_min_ratio"] == pytest.approx(0.5)
