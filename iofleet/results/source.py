"""Where `iofleet report` and `iofleet compare` read from: one interface, two backends.

A `ResultsSource` runs one SELECT written in Trino/Athena SQL (the dialect of
iofleet/results/sql: the views and queries/) with `?` placeholders bound in
order, and returns the rows as dicts of Python values (str, int, float, bool,
Decimal, datetime, date, None):

- `iofleet.results.warehouse.Warehouse` (DuckDB) transpiles the text with
  sqlglot (read="trino") and runs it;
- `iofleet.aws.athena.AthenaSource` runs the text as written
  (StartQueryExecution with ExecutionParameters, results paged and converted by
  their ResultSetMetadata types).

Every read of the report and of compare is one of the functions below (or a
view/query of iofleet/results/sql through `named_query`), so neither branches on
the backend. `where` names what the user pointed at (`--warehouse PATH`,
`--athena`), for messages.

Stdlib only: the Summarize Lambda renders its report.html through this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from iofleet.results.sql import query_sql

ORDER_CELLS = "cell_index NULLS LAST, cell_id"


class ResultsSource(Protocol):
    where: str

    def select(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        """Rows of one Trino/Athena SELECT; `?` bound to `params` in order."""
        ...


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


RUN_IDS_SQL = (
    "SELECT run_id, max(started_at) AS started FROM ("
    " SELECT run_id, started_at FROM runs"
    " UNION ALL SELECT run_id, CAST(NULL AS TIMESTAMP) AS started_at FROM slots"
    " UNION ALL SELECT run_id, CAST(NULL AS TIMESTAMP) AS started_at FROM fio_results"
    ") r GROUP BY run_id ORDER BY started DESC NULLS LAST, run_id DESC"
)


def run_ids(src: ResultsSource) -> list[str]:
    """Every run id, newest first (by started_at, then id)."""
    return [str(r["run_id"]) for r in src.select(RUN_IDS_SQL)]


def known_runs(src: ResultsSource, wanted: Sequence[str]) -> set[str]:
    """Those of `wanted` that have any row in runs, slots or fio_results."""
    if not wanted:
        return set()
    marks = _marks(wanted)
    rows = src.select(
        "SELECT DISTINCT run_id FROM ("
        f" SELECT run_id FROM runs WHERE run_id IN ({marks})"
        f" UNION ALL SELECT run_id FROM slots WHERE run_id IN ({marks})"
        f" UNION ALL SELECT run_id FROM fio_results WHERE run_id IN ({marks})"
        ") r",
        [*wanted, *wanted, *wanted],
    )
    return {str(r["run_id"]) for r in rows}


def known_text(src: ResultsSource) -> str:
    """'(known: a, b, c, d, e, ...)': the newest five run ids, for an unknown-run message."""
    known = run_ids(src)
    shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
    return f"(known: {shown or 'none'})"


def _columns(table: str) -> str:
    """A table's columns from iofleet/results/schema.py, quoted (never `*`: Athena's
    tables add their partition column `dt`, the warehouse's do not)."""
    from iofleet.results.schema import BY_NAME

    return ", ".join(f'"{c}"' for c in BY_NAME[table].column_names)


def run_info(src: ResultsSource, run_id: str) -> dict[str, Any] | None:
    rows = src.select(f"SELECT {_columns('runs')} FROM runs WHERE run_id = ?", [run_id])
    return rows[0] if rows else None


def cell_percentiles(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(
        "SELECT * FROM cell_percentiles WHERE run_id = ? ORDER BY "
        "metric_source, workload_index, workload, job NULLS FIRST, direction NULLS FIRST, "
        f"metric, {ORDER_CELLS}",
        [run_id],
    )


def fleet_latency(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(
        "SELECT * FROM fleet_latency WHERE run_id = ? ORDER BY "
        f"workload_index, workload, job, direction, {ORDER_CELLS}",
        [run_id],
    )


def ingest_errors(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(
        "SELECT object_key, reason FROM ingest_errors WHERE run_id = ? ORDER BY object_key",
        [run_id],
    )


def slots(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(
        "SELECT cell_id, slot_index, status, exit_code, error FROM slots "
        "WHERE run_id = ? ORDER BY cell_index, cell_id, slot_index",
        [run_id],
    )


def expected_vs_measured(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(
        "SELECT * FROM expected_vs_measured WHERE run_id = ? ORDER BY "
        f"workload_index, job, direction, {ORDER_CELLS}",
        [run_id],
    )


def start_skew(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(f"SELECT * FROM start_skew WHERE run_id = ? ORDER BY {ORDER_CELLS}", [run_id])


def fleet_totals(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(
        "SELECT * FROM fleet_totals WHERE run_id = ? ORDER BY workload_index, job, direction, "
        f"{ORDER_CELLS}",
        [run_id],
    )


def cell_costs(src: ResultsSource, run_id: str) -> list[dict[str, Any]]:
    return src.select(
        f"SELECT {_columns('cell_costs')} FROM cell_costs WHERE run_id = ? ORDER BY cell_id",
        [run_id],
    )


def named_query(
    src: ResultsSource, name: str, run_ids: Sequence[str], order: str
) -> list[dict[str, Any]]:
    """queries/NAME.sql restricted to these runs, ordered by `order` (SQL)."""
    sql = query_sql(name)
    return src.select(
        f"SELECT * FROM (\n{sql}\n) q WHERE run_id IN ({_marks(run_ids)}) ORDER BY {order}",
        list(run_ids),
    )
