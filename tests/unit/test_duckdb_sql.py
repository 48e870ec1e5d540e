"""The stored DuckDB text of the Trino views/queries: fresh, used, and never stale."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iofleet.results import duckdb_sql

ROOT = Path(__file__).resolve().parents[2]


def test_stored_file_is_current() -> None:
    """Regenerate with `python -m iofleet.results.duckdb_sql` when this fails."""
    stored = json.loads(duckdb_sql.CACHE_PATH.read_text(encoding="utf-8"))
    fresh = duckdb_sql.build()
    assert stored["sources"] == fresh["sources"]
    assert stored["sql"] == fresh["sql"]


@pytest.mark.parametrize("name", sorted(duckdb_sql.sources()))
def test_stored_text_is_sqlglots_transpile(name: str) -> None:
    text = duckdb_sql.sources()[name]
    assert duckdb_sql.to_duckdb(text) == duckdb_sql.transpile(text)


def test_edited_source_is_transpiled_not_served_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    text = duckdb_sql.sources()["view:cells"]
    edited = text.replace("SELECT", "SELECT 1 AS edited_marker,", 1)
    assert duckdb_sql.source_key(edited) not in duckdb_sql._stored()
    out = duckdb_sql.to_duckdb(edited)
    assert "edited_marker" in out
    assert out == duckdb_sql.transpile(edited)


def test_warehouse_opens_and_reports_without_sqlglot(tmp_path: Path) -> None:
    """Opening a warehouse (every view created) and the report's queries run from the
    stored text: sqlglot is never imported on that path."""
    code = (
        "import sys\n"
        "from iofleet.results.warehouse import Warehouse\n"
        "from iofleet.report.cli import load_report_data\n"
        f"wh = Warehouse({str(tmp_path / 'w.duckdb')!r})\n"
        "load_report_data(wh, 'no-such-run')\n"
        "wh.close()\n"
        "assert 'sqlglot' not in sys.modules, 'sqlglot was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_an_unnest_of_several_arrays_runs_as_duckdbs_select_list_unnest() -> None:
    import duckdb

    # given Trino's zip of two arrays (unequal lengths: the shorter is padded with NULL)
    trino = "SELECT t.k, u.x, u.y FROM t CROSS JOIN UNNEST(t.a, t.b) AS u (x, y) WHERE t.k > 0"
    text = duckdb_sql.transpile(trino)
    assert "UNNEST(t.a) AS" in text and "JOIN" not in text.upper()
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, [1, 2, 3], [4, 5]), (0, [9], [9]))")
    con.execute("ALTER TABLE t RENAME col0 TO k")
    con.execute("ALTER TABLE t RENAME col1 TO a")
    con.execute("ALTER TABLE t RENAME col2 TO b")
    # then the rows Trino gives: position by position, NULL past the shorter array
    assert sorted(con.execute(text).fetchall(), key=str) == [(1, 1, 4), (1, 2, 5), (1, 3, None)]


@pytest.mark.parametrize(
    "trino",
    [
        "SELECT t.k, u.x FROM t CROSS JOIN UNNEST(t.a, t.b) AS u (x, y) WHERE u.y > 0",
        "SELECT t.k, u.x + 1 AS z FROM t CROSS JOIN UNNEST(t.a, t.b) AS u (x, y)",
        "SELECT t.k, u.x FROM t CROSS JOIN s CROSS JOIN UNNEST(t.a, t.b) AS u (x, y)",
    ],
)
def test_other_uses_of_an_unnest_of_several_arrays_are_refused(trino: str) -> None:
    with pytest.raises(ValueError):
        duckdb_sql.transpile(trino)
