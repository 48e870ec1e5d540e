"""`slot_metrics` and `cell_percentiles` on Trino (Athena's engine): the rewritten views
give the rows the views gave before, give DuckDB's rows, and read fio_results once.

The planted rows and the reference text (the views before the rewrite) are the unit
test's (tests/unit/test_cell_percentiles_rewrite.py); here they go into Trino
memory-catalog tables, the views are created from iofleet/results/sql/ unchanged, and
the reference views beside them as `ref_<name>`.
"""

from __future__ import annotations

import math
import re
import uuid
from typing import Any

import pytest
from trino_client import TrinoClient

from iofleet.results.schema import Table
from iofleet.results.warehouse import Warehouse
from tests.cloud.test_start_skew_trino import _literal, load_planted
from tests.unit.test_cell_percentiles_rewrite import planted, reference_sql, sort_key

SEED = 1
VIEWS = ("slot_metrics", "cell_percentiles")


def literal(value: Any, type_: str) -> str:
    if isinstance(value, float):
        return "nan()" if math.isnan(value) else f"CAST({value!r} AS DOUBLE)"
    return _literal(value, type_)


def load(trino_server: Any, tables: dict[Table, list[dict[str, Any]]]) -> TrinoClient:
    """A fresh memory-catalog schema with `tables`' rows, the views and the reference views."""
    data = {t.name: rows for t, rows in tables.items()}
    client = load_planted(trino_server, f"pct_{uuid.uuid4().hex[:10]}", data, literal)
    for name, sql in reference_sql().items():
        client.execute(f"CREATE VIEW {name} AS {sql}")
    return client


@pytest.fixture(scope="module")
def trino(trino_server: Any) -> TrinoClient:
    return load(trino_server, planted(SEED))


def rows(client: TrinoClient, sql: str) -> list[dict[str, Any]]:
    return sorted(client.execute(sql).dicts(), key=sort_key)


def assert_close(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """Same rows; floats equal to 1e-12 (Trino may add a slot's thread entries in another
    order), NaN equal to NaN; everything else exactly."""
    assert got and len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w)
        for key, value in w.items():
            if isinstance(value, float) and math.isnan(value):
                assert isinstance(g[key], float) and math.isnan(g[key]), key
            elif isinstance(value, float):
                assert g[key] == pytest.approx(value, rel=1e-12), (key, w)
            else:
                assert g[key] == value, (key, w)


@pytest.mark.parametrize("view", VIEWS)
def test_rows_equal_the_reference_on_trino(trino: TrinoClient, view: str) -> None:
    got = rows(trino, f"SELECT * FROM {view}")
    want = rows(trino, f"SELECT * FROM ref_{view}")
    assert_close(got, want)
    # the sorted rows pair up identically: every key column equal
    assert [sort_key({k: v for k, v in r.items() if not isinstance(v, float)}) for r in got] == [
        sort_key({k: v for k, v in r.items() if not isinstance(v, float)}) for r in want
    ]


@pytest.mark.parametrize("view", VIEWS)
def test_rows_equal_duckdb(trino_server: Any, view: str) -> None:
    # without NaN: with a NaN among one slot's thread entries, Trino's max() and DuckDB's
    # disagree (the views before the rewrite did the same), which is the engines', not ours
    client = load(trino_server, planted(SEED, nan=False))
    got = rows(client, f"SELECT * FROM {view}")
    with Warehouse(":memory:") as wh:
        for table, table_rows in planted(SEED, nan=False).items():
            wh.insert_rows(table, table_rows)
        want = sorted(wh.query(f"SELECT * FROM {view}"), key=sort_key)
    assert_close(got, want)


def scanned_tables(trino: TrinoClient, sql: str) -> list[str]:
    """The table handle of every table scan in the plan of `sql` (the memory catalog names a
    table by its id: `memory:2`)."""
    plan = "\n".join(str(r[0]) for r in trino.execute(f"EXPLAIN {sql}").rows)
    return re.findall(r"Scan\w*\[table = ([^,\]\s]+)", plan)


def fio_scans(trino: TrinoClient, view: str) -> int:
    (fio_results,) = scanned_tables(trino, "SELECT * FROM fio_results")
    return scanned_tables(trino, f"SELECT * FROM {view}").count(fio_results)


def test_cell_percentiles_reads_fio_results_once(trino: TrinoClient) -> None:
    # before the rewrite, Trino inlined slot_metrics' fio WITH query into each of its
    # eight UNION branches: eight scans of fio_results (the bench's read amplification)
    assert fio_scans(trino, "ref_cell_percentiles") == 8
    assert fio_scans(trino, "cell_percentiles") == 1
    assert fio_scans(trino, "slot_metrics") == 1


def test_percentiles_equal_numpys_to_the_bit_on_trino(trino_server: Any) -> None:
    # given three slots whose p90 lies at a fraction >= 0.5 between two neighbours, where
    # numpy interpolates down from the upper one: as a DOUBLE column (iops) and a BIGINT
    # one (ioping's lat_max_ns)
    import numpy as np

    from iofleet.results import sql as view_files
    from iofleet.results.schema import FIO_RESULTS, IOPING_REQUESTS, SLOTS

    values = [29965, 117385, 421007]
    key = {"run_id": "r", "cell_id": "c000"}
    data = {
        SLOTS.name: [SLOTS.row(**key, slot_index=i, cell_index=0, fleet_size=3) for i in range(3)],
        FIO_RESULTS.name: [
            FIO_RESULTS.row(
                **key,
                slot_index=i,
                workload="w",
                job="j",
                job_index=0,
                direction="read",
                error=0,
                iops=float(v),
            )
            for i, v in enumerate(values)
        ],
        IOPING_REQUESTS.name: [
            IOPING_REQUESTS.row(
                **{**key, "workload_index": 1},
                slot_index=i,
                request=1,
                operation="read",
                size_bytes=4096,
                time_ns=v,
            )
            for i, v in enumerate(values)
        ],
    }
    client = load_planted(trino_server, f"pct_{uuid.uuid4().hex[:10]}", data, literal)
    want = [float(np.percentile(values, p)) for p in view_files.PERCENTILES]
    assert want[3] == 360282.60000000003  # the case: not the lower neighbour's 360282.6
    for metric in ("iops", "lat_max_ns"):
        (row,) = client.execute(f"SELECT * FROM cell_percentiles WHERE metric = '{metric}'").dicts()
        # then: Athena's engine gives numpy's percentiles, every bit
        assert [row[f"p{p}"] for p in view_files.PERCENTILES] == want, metric
