"""json+ bins stored once per histogram (decision 46): the views give the numbers the
per-bin table gave, and a warehouse of the per-bin layout is migrated on open.

The per-bin layout (`fio_latency_bins` as a table, one row per bin, the layout before
decision 46) is rebuilt here from its DDL (`FIO_LATENCY_BINS.duckdb_ddl()`, the columns
it had) and filled with the bin rows of the same artifacts (`expand_bin_blocks`), under
the views of that time (fleet_latency as it was: tests/data/sql_reference/
fleet_latency_before_decision_46.sql; the others unchanged): what an older
iofleet's warehouse held. Artifacts: real fio
json+ outputs (fio 3.33 runs, one of 1,000 reads whose p99.9 is the 1,000th sample;
two jobs; numjobs separate; randrw) spread over several slots and cells.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from iofleet.results.ingest import expand_bin_blocks, rows_and_bin_blocks
from iofleet.results.schema import FIO_LATENCY_BINS, FIO_LATENCY_HISTOGRAMS, TABLES
from iofleet.results.sql import all_views
from iofleet.results.warehouse import SCHEMA_MARK, Warehouse, transpile_view
from tests.unit import rawtree

RUN = "bins-20261126t140000z"
FIO = rawtree.FIXTURES / "fio"
SOURCES = [
    FIO / "versions" / "fio-3.33-jsonplus-1000-reads.json",
    FIO / "jsonplus-two-jobs.json",
    FIO / "jsonplus-numjobs-separate.json",
    FIO / "jsonplus-randrw-default-percentiles.json",
    FIO / "jsonplus-numjobs-grouped.json",
]
VIEWS_OVER_BINS = ("fleet_latency",)
# fleet_latency.sql before decision 46 (its slots were counted on the bin rows)
OLD_FLEET_LATENCY = (
    rawtree.FIXTURES.parent / "data" / "sql_reference" / ("fleet_latency_before_decision_46.sql")
)
OTHER_VIEWS = ("cell_percentiles", "fleet_totals")


def _raw(root: Path) -> Path:
    raw = root / "raw"
    rawtree.write_run(raw, RUN, slots=3)
    for cell in range(2):
        for slot in range(3):
            for w, source in enumerate(SOURCES):
                folder = raw / RUN / f"c{cell:03d}-local-fast-x3-r1" / f"slot-{slot:04d}"
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, folder / f"w{10 + w:02d}-fio-{source.stem}.json")
    return raw


def _view_rows(con: duckdb.DuckDBPyConnection, view: str) -> list[tuple]:
    return con.execute(f"SELECT * FROM {view} ORDER BY ALL").fetchall()


def _old_layout(path: Path, raw: Path) -> None:
    """A warehouse as an iofleet before decision 46 left it: every table but the
    histograms, `fio_latency_bins` a table of one row per bin, the same views."""
    con = duckdb.connect(str(path))
    for table in TABLES:
        if table is not FIO_LATENCY_HISTOGRAMS:
            con.execute(table.duckdb_ddl())
    con.execute(FIO_LATENCY_BINS.duckdb_ddl())
    for name, sql in all_views().items():
        if name == "fleet_latency":  # as it was: every count read from the bin rows
            sql = OLD_FLEET_LATENCY.read_text(encoding="utf-8").strip()
        if name != FIO_LATENCY_BINS.name:
            con.execute(f"CREATE VIEW {name} AS {transpile_view(sql)}")
    con.close()
    with Warehouse(":memory:") as loader:  # the other tables' rows, from today's ingest
        loader.ingest_dir(raw)
        loader.con.execute(f"ATTACH '{path}' AS old")
        for table in TABLES:
            if table is not FIO_LATENCY_HISTOGRAMS:
                loader.con.execute(f"INSERT INTO old.{table.name} SELECT * FROM {table.name}")
        loader.con.execute("DETACH old")
    blocks = []
    for artifact in sorted(raw.rglob("*-fio-*.json")):
        relpath = artifact.relative_to(raw).as_posix()
        blocks += rows_and_bin_blocks(relpath, artifact.read_text())[1] or []
    bins = expand_bin_blocks(blocks)
    assert len(bins) > 10_000
    columns = FIO_LATENCY_BINS.column_names
    with open(path.with_suffix(".bins.csv"), "w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows([row[c] for c in columns] for row in bins)
    con = duckdb.connect(str(path))
    spec = ", ".join(f"'{c.name}': '{c.duckdb_type}'" for c in FIO_LATENCY_BINS.columns)
    con.execute(
        f"INSERT INTO {FIO_LATENCY_BINS.name} SELECT * FROM read_csv(?, header = false, "
        f"auto_detect = false, columns = {{{spec}}})",
        [str(path.with_suffix(".bins.csv"))],
    )
    con.close()


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bins")
    raw = _raw(root)
    old = root / "old.duckdb"
    _old_layout(old, raw)
    new = root / "new.duckdb"
    with Warehouse(new) as wh:
        stats = wh.ingest_dir(raw)
        assert stats.errors == 0
    return old, new


def test_the_views_give_the_numbers_of_the_per_bin_table(warehouses: tuple[Path, Path]) -> None:
    old, new = warehouses
    with duckdb.connect(str(old), read_only=True) as before, Warehouse(new) as after:
        for view in (*VIEWS_OVER_BINS, *OTHER_VIEWS):
            expected = _view_rows(before, view)
            assert expected, view
            assert _view_rows(after.con, view) == expected, view
        # and the bins themselves, row for row
        expected = _view_rows(before, FIO_LATENCY_BINS.name)
        assert _view_rows(after.con, FIO_LATENCY_BINS.name) == expected
        # fio's own p99.9 of the 1,000 reads (the 1,000th sample), merged over 3 slots
        # of the same run: the same bins three times, so the same percentile
        (p999,) = after.con.execute(
            "SELECT DISTINCT p99_9_ns FROM fleet_latency WHERE workload = ?",
            ["fio-3.33-jsonplus-1000-reads"],
        ).fetchall()
        text = SOURCES[0].read_text()
        doc = json.loads(text[text.index("{") :])
        assert p999 == (doc["jobs"][0]["read"]["clat_ns"]["percentile"]["99.900000"],)


def test_a_warehouse_of_the_per_bin_layout_is_migrated_on_open(
    warehouses: tuple[Path, Path], tmp_path: Path
) -> None:
    old, new = warehouses
    path = tmp_path / "old.duckdb"
    shutil.copy(old, path)
    with duckdb.connect(str(path), read_only=True) as before:
        expected = {v: _view_rows(before, v) for v in (*VIEWS_OVER_BINS, *OTHER_VIEWS)}
        (bins,) = before.execute(f"SELECT count(*) FROM {FIO_LATENCY_BINS.name}").fetchone()
    # when an iofleet of this version opens it
    with Warehouse(path) as wh:
        # then the bins are histograms, the per-bin table is a view, the numbers are the same
        kinds = dict(
            wh.con.execute(
                "SELECT table_name, table_type FROM information_schema.tables "
                "WHERE table_name IN ('fio_latency_bins', 'fio_latency_histograms')"
            ).fetchall()
        )
        assert kinds == {"fio_latency_bins": "VIEW", "fio_latency_histograms": "BASE TABLE"}
        assert wh.query("SELECT count(*) AS n FROM fio_latency_bins")[0]["n"] == bins
        for view, rows in expected.items():
            assert _view_rows(wh.con, view) == rows, view
        assert wh.con.execute(f"SELECT count(*) FROM {SCHEMA_MARK}").fetchone() == (1,)
    # and the migrated file holds what a fresh ingest of the same artifacts holds
    sql = "SELECT * FROM fio_latency_histograms ORDER BY ALL"
    with Warehouse(path) as migrated, Warehouse(new) as fresh:
        assert migrated.query(sql) == fresh.query(sql)


def test_the_histograms_are_far_fewer_rows_than_the_bins(warehouses: tuple[Path, Path]) -> None:
    _, new = warehouses
    with Warehouse(new) as wh:
        (histograms,) = wh.con.execute("SELECT count(*) FROM fio_latency_histograms").fetchone()
        (bins,) = wh.con.execute("SELECT count(*) FROM fio_latency_bins").fetchone()
        (results,) = wh.con.execute(
            "SELECT count(*) FROM fio_results WHERE clat_p50_ns IS NOT NULL"
        ).fetchone()
    assert histograms == results  # one histogram per fio record with bins
    assert bins > 20 * histograms


def _state(path: Path) -> tuple[bytes, int, list[str]]:
    """The file's bytes and mtime, and the names beside it (a WAL would show)."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())


