"""The warehouse's fast ingest loads exactly what the plain per-row path loads.

The plain path is the reference: every artifact found as `sorted(run_dir.rglob("*"))`
finds it, its rows from `rows_for_artifact` (a dict per histogram bin), the fio
parser's column checks without their quick accepts (`schema.value_problem` for every
value), every row of every table checked against its columns (`Table.row_problem`, as
ingest checked each row before it checked a fio artifact once), fio rows rebuilt with
`_table_row` and compared, and each table loaded from row tuples (`insert_rows`). The
fast path is `Warehouse.ingest_dir` as `iofleet local`, `iofleet import` and the bench
run it. Both load real DuckDB warehouses from the same raw tree: every fio fixture
(held-out version fixtures and published outputs included), every probe artifact of
tests/data/probes/artifacts (refused ones too), artifacts whose path key no column
can hold, and a complete run; every table must hold the same rows, value for value.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from iofleet.results import ingest, warehouse
from iofleet.results.ingest import error_row, loadable_text, merge_slot_rows, rows_for_artifact
from iofleet.results.parsers import decode_text
from iofleet.results.parsers import fio as fio_parser
from iofleet.results.schema import BY_NAME, FIO_RESULTS, INGEST_ERRORS, SLOTS, TABLES
from iofleet.results.warehouse import Warehouse
from tests.unit import rawtree

TESTS = Path(__file__).resolve().parents[1]
FIO = TESTS / "fixtures" / "fio"
FIXTURES = sorted(
    [*FIO.glob("*.json"), *(FIO / "versions").glob("*.json"), *(FIO / "published").glob("*.json")]
)
PROBES_DIR = TESTS / "data" / "probes" / "artifacts"
PROBES: list[dict[str, Any]] = json.loads((PROBES_DIR / "index.json").read_text())
JSONPLUS = FIO / "jsonplus-two-jobs.json"


def _write(raw: Path, relpath: bytes | str, data: bytes) -> None:
    target = os.path.join(os.fsencode(raw), os.fsencode(relpath))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as out:
        out.write(data)


def _raw_tree(raw: Path) -> None:
    rawtree.write_run(raw, "complete-run", slots=2)
    for i, path in enumerate(FIXTURES):
        relpath = f"fixtures/c000-local-x1-r1/slot-{i:04d}/w00-fio-{path.stem}.json"
        _write(raw, relpath, path.read_bytes())
    for i, probe in enumerate(PROBES):  # one run each: some share a path
        _write(
            raw,
            probe["path"].format(run=f"probe-{i:02d}"),
            (PROBES_DIR / probe["file"]).read_bytes(),
        )
    good = JSONPLUS.read_bytes()
    # keys from the path that no column can hold, beside a good artifact in each place
    _write(raw, "keys/c000-x1-r1/slot-2147483648/w00-fio-slot-beyond-int32.json", good)
    _write(raw, "keys/c000-x1-r1/slot-0000/w2147483648-fio-workload-beyond-int32.json", good)
    _write(raw, b"keys/c\xff-not-utf8/slot-0000/w00-fio-cell-not-utf8.json", good)
    _write(raw, b"keys/c000-x1-r1/slot-0000/w01-fio-name-\xfe.json", good)
    _write(raw, "keys/c000-x1-r1/slot-0000/w02-fio-good.json", good)
    _write(raw, "keys/c000-x1-r1/slot-0000/notes.txt", b"skipped")
    _write(raw, "keys/c000-x1-r1/slot-0000/.hidden.json", good)


def _refusal(relpath: str, rows: dict[str, list[dict[str, object]]]) -> str | None:
    """The first row's first value its column cannot hold, as `table.column: why`."""
    for name, table_rows in rows.items():
        for row in table_rows:
            problem = BY_NAME[name].row_problem(row)
            if problem:
                return f"{name}.{problem}"
    return None


def _same_as_table_row(row: dict[str, object]) -> None:
    """A fio_results row is what the per-column conversion (`_table_row`) makes of it."""
    key = {c.name: row[c.name] for c in FIO_RESULTS.columns[:5]}
    again = ingest._table_row(FIO_RESULTS, key, row)
    assert list(again.items()) == list(row.items())
    assert [type(v) for v in again.values()] == [type(v) for v in row.values()]


