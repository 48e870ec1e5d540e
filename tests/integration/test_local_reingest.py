"""`iofleet local` run again into one --out: the runs loaded before are kept as they were
(decision 52) unless their raw files changed, and the warehouse always holds what a
fresh build over the same raw files holds.

Each run is the real command (agent, fio and ioping, one slot, a second of fio) into
the same --out; the warehouse is read back after each and compared, table by table and
with the runs' fingerprints, with one built from scratch over that --out's raw/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from iofleet.results.warehouse import Warehouse
from tests.warehouse_rows import fresh_build, table_rows

pytestmark = pytest.mark.slow


def _matrix(tmp_path: Path) -> Path:
    doc = {
        "name": "reingest",
        "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "target")}],
        "workloads": [
            {
                "fio": "randwrite-16k-psync-16jobs",
                "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 1},
            },
            {"ioping": {"count": 3, "interval_ms": 0, "write": False}},
        ],
        "parallelism": [1],
    }
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(doc))
    return path


def _local(tmp_path: Path, matrix: Path) -> str:
    """One `iofleet local` into tmp_path/out; returns its line about the ingest."""
    result = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "local", str(matrix), "--out", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    (line,) = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.startswith("ingested into ")
    ]
    return line


def _warehouse(out: Path) -> dict:
    with Warehouse(out / "warehouse.duckdb", read_only=True) as wh:
        return table_rows(wh)


def _run_ids(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "raw").iterdir())


def test_a_second_and_third_run_keep_the_unchanged_runs_and_hold_a_fresh_builds_rows(
    tmp_path: Path,
) -> None:
    matrix = _matrix(tmp_path)
    out = tmp_path / "out"
    # given one run into an --out
    first_line = _local(tmp_path, matrix)
    (first,) = _run_ids(out)
    assert "unchanged" not in first_line
    after_first = _warehouse(out)
    assert after_first == fresh_build(out / "raw")
    # when a second run goes into the same --out
    second_line = _local(tmp_path, matrix)
    (second,) = set(_run_ids(out)) - {first}
    # then it says the first run was kept, loaded its own run only, and the warehouse
    # holds what a fresh build over both runs' files holds: the first run's rows as
    # they were, the second's beside them
    assert "from 1 run:" in second_line
    assert second_line.endswith("; 1 unchanged run kept as loaded before")
    after_second = _warehouse(out)
    assert after_second == fresh_build(out / "raw")
    for table, rows in after_first.items():
        assert [r for r in after_second[table] if r[0] == first] == rows, table
    assert {r[0] for r in after_second["runs"]} == {first, second}
    assert all(after_second[t] for t in ("slots", "fio_results", "ioping_requests"))

    # when an artifact of the first run changes (its slot.json, edited in place) and a
    # third run goes into the --out
    (slot_json,) = (out / "raw" / first).glob("*/slot-*/slot.json")
    doc = json.loads(slot_json.read_text())
    doc["error"] = "edited after the run"
    slot_json.write_text(json.dumps(doc))
    third_line = _local(tmp_path, matrix)
    (third,) = set(_run_ids(out)) - {first, second}
    # then the first run was loaded again with the third (the second kept), and the
    # warehouse holds the edit, and what a fresh build holds
    assert "from 2 runs:" in third_line
    assert third_line.endswith("; 1 unchanged run kept as loaded before")
    after_third = _warehouse(out)
    assert after_third == fresh_build(out / "raw")
    with duckdb.connect(str(out / "warehouse.duckdb"), read_only=True) as con:
        errors = con.execute("SELECT run_id, error FROM slots ORDER BY run_id").fetchall()
    assert sorted(errors) == sorted(
        [(first, "edited after the run"), (second, None), (third, None)]
    )
    for table, rows in after_second.items():
        assert [r for r in after_third[table] if r[0] == second] == [
            r for r in rows if r[0] == second
        ], table


FIO_OUTPUT = (
    Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "jsonplus-numjobs-grouped.json"
)


def _import(tmp_path: Path, label: str) -> str:
    """One `iofleet import` of a fio output into tmp_path/out; returns its last line."""
    result = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "import", str(FIO_OUTPUT)]
        + ["--label", label, "--out", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1]


def test_imports_into_an_out_with_a_run_folder_not_utf8_hold_a_fresh_builds_rows(
    tmp_path: Path,
) -> None:
    # given an --out with an imported run and two copies of its folder, one named with a
    # byte that is not UTF-8, one named as that name's run id is spelled ("\udcff"): one
    # run id, the first copy's artifacts all ingest errors (no column holds its name),
    # the second's loaded under that id but its run.json (it names the imported run)
    out = tmp_path / "out"
    _import(tmp_path, "a")
    (imported,) = _run_ids(out)
    raw = os.fsencode(out / "raw")
    not_utf8 = os.path.join(raw, b"old-\xff")
    for name in (b"old-\xff", b"old-\\udcff"):
        shutil.copytree(os.path.join(raw, os.fsencode(imported)), os.path.join(raw, name))
    _import(tmp_path, "b")
    loaded = _warehouse(out)
    assert loaded == fresh_build(out / "raw")
    # when an artifact in the folder that is not UTF-8 changes, and another import runs
    (fio_json,) = [
        os.path.join(top, name)
        for top, _, files in os.walk(not_utf8)
        for name in files
        if name.startswith(b"w00-fio-")
    ]
    with open(fio_json, "ab") as f:
        f.write(b"\n")
    line = _import(tmp_path, "c")
    # then that run id was loaded again (the two imports before kept), and the warehouse
    # holds what a fresh build holds: each ingest_errors row once
    after = _warehouse(out)
    assert after == fresh_build(out / "raw")
    errors = after["ingest_errors"]
    assert len(errors) == len(set(errors)) == len(loaded["ingest_errors"]) > 0
    assert {e[0] for e in errors} == {"old-\\udcff"}
    assert " objects from 2 runs: " in line
    assert line.endswith(f"; 2 unchanged runs kept as loaded before; {len(errors)} ingest errors)")
