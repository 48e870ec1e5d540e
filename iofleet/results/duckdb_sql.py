"""The DuckDB text of the Trino/Athena SQL in `iofleet/results/sql/`, transpiled once.

The views and queries are written once in Trino/Athena SQL; DuckDB runs them
transpiled by sqlglot. Transpiling the views and the queries costs
about 0.2-0.4 s of CPU (plus sqlglot's own import, about 0.1 s) at every
warehouse open, i.e. at every `iofleet local` and `iofleet report`. So the
transpiled text is kept in `sql/duckdb.json`, keyed by the SHA-256 of the
Trino text it was made from: `to_duckdb(trino_sql)` returns the stored text
when the source is byte-for-byte the one it was made from, and transpiles
live (sqlglot imported only then) for any other text. An edited `.sql` file
therefore never runs stale SQL; it only costs the transpile until the file
is regenerated (`python -m iofleet.results.duckdb_sql`), and
tests/unit/test_duckdb_sql.py fails until it is.

Stdlib only at import time.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from iofleet.results import sql as sql_files

CACHE_PATH = sql_files.SQL_DIR / "duckdb.json"


def source_key(trino_sql: str) -> str:
    return hashlib.sha256(trino_sql.encode("utf-8")).hexdigest()


def transpile(trino_sql: str) -> str:
    """One Trino/Athena SELECT rewritten for DuckDB by sqlglot (no cache), with Trino's
    `CROSS JOIN UNNEST(a, b) AS u (x, y)` as DuckDB's select-list `unnest` (`_unnest_in_select`)."""
    import sqlglot

    tree = sqlglot.parse_one(trino_sql, read="trino")
    return _unnest_in_select(tree).sql(dialect="duckdb")


def _unnest_in_select(tree: Any) -> Any:
    """Trino unnests several arrays side by side with a lateral join, `FROM t CROSS JOIN
    UNNEST(t.a, t.b) AS u (x, y)`: one row per position, the arrays zipped (the shorter
    padded with NULL). sqlglot writes it for DuckDB as it is, which DuckDB refuses (its
    UNNEST table function takes one list), and DuckDB's lateral joins are slow anyway
    (one array unnested by a lateral join: 3.2 s over 2 million bins, against 0.09 s
    for the select-list form). DuckDB's `SELECT ..., unnest(t.a) AS x, unnest(t.b) AS y
    FROM t` gives the same rows (the lists zipped, the shorter padded with NULL), so a
    SELECT whose only join is an UNNEST of two or more arrays, and that reads `u`'s
    columns only as plain items of its select list, is written that way; any other use
    of such an UNNEST is refused here. An UNNEST of one array is left as sqlglot writes
    it (the views' unpivots, `slot_metrics` and `cell_percentiles`).
    """
    from sqlglot import exp

    for select in list(tree.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        unnests = [
            j for j in joins if isinstance(j.this, exp.Unnest) and len(j.this.expressions) > 1
        ]
        if not unnests:
            continue
        (join,) = unnests if len(joins) == 1 else (None,)
        if join is None or join.args.get("on") or join.this.args.get("offset"):
            raise ValueError("only `FROM t CROSS JOIN UNNEST(...) AS u (...)` is supported")
        unnest, alias = join.this, join.this.args["alias"]
        columns = [c.name for c in alias.columns]
        arrays = dict(zip(columns, unnest.expressions, strict=True))
        name = alias.name
        listed = {id(c) for e in select.expressions for c in e.find_all(exp.Column)}
        for column in select.find_all(exp.Column):
            if column.table == name and id(column) not in listed:
                raise ValueError(f"{name}.{column.name} is read outside the select list")
        for i, expression in enumerate(select.expressions):
            target = expression.this if isinstance(expression, exp.Alias) else expression
            if isinstance(target, exp.Column) and target.table == name:
                out = exp.alias_(
                    exp.Anonymous(this="unnest", expressions=[arrays[target.name].copy()]),
                    expression.alias_or_name,
                    quoted=True,
                )
                select.expressions[i].replace(out)
            elif any(c.table == name for c in expression.find_all(exp.Column)):
                raise ValueError(f"{name}'s columns only as plain select-list items")
        join.pop()
    return tree


@cache
def _stored() -> dict[str, str]:
    try:
        doc = json.loads(CACHE_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = doc.get("sql") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, str)}


def to_duckdb(trino_sql: str) -> str:
    """The DuckDB text of `trino_sql`: stored when made from exactly this text, else
    transpiled now (and remembered for this process)."""
    key = source_key(trino_sql)
    stored = _stored()
    found = stored.get(key)
    if found is None:
        found = stored[key] = transpile(trino_sql)
    return found


def sources() -> dict[str, str]:
    """Every Trino text the DuckDB side runs: the views and the queries, by name, and the
    SELECTs `iofleet report` builds in code (iofleet/results/source.py, report/)."""
    out = {f"view:{name}": text for name, text in sql_files.all_views().items()}
    for path in sorted(sql_files.QUERY_DIR.glob("*.sql")):
        out[f"query:{path.stem}"] = sql_files.query_sql(path.stem)
    for i, text in enumerate(report_selects()):
        out.setdefault(f"report:{i:02d}", text)
    return out


@cache
def report_selects() -> tuple[str, ...]:
    """The SELECT texts one `iofleet report --warehouse W [--run R]` sends, recorded by
    running the report's loader on an empty in-memory warehouse (their text does not
    depend on the data: only on the schema and a run id's count of placeholders)."""

    from iofleet.report.cli import load_report_data
    from iofleet.results import source
    from iofleet.results.warehouse import Warehouse

    seen: dict[str, None] = {}

    class Recorder:
        def __init__(self, wh: Warehouse) -> None:
            self.wh = wh
            self.where = wh.where

        def select(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
            seen.setdefault(sql)
            return self.wh.select(sql, params)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.wh, name)

    with Warehouse(":memory:") as wh:
        rec = Recorder(wh)
        source.run_ids(rec)
        source.known_runs(rec, ["r"])
        source.known_text(rec)
        load_report_data(rec, "r")  # type: ignore[arg-type]
    return tuple(seen)


def build() -> dict[str, object]:
    """The cache document for the current sources and sqlglot."""
    import sqlglot

    entries = {}
    names = {}
    for name, text in sources().items():
        key = source_key(text)
        entries[key] = transpile(text)
        names[name] = key
    return {
        "generated_by": "python -m iofleet.results.duckdb_sql",
        "sqlglot": sqlglot.__version__,
        "sources": names,
        "sql": entries,
    }


def write(path: Path = CACHE_PATH) -> Path:
    path.write_text(json.dumps(build(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write())
