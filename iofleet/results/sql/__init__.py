"""The results views, written once in Trino/Athena SQL (the single source).

Each `NAME.sql` file in this folder holds one plain `SELECT` (no `CREATE
VIEW`, no trailing semicolon): the body of the view `NAME`. Consumers wrap it:
the DuckDB warehouse transpiles it with sqlglot (`read="trino"`,
`write="duckdb"`) and runs `CREATE OR REPLACE VIEW NAME AS ...`; the Glue/Athena
side creates a Presto view from the same text. `VIEW_NAMES` lists the views in
dependency order (a view only reads tables and the views listed before it).

Rules the files keep to, so Trino, Athena and DuckDB agree bit for bit:
no approximate aggregates (`approx_percentile`) and no engine-only functions;
no integer division (ratios are cast to DOUBLE first, or replaced by integer
comparisons); every cast explicit; columns that could be keywords quoted.

Stdlib only (the Lambdas and the CDK app read these files too).
"""

from __future__ import annotations

from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent

VIEW_NAMES: tuple[str, ...] = (
    "fio_latency_bins",
    "cells",
    "fio_slot_metrics",
    "slot_metrics",
    "cell_percentiles",
    "fleet_latency",
    "fio_results_expected",
    "expected_vs_measured",
    "start_skew",
    "fleet_totals",
)

PERCENTILES: tuple[int, ...] = (0, 50, 75, 90, 98, 100)
"""The percentiles `cell_percentiles` reports (columns p0 ... p100)."""


def view_sql(name: str) -> str:
    """The Trino/Athena `SELECT` for view `name` (KeyError if unknown)."""
    if name not in VIEW_NAMES:
        raise KeyError(name)
    return (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8").strip().rstrip(";")


def all_views() -> dict[str, str]:
    """Every view's Trino/Athena `SELECT`, in dependency order."""
    return {name: view_sql(name) for name in VIEW_NAMES}


QUERY_DIR = SQL_DIR / "queries"
"""Queries (not views) over the views, same dialect and rules: `queries/NAME.sql`."""


def query_sql(name: str) -> str:
    """The Trino/Athena `SELECT` of query `name` under queries/ (KeyError if unknown)."""
    path = QUERY_DIR / f"{name}.sql"
    if not name.isidentifier() or not path.is_file():
        raise KeyError(name)
    return path.read_text(encoding="utf-8").strip().rstrip(";")