def _load_by_rows(wh: Warehouse, raw: Path) -> tuple[int, int]:
    """The reference load; returns (objects, skipped) as IngestStats counts them."""
    collected: dict[str, list[dict[str, object]]] = {t.name: [] for t in TABLES}
    objects = skipped = 0
    runs = sorted(p for p in raw.iterdir() if p.is_dir())
    for run_dir in runs:
        run_id = loadable_text(run_dir.name)
        for path in sorted(run_dir.rglob("*")):
            if not path.is_file():
                continue
            if path.suffix != ".json" or path.name.startswith("."):
                skipped += 1
                continue
            objects += 1
            relpath = path.relative_to(raw).as_posix()
            # read as every reader of raw/ reads it: the encoding a BOM names, else UTF-8
            rows = rows_for_artifact(relpath, decode_text(path.read_bytes(), errors="replace"))
            refusal = _refusal(relpath, rows)
            if refusal:
                rows = {INGEST_ERRORS.name: [error_row(run_id, relpath, refusal)]}
            for row in rows.get(FIO_RESULTS.name, []):
                _same_as_table_row(row)
            for name, table_rows in rows.items():
                collected[name] += table_rows
    collected[SLOTS.name] = merge_slot_rows(collected[SLOTS.name])
    wh.replace_runs([loadable_text(p.name) for p in runs], {})
    for table in TABLES:
        wh.insert_rows(table, collected[table.name])
    return objects, skipped


def _tables(wh: Warehouse) -> dict[str, list[str]]:
    """Every table's rows in one order, each as repr (a float to the bit, -0.0 too)."""
    out = {}
    for table in TABLES:
        cols = ", ".join(f'"{c}"' for c in table.column_names if c != "ingested_at")
        rows = wh.con.execute(f"SELECT {cols} FROM {table.name} ORDER BY ALL").fetchall()
        out[table.name] = [repr(row) for row in rows]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, tuple[int, int]]:
    raw = tmp_path_factory.mktemp("same-rows") / "raw"
    _raw_tree(raw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fio_parser, "_plainly_fits", lambda type_, value: False)
        mp.setattr(fio_parser, "_plain_listed", lambda raw, scale: None)
        with Warehouse(":memory:") as wh:
            counts = _load_by_rows(wh, raw)
            tables = _tables(wh)
    yield raw, tables, counts
    shutil.rmtree(raw.parent, ignore_errors=True)


def test_the_tree_holds_good_and_refused_artifacts_of_every_kind(reference: Any) -> None:
    _, tables, (objects, skipped) = reference
    assert objects > 100 and skipped == 2
    reasons = "\n".join(tables["ingest_errors"])
    assert "fio_results.slot_index: 2147483648 is outside the int range" in reasons
    assert "fio_results.workload_index: 2147483648 is outside the int range" in reasons
    assert "fio_results.cell_id: not valid UTF-8" in reasons
    assert "fio_results.workload: not valid UTF-8" in reasons
    for table in ("runs", "slots", "fio_results", "fio_latency_histograms", "ioping_requests"):
        assert tables[table], table
    assert len(tables["fio_latency_histograms"]) > 10


@pytest.mark.parametrize("encoder", ["orjson", "json"])
def test_ingest_dir_loads_the_rows_of_the_per_row_path(
    reference: Any, monkeypatch: pytest.MonkeyPatch, encoder: str
) -> None:
    raw, expected, (objects, skipped) = reference
    if encoder == "json":  # the histograms' JSON lines written by the stdlib encoder
        monkeypatch.setattr(warehouse, "_orjson", None)
    with Warehouse(":memory:") as wh:
        stats = wh.ingest_dir(raw)
        got = _tables(wh)
    assert (stats.objects, stats.skipped) == (objects, skipped)
    for table in TABLES:
        assert got[table.name] == expected[table.name], table.name
    assert stats.rows == {name: len(rows) for name, rows in expected.items()}
