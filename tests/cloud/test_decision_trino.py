"""The QuickSight data set's query (queries/decision.sql) on Trino (Athena's engine) gives
what it gives on DuckDB, on the hand-planted configurations of
tests/unit/test_decision_query.py (whose Pareto front, $ per 1k IOPS and $ per build are
known by hand): the same ranks per statistic, the same costs per outcome, the same Pareto
front (the anti-join) and the same cost order.
"""

from __future__ import annotations

from typing import Any

import pytest
from trino_client import TrinoClient

from iofleet.results import sql as view_files
from iofleet.results.schema import BY_NAME
from iofleet.results.warehouse import Warehouse, transpile_view
from tests.cloud.test_start_skew_trino import load_planted
from tests.unit.test_decision_query import RUN, planted_rows


def _trino(trino_server: Any, unique: str) -> TrinoClient:
    data = {name: [BY_NAME[name].row(**r) for r in rows] for name, rows in planted_rows().items()}
    return load_planted(trino_server, f"decision_{unique}", data)


def test_decision_query_on_trino_equals_duckdb(trino_server: Any, unique: str) -> None:
    trino = _trino(trino_server, unique)
    sql = view_files.query_sql("decision")
    order = 'ORDER BY workload_index, metric, stat, "rank"'
    with Warehouse(":memory:") as wh:
        for table, rows in planted_rows().items():
            wh.insert_rows(table, rows)
        want = wh.query(f"SELECT * FROM ({transpile_view(sql)}) q {order}")
    # when: the same text runs on Trino
    got = trino.execute(f"SELECT * FROM ({sql}) q {order}").dicts()
    # then: the same rows; floats to the last bits (sums may add in another order)
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for g, w in zip(got, want, strict=True):
        for key, value in w.items():
            if isinstance(value, float):
                assert g[key] == pytest.approx(value, rel=1e-12), key
            else:
                assert g[key] == value, (key, g, w)
    # and: the planted answers hold on Trino (P50 IOPS front: st1, gp3, io2; $/build of st1)
    p50_iops = [r for r in got if r["metric"] == "iops" and r["stat"] == "p50"]
    assert {r["storage_label"] for r in p50_iops if r["pareto"]} == {"st1", "gp3", "io2"}
    build = {r["storage_label"]: r for r in got if r["metric"] == "wall_seconds"}
    assert build["st1"]["usd_per_build"] == pytest.approx(0.8 / 3.0)
    assert {r["run_id"] for r in got} == {RUN}