def test_a_warehouse_of_the_per_bin_layout_opened_read_only_is_read_as_migrated_unwritten(
    warehouses: tuple[Path, Path], tmp_path: Path
) -> None:
    old, new = warehouses
    path = tmp_path / "old.duckdb"
    shutil.copy(old, path)
    migrated = tmp_path / "migrated.duckdb"
    shutil.copy(old, migrated)
    with Warehouse(migrated):  # brought up to date, as any writing command does
        pass
    before = _state(path)
    # when a reading command opens it (report, compare: read_only)
    with Warehouse(path, read_only=True) as wh, Warehouse(migrated, read_only=True) as want:
        # then every table and view reads as in the migrated copy, row for row
        for name in (*(t.name for t in TABLES), *all_views()):
            assert _view_rows(wh.con, name) == _view_rows(want.con, name), name
        assert wh.query("SELECT count(*) AS n FROM fio_latency_histograms")[0]["n"] > 0
        # and what report and compare read of the run
        assert wh.cell_percentiles(RUN) == want.cell_percentiles(RUN)
        # and the connection cannot write, should anything try
        with pytest.raises(duckdb.InvalidInputException, match="read-only"):
            wh.con.execute("CREATE TABLE main.x (a INT)")
    # and the file was not written: same bytes, same mtime, no WAL beside it
    assert _state(path) == before
    with duckdb.connect(str(path), read_only=True) as con:  # still the per-bin layout
        kinds = dict(
            con.execute(
                "SELECT table_name, table_type FROM information_schema.tables "
                "WHERE table_name IN ('fio_latency_bins', 'fio_latency_histograms')"
            ).fetchall()
        )
        assert kinds == {"fio_latency_bins": "BASE TABLE"}
        assert con.execute(
            f"SELECT count(*) FROM duckdb_tables() WHERE table_name = '{SCHEMA_MARK}'"
        ).fetchone() == (0,)


