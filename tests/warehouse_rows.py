"""A warehouse's rows, and those of one built fresh from the same raw files (decision 52:
a warehouse loaded run by run, over any sequence of ingests, holds what a fresh build
holds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iofleet.results.schema import TABLES
from iofleet.results.warehouse import INGESTED_RUNS, Warehouse


def table_rows(wh: Warehouse) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, ordered (ingest_errors without its load time), and the runs'
    fingerprints (`ingested_runs`)."""
    out = {}
    for t in TABLES:
        cols = "* EXCLUDE (ingested_at)" if t.name == "ingest_errors" else "*"
        out[t.name] = wh.con.execute(f"SELECT {cols} FROM {t.name} ORDER BY ALL").fetchall()
    out[INGESTED_RUNS] = wh.con.execute(f"SELECT * FROM {INGESTED_RUNS} ORDER BY ALL").fetchall()
    return out


def fresh_build(raw: Path | str) -> dict[str, list[tuple[Any, ...]]]:
    """`table_rows` of a new warehouse built from scratch over `raw`."""
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(raw)
        return table_rows(wh)
