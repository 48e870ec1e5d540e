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