def test_a_warehouse_lacking_tables_and_columns_opened_read_only_reads_them_as_null(
    tmp_path: Path,
) -> None:
    # given a warehouse of an older iofleet: fio_results without its last column, no
    # cell_costs table, no schema mark, the histograms already in today's layout
    raw = _raw(tmp_path)
    path = tmp_path / "older.duckdb"
    with Warehouse(path) as wh:
        wh.ingest_dir(raw)
        expected = wh.query("SELECT * FROM fio_results ORDER BY ALL")
        wh.con.execute("DROP TABLE cell_costs")
        wh.con.execute(f"DROP TABLE {SCHEMA_MARK}")
        wh.con.execute("DROP VIEW IF EXISTS fleet_totals")
    with duckdb.connect(str(path)) as con:
        for (view,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall():
            con.execute(f"DROP VIEW {view}")  # an iofleet without today's views
        con.execute('ALTER TABLE fio_results DROP COLUMN "host"')
    before = _state(path)
    with Warehouse(path, read_only=True) as wh:
        # then the missing column reads NULL, the missing table empty, the views answer
        got = wh.query("SELECT * FROM fio_results ORDER BY ALL")
        assert got == [{**row, "host": None} for row in expected]
        assert wh.query("SELECT count(*) AS n FROM cell_costs") == [{"n": 0}]
        assert wh.query(f"SELECT count(*) AS n FROM fleet_latency WHERE run_id = '{RUN}'")[0]["n"]
    assert _state(path) == before
