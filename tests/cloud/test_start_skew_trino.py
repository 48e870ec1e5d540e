"""The start_skew view on Trino (Athena's engine) gives what it gives on DuckDB.

Hand-built slot rows go into a Trino memory-catalog table and a DuckDB warehouse;
the views `cells` and `start_skew` are created from iofleet/results/sql/ on both, unchanged
on Trino and transpiled by sqlglot for DuckDB, and their rows must agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from trino_client import TrinoClient

from iofleet.results import sql as view_files
from iofleet.results.schema import SLOTS
from iofleet.results.warehouse import Warehouse

EPOCH = datetime(1970, 1, 1)
BASE_US = 1_795_237_921_000_000
TRINO_TYPES = {
    "string": "varchar",
    "bigint": "bigint",
    "int": "integer",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "timestamp(6)",
    "array<bigint>": "array(bigint)",
}


def _stamp(epoch_us: int) -> str:
    return (EPOCH + timedelta(microseconds=epoch_us)).strftime("%Y-%m-%d %H:%M:%S.%f")


def _rows() -> list[dict[str, Any]]:
    rows = []
    # c000: four slots on two hosts, one synced badly, one late; c001: never passed
    for i, (offset, late, synced, maxerr, host) in enumerate(
        [(0, 0, True, 900, "h0"), (1250, 0, True, 2100, "h1"), (400, 75, False, 16_000_000, "h0")]
    ):
        rows.append(
            SLOTS.row(
                run_id="r",
                cell_id="c000",
                slot_index=i,
                cell_index=0,
                fleet_size=3,
                storage_label="gp3",
                hostname=host,
                barrier_released_at=_stamp(BASE_US),
                barrier_passed_at=_stamp(BASE_US + offset),
                barrier_passed_us=BASE_US + offset,
                barrier_late_us=late,
                clock_synced=synced,
                clock_max_error_us=maxerr,
                clock_est_error_us=maxerr // 10,
            )
        )
    rows.append(SLOTS.row(run_id="r", cell_id="c001", slot_index=0, cell_index=1, fleet_size=1))
    rows.append(
        SLOTS.row(
            run_id="r",
            cell_id="c002",
            slot_index=0,
            cell_index=2,
            fleet_size=1,
            hostname="h9",
            barrier_released_at=_stamp(BASE_US),
            barrier_passed_at=_stamp(BASE_US + 3),
            barrier_passed_us=BASE_US + 3,
            barrier_late_us=0,
            clock_synced=True,
            clock_max_error_us=500,
            clock_est_error_us=20,
        )
    )
    return rows


def _literal(value: Any, type_: str) -> str:
    if value is None:
        return f"CAST(NULL AS {TRINO_TYPES[type_]})"
    if type_ == "timestamp":
        return f"TIMESTAMP '{value}'"
    if type_ == "string":
        return "'" + str(value).replace("'", "''") + "'"
    if type_ == "boolean":
        return "true" if value else "false"
    if type_ == "array<bigint>":
        return "ARRAY[" + ", ".join(map(str, value)) + "]"
    return str(value)


def load_planted(
    trino_server: Any,
    schema: str,
    data: Mapping[str, list[dict[str, Any]]],
    literal: Callable[[Any, str], str] = _literal,
) -> TrinoClient:
    """A fresh memory-catalog `schema` with every results table (most of them empty), the
    planted rows of `data` (table name -> rows) and every view of iofleet/results/sql."""
    from iofleet.results.schema import TABLES

    trino = TrinoClient(trino_server.endpoint, catalog="memory", schema=schema)
    trino.execute(f"CREATE SCHEMA memory.{schema}")
    for table in TABLES:
        columns = ", ".join(f'"{c.name}" {TRINO_TYPES[c.type]}' for c in table.columns)
        trino.execute(f"CREATE TABLE {table.name} ({columns})")
        rows = data.get(table.name, [])
        for start in range(0, len(rows), 500):
            values = ", ".join(
                "(" + ", ".join(literal(row[c.name], c.type) for c in table.columns) + ")"
                for row in rows[start : start + 500]
            )
            trino.execute(f"INSERT INTO {table.name} VALUES {values}")
    for name in view_files.VIEW_NAMES:
        trino.execute(f"CREATE VIEW {name} AS {view_files.view_sql(name)}")
    return trino


COLUMNS = (
    "cell_id",
    "slots_reported",
    "slots_passed",
    "release_instants",
    "hosts",
    "start_skew_us",
    "max_late_us",
    "clock_max_error_us",
    "clock_est_error_us",
    "slots_unsynced",
    "start_skew_bound_us",
)


def test_start_skew_on_trino_equals_duckdb(trino_server: Any, unique: str) -> None:
    # given the same slot rows in Trino (memory catalog) and DuckDB
    schema = f"skew_{unique}"
    trino = TrinoClient(trino_server.endpoint, catalog="memory", schema=schema)
    trino.execute(f"CREATE SCHEMA memory.{schema}")
    columns = ", ".join(f'"{c.name}" {TRINO_TYPES[c.type]}' for c in SLOTS.columns)
    trino.execute(f"CREATE TABLE slots ({columns})")
    values = ", ".join(
        "(" + ", ".join(_literal(row[c.name], c.type) for c in SLOTS.columns) + ")"
        for row in _rows()
    )
    trino.execute(f"INSERT INTO slots VALUES {values}")
    for name in ("cells", "start_skew"):
        trino.execute(f"CREATE VIEW {name} AS {view_files.view_sql(name)}")
    with Warehouse(":memory:") as wh:
        wh.insert_rows(SLOTS, _rows())
        want = wh.query(f"SELECT {', '.join(COLUMNS)} FROM start_skew ORDER BY cell_id")
    # when
    got = trino.execute(f"SELECT {', '.join(COLUMNS)} FROM start_skew ORDER BY cell_id").dicts()
    # then
    assert got == want
    assert (
        got[0]["start_skew_us"] == 1250 and got[0]["start_skew_bound_us"] == 1250 + 2 * 16_000_000
    )
    assert got[2]["start_skew_bound_us"] == 0  # one slot, one host
