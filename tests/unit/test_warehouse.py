"""Warehouse.ingest_dir on raw trees built from real fixtures."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import duckdb
import pytest

from iofleet.results import ingest
from iofleet.results.ingest import BinBlock, histogram_rows
from iofleet.results.parsers.ioping import parse_ioping
from iofleet.results.warehouse import (
    SCHEMA_MARK,
    Warehouse,
    interrupt_open_warehouses,
    schema_fingerprint,
)
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
        for table in ("runs", "fio_results", "fio_latency_histograms", "ioping_requests"):
            assert _count(wh, table) == stats.rows[table] > 0, table
        assert _count(wh, "fio_latency_bins") > stats.rows["fio_latency_histograms"]
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


def test_a_warehouse_marked_with_another_schema_gets_the_current_views(tmp_path: Path) -> None:
    # given a warehouse an iofleet with other views made: its mark holds another fingerprint
    path = tmp_path / "old.duckdb"
    rawtree.write_run(tmp_path / "raw", RUN, slots=1)
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
        wh.con.execute("CREATE OR REPLACE VIEW cell_percentiles AS SELECT 1 AS stale")
        wh.con.execute(f"UPDATE {SCHEMA_MARK} SET fingerprint = 'an older schema'")
    # when it is opened again
    with Warehouse(path) as wh:
        rows = wh.cell_percentiles(RUN)
        mark = wh.query(f"SELECT fingerprint FROM {SCHEMA_MARK}")
    # then the view is the current one, and the mark says so
    assert rows and "p50" in rows[0] and "stale" not in rows[0]
    assert mark == [{"fingerprint": schema_fingerprint()}]


def test_a_view_replaced_after_the_mark_is_made_current_again(tmp_path: Path) -> None:
    # given a current warehouse whose view an older iofleet (which knows no mark) or a
    # hand edit replaced afterwards
    path = tmp_path / "w.duckdb"
    rawtree.write_run(tmp_path / "raw", RUN, slots=1)
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE OR REPLACE VIEW cell_percentiles AS SELECT 1 AS stale")
    # when it is opened again
    with Warehouse(path) as wh:
        rows = wh.cell_percentiles(RUN)
    # then the view is the current one again
    assert rows and "p50" in rows[0] and "stale" not in rows[0]


def test_opening_a_current_warehouse_leaves_its_file_as_it_was(tmp_path: Path) -> None:
    # given a warehouse with a run, made by this iofleet and closed
    path = tmp_path / "w.duckdb"
    rawtree.write_run(tmp_path / "raw", RUN, slots=1)
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
    before = path.read_bytes()
    # when it is opened to be read, and closed
    with Warehouse(path) as wh:
        assert wh.latest_run_id() == RUN
    # then nothing was written to it (its schema was not created again)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw", "w.duckdb"]


def test_bin_blocks_load_the_same_rows_as_bin_dicts(tmp_path: Path) -> None:
    # given blocks whose shared columns need CSV quoting, and an empty block
    blocks = [
        BinBlock((RUN, "c0", 0, 0, "w", 'a,b "c"\nd', 0, "read"), [(100, 2), (250, 1)]),
        BinBlock((RUN, "c0", 1, 0, "w", "", 1, "write"), [(7, 5)]),
        BinBlock((RUN, "c0", 2, 0, "w", "j", 0, "read"), []),
    ]
    with Warehouse(":memory:") as by_blocks, Warehouse(":memory:") as by_rows:
        # when one loads the blocks and the other their rows
        assert by_blocks.insert_bin_blocks(blocks) == 2  # histograms: the empty block gives none
        by_rows.insert_rows("fio_latency_histograms", histogram_rows(blocks))
        # then both hold the same rows
        for sql in (
            "SELECT * FROM fio_latency_histograms ORDER BY slot_index",
            "SELECT * FROM fio_latency_bins ORDER BY slot_index, bin_ns",
        ):
            assert by_blocks.query(sql) == by_rows.query(sql)
        rows = by_blocks.query("SELECT * FROM fio_latency_bins ORDER BY slot_index, bin_ns")
        assert [r["job"] for r in rows] == ['a,b "c"\nd', 'a,b "c"\nd', None]
        assert [(r["bin_ns"], r["count"]) for r in rows] == [(100, 2), (250, 1), (7, 5)]


_QUOTING_BLOCKS = [
    BinBlock((RUN, "c0", 0, 0, "w", 'a,b "c"\nd', 0, "read"), [(100, 2), (250, 1)]),
    BinBlock((RUN, "c0", 1, 0, "w", "", 1, "write"), [(7, 5)]),
    BinBlock((RUN, "c0", 2, 0, "w", "j", 0, "read"), []),
    BinBlock((RUN, "c\u00e9 \U0001f600", 3, 1, "w", "j", 2**31 - 1, "read"), [(2**63 - 1, 2**62)]),
]


@pytest.mark.parametrize("slots", [1, 12])
def test_columnar_and_text_bin_loads_hold_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slots: int
) -> None:
    """The histograms' JSON lines written by orjson and by the stdlib encoder, and the
    generic CSV load of the same rows (`insert_rows`), hold the same rows: real fio json+
    artifacts and blocks needing quoting, NULLs, non-ASCII text and int64 extremes."""
    from iofleet.results import warehouse

    rawtree.write_run(tmp_path / "raw", RUN, slots=slots)
    sql = "SELECT * FROM fio_latency_histograms ORDER BY ALL"
    loaded = {}
    for name in ("orjson", "json"):
        if name == "json":
            monkeypatch.setattr(warehouse, "_orjson", None)
        with Warehouse(":memory:") as wh:
            stats = wh.ingest_dir(tmp_path / "raw")
            assert stats.errors == 0
            assert wh.insert_bin_blocks(_QUOTING_BLOCKS) == 3
            loaded[name] = wh.query(sql)
    with Warehouse(":memory:") as wh:
        wh.insert_rows("fio_latency_histograms", histogram_rows(_QUOTING_BLOCKS))
        by_csv = wh.query(sql)
    assert loaded["orjson"] == loaded["json"]
    assert len(loaded["orjson"]) == stats.rows["fio_latency_histograms"] + 3
    planted = [r for r in loaded["orjson"] if r["cell_id"] in ("c0", "c\u00e9 \U0001f600")]
    assert planted == by_csv  # both in ORDER BY ALL order
    jobs = {r["job"] for r in loaded["orjson"]}
    assert 'a,b "c"\nd' in jobs and None in jobs  # "" loads as NULL on every path
    extreme = [r for r in loaded["orjson"] if r["job_index"] == 2**31 - 1]
    assert [(r["bins_ns"], r["counts"]) for r in extreme] == [([2**63 - 1], [2**62])]


def _poison(base: Path) -> dict[str, str]:
    """Poisoned artifacts beside good ones; returns object key -> the field its reason names."""
    cell = base / "c000-local-fast-x2-r1"
    run_doc = rawtree.run_doc(RUN) | {"description": "a \ud800 run"}  # a lone surrogate
    (base / "run.json").write_text(json.dumps(run_doc))
    fio = json.loads(rawtree.FIO_JSONPLUS.read_text())
    fio["jobs"][0]["write"]["io_bytes"] = 2**64
    (cell / "slot-0001" / "w00-fio-randread.json").write_text(json.dumps(fio))
    (cell / "slot-0000" / "slot.json").write_text(
        json.dumps(rawtree.slot_doc() | {"exit_code": 2**64})
    )
    wild = cell / "slot-99999999999"
    wild.mkdir()
    (wild / "manifest.json").write_text(
        json.dumps(rawtree.manifest_doc(RUN, rawtree.cell_doc(), 0))
    )
    manifest = rawtree.manifest_doc(RUN, rawtree.cell_doc(), 1) | {"cpus": 2**40}
    (cell / "slot-0001" / "manifest.json").write_text(json.dumps(manifest))
    prefix = f"{RUN}/c000-local-fast-x2-r1"
    return {
        f"{RUN}/run.json": "runs.description",
        f"{prefix}/slot-0001/w00-fio-randread.json": "io_bytes",
        f"{prefix}/slot-0000/slot.json": "slots.exit_code",
        f"{prefix}/slot-99999999999/manifest.json": "slot_index",
        f"{prefix}/slot-0001/manifest.json": "slots.cpus",
    }


def test_poisoned_artifacts_cost_only_their_own_rows_and_reingest_works(tmp_path: Path) -> None:
    # given a good run in which five artifacts hold values no column can hold
    base = rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    rawtree.write_run(tmp_path / "raw", "other-run", slots=1)
    poisoned = _poison(base)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        for _ in range(2):  # and a second ingest into the same warehouse works the same
            # when
            stats = wh.ingest_dir(tmp_path / "raw")
            # then each poisoned artifact is one ingest error naming its field
            errors = {e["object_key"]: e["reason"] for e in wh.ingest_errors(RUN)}
            assert sorted(errors) == sorted(poisoned)
            for key, field in poisoned.items():
                assert field in errors[key], errors[key]
            assert stats.errors == len(poisoned)
            # and the good artifacts' rows are all there
            fio_slots = wh.query(
                "SELECT DISTINCT run_id, slot_index FROM fio_results ORDER BY run_id, slot_index"
            )
            assert fio_slots == [
                {"run_id": RUN, "slot_index": 0},
                {"run_id": "other-run", "slot_index": 0},
            ]
            slots = wh.query(
                "SELECT slot_index, status, exit_code, cpus FROM slots WHERE run_id = ? "
                "ORDER BY slot_index",
                [RUN],
            )
            assert slots == [
                {"slot_index": 0, "status": None, "exit_code": None, "cpus": 2},  # manifest
                {"slot_index": 1, "status": "SUCCEEDED", "exit_code": 0, "cpus": None},
            ]
            assert _count(wh, "runs") == 1  # other-run's; RUN's run.json is the error
            assert wh.query("SELECT count(*) AS n FROM ioping_requests WHERE run_id = ?", [RUN])[0][
                "n"
            ] == 2 * len(parse_ioping(rawtree.IOPING_READ.read_text()).requests)
            assert _count(wh, "app_runs") == 3 + 2


def test_a_run_folder_whose_name_is_not_utf8_is_an_ingest_error(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    rawtree.write_run(raw, RUN, slots=1)
    bad = os.path.join(os.fsencode(raw), b"run-\xff")
    os.makedirs(bad)
    with open(os.path.join(bad, b"run.json"), "w") as out:
        out.write(json.dumps(rawtree.run_doc("x") | {"run_id": None}))
    with Warehouse(tmp_path / "w.duckdb") as wh:
        stats = wh.ingest_dir(raw)
        (error,) = wh.query("SELECT run_id, object_key, reason FROM ingest_errors")
        assert _count(wh, "fio_results") > 0
    assert error["run_id"] == "run-\\udcff" and error["object_key"] == "run-\\udcff/run.json"
    assert "not valid UTF-8" in error["reason"]
    assert stats.runs == ["demo-20261121t051200z", "run-\\udcff"]


def test_a_value_the_checks_miss_costs_only_its_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the column checks switched off (standing in for a value they do not know
    # about), so DuckDB itself refuses the bulk load
    monkeypatch.setattr(ingest, "_check_rows", lambda rows: None)
    base = rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    (base / "c000-local-fast-x2-r1" / "slot-0000" / "slot.json").write_text(
        json.dumps(rawtree.slot_doc() | {"exit_code": 2**64})
    )
    with Warehouse(tmp_path / "w.duckdb") as wh:
        # when
        stats = wh.ingest_dir(tmp_path / "raw")
        # then the warehouse loads artifact by artifact: only that slot's row is lost
        (error,) = wh.ingest_errors(RUN)
        assert error["object_key"] == f"{RUN}/c000-local-fast-x2-r1/slot-0000/slot"
        assert "the warehouse refused it" in error["reason"]
        assert stats.errors == 1
        assert [r["slot_index"] for r in wh.query("SELECT slot_index FROM slots")] == [1]
        assert _count(wh, "fio_results") == stats.rows["fio_results"] > 0
        assert _count(wh, "fio_latency_histograms") == stats.rows["fio_latency_histograms"] > 0
        assert _count(wh, "runs") == 1


# --- a failed open leaves nothing open --------------------------------------------


def _marked_by(tmp_path: Path, mark_sql: str) -> Path:
    """A warehouse file whose schema mark is a view running `mark_sql` (what reading the
    mark then does: fail, or run until interrupted)."""
    path = tmp_path / "w.duckdb"
    con = duckdb.connect(str(path))
    con.execute(f"CREATE VIEW {SCHEMA_MARK} AS {mark_sql}")
    con.close()
    return path


def _fds_on(path: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own fd, closed since
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


def _opens_read_write(path: Path) -> bool:
    """The file opens read-write in this process and takes a table (DuckDB refuses while a
    read-only connection to it is open here)."""
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE after_the_failure AS SELECT 42 AS x")
        return con.execute("SELECT x FROM after_the_failure").fetchall() == [(42,)]
    finally:
        con.close()


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "read-write"])
def test_an_open_whose_first_query_fails_leaves_the_file_closed(
    tmp_path: Path, read_only: bool
) -> None:
    # given a warehouse whose schema mark cannot be read (the query raises)
    path = _marked_by(tmp_path, "SELECT error('unreadable') AS fingerprint, '' AS catalog")
    # when it is opened
    with pytest.raises(duckdb.InvalidInputException, match="unreadable"):
        Warehouse(path, read_only=read_only)
    # then no descriptor of it is left, and it opens read-write in this same process
    assert _fds_on(path) == []
    assert _opens_read_write(path)


def test_an_open_interrupted_in_its_first_query_leaves_the_file_closed(tmp_path: Path) -> None:
    # given a warehouse whose schema mark takes for ever to read
    path = _marked_by(
        tmp_path,
        "SELECT count(*)::VARCHAR AS fingerprint, '' AS catalog FROM range(1000000000000000)",
    )
    # when a read-only open is interrupted (as a stop signal's watcher does) in that query
    done = threading.Event()

    def interrupt() -> None:
        while not done.is_set():  # until it is interrupted: a call before the query is lost
            interrupt_open_warehouses()

    watcher = threading.Thread(target=interrupt)
    watcher.start()
    try:
        with pytest.raises(duckdb.InterruptException):
            Warehouse(path, read_only=True)
    finally:
        done.set()
        watcher.join()
    # then no descriptor of it is left, and it opens read-write in this same process
    assert _fds_on(path) == []
    assert _opens_read_write(path)


def test_a_schema_cut_short_leaves_no_half_made_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given views whose last one DuckDB refuses (it reads a table that does not exist)
    from iofleet.results import sql as view_files

    views = view_files.all_views()
    monkeypatch.setattr(
        view_files, "all_views", lambda: {**views, "broken": "SELECT * FROM no_such_table"}
    )
    path = tmp_path / "w.duckdb"
    # when a new warehouse is made
    with pytest.raises(duckdb.CatalogException):
        Warehouse(path)
    # then none of its schema was kept: no table, no view
    with duckdb.connect(str(path)) as con:
        made = con.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL "
            "SELECT view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
    assert made == []
    # and with the views fixed, opening it again makes the whole schema
    monkeypatch.setattr(view_files, "all_views", lambda: views)
    rawtree.write_run(tmp_path / "raw", RUN, slots=1)
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
        assert wh.cell_percentiles(RUN)
        assert wh.query(f"SELECT fingerprint FROM {SCHEMA_MARK}") == [
            {"fingerprint": schema_fingerprint()}
        ]
