"""Warehouse.ingest_dir on raw trees built from real fixtures."""

from __future__ import annotations

from pathlib import Path

from iofleet.ingest import BinBlock, expand_bin_blocks
from iofleet.warehouse import Warehouse
from tests.unit import rawtree

RUN = "demo-20261121t051200z"


def _count(wh: Warehouse, table: str) -> int:
    return wh.query(f"SELECT count(*) AS n FROM {table}")[0]["n"]


def test_ingest_dir_loads_every_table_of_a_run(tmp_path: Path) -> None:
    # given
    rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    # when
    with Warehouse(tmp_path / "w.duckdb") as wh:
        stats = wh.ingest_dir(tmp_path / "raw")
        # then
        assert stats.runs == [RUN]
        assert stats.objects == 1 + 1 + 2 * 5
        assert stats.errors == 0
        for table in ("runs", "fio_results", "fio_latency_bins", "ioping_requests"):
            assert _count(wh, table) == stats.rows[table] > 0, table
        assert _count(wh, "slots") == 2
        assert _count(wh, "app_runs") == 3  # populate once + a run per slot


def test_ingesting_twice_gives_no_duplicates(tmp_path: Path) -> None:
    rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "raw")
        before = {t: _count(wh, t) for t in ("runs", "slots", "fio_latency_bins", "app_runs")}
        wh.ingest_dir(tmp_path / "raw")
        after = {t: _count(wh, t) for t in before}
    assert after == before


def test_reingesting_keeps_other_runs_that_are_no_longer_under_the_root(tmp_path: Path) -> None:
    rawtree.write_run(tmp_path / "a", "run-a", slots=1)
    rawtree.write_run(tmp_path / "b", "run-b", slots=1)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "a")
        wh.ingest_dir(tmp_path / "b")
        assert [r["run_id"] for r in wh.query("SELECT run_id FROM runs ORDER BY run_id")] == [
            "run-a",
            "run-b",
        ]


def test_a_broken_artifact_becomes_an_ingest_error_and_the_rest_loads(tmp_path: Path) -> None:
    base = rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    broken = base / "c000-local-fast-x2-r1" / "slot-0001" / "w00-fio-randread.json"
    broken.write_text('{"fio version": "fio-3.33", "jobs": [')
    with Warehouse(tmp_path / "w.duckdb") as wh:
        stats = wh.ingest_dir(tmp_path / "raw")
        errors = wh.ingest_errors(RUN)
        slots_with_fio = wh.query("SELECT DISTINCT slot_index FROM fio_results")
    assert stats.errors == 1
    assert errors[0]["object_key"].endswith("slot-0001/w00-fio-randread.json")
    assert slots_with_fio == [{"slot_index": 0}]


def test_views_read_the_ingested_run(tmp_path: Path) -> None:
    rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "raw")
        pcts = wh.cell_percentiles(RUN)
        fleet = wh.fleet_latency(RUN)
    walls = [r for r in pcts if r["metric"] == "wall_seconds"]
    assert [(r["slots"], r["p0"], r["p100"]) for r in walls] == [(2, 60.0, 61.0)]
    assert {r["metric_source"] for r in pcts} == {"fio", "ioping", "app"}
    assert fleet and all(r["storage_label"] == "local-fast" and r["slots"] == 2 for r in fleet)


def test_latest_run_is_the_one_started_last(tmp_path: Path) -> None:
    rawtree.write_run(tmp_path / "raw", "b-older", slots=1, started_at="2026-01-01T00:00:00Z")
    rawtree.write_run(tmp_path / "raw", "a-newer", slots=1, started_at="2026-02-01T00:00:00Z")
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "raw")
        assert wh.latest_run_id() == "a-newer"


def test_an_empty_warehouse_has_no_latest_run(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        assert wh.latest_run_id() is None


def test_tables_persist_across_reopening(tmp_path: Path) -> None:
    rawtree.write_run(tmp_path / "raw", RUN, slots=1)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "raw")
    with Warehouse(tmp_path / "w.duckdb") as wh:
        assert wh.latest_run_id() == RUN
        assert wh.cell_percentiles(RUN)


def test_a_warehouse_from_an_older_schema_gains_new_columns(tmp_path: Path) -> None:
    # given a warehouse whose slots table predates the volume_id column
    path = tmp_path / "old.duckdb"
    with Warehouse(path) as wh:
        wh.con.execute("ALTER TABLE slots DROP COLUMN volume_id")
    # when it is opened again and a run is ingested
    rawtree.write_run(tmp_path / "raw", "demo-20261121t051200z")
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
        rows = wh.query("SELECT volume_id FROM slots")
    # then
    assert rows and all(r["volume_id"] is None for r in rows)


def test_bin_blocks_load_the_same_rows_as_bin_dicts(tmp_path: Path) -> None:
    # given blocks whose shared columns need CSV quoting, and an empty block
    blocks = [
        BinBlock((RUN, "c0", 0, 0, "w", 'a,b "c"\nd', 0, "read"), [(100, 2), (250, 1)]),
        BinBlock((RUN, "c0", 1, 0, "w", "", 1, "write"), [(7, 5)]),
        BinBlock((RUN, "c0", 2, 0, "w", "j", 0, "read"), []),
    ]
    with Warehouse(":memory:") as by_blocks, Warehouse(":memory:") as by_rows:
        # when one loads the blocks and the other their rows
        assert by_blocks.insert_bin_blocks(blocks) == 3
        by_rows.insert_rows("fio_latency_bins", expand_bin_blocks(blocks))
        # then both hold the same rows, in the same order
        sql = "SELECT * FROM fio_latency_bins"
        assert by_blocks.query(sql) == by_rows.query(sql)
        assert [r["job"] for r in by_blocks.query(sql)] == ['a,b "c"\nd', 'a,b "c"\nd', None]
