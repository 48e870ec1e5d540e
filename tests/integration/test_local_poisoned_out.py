"""`iofleet local` into an --out whose raw tree holds poisoned artifacts (the issue's
"one bad artifact rolls back a whole ingest"): real fio, real DuckDB, the console
entry point in a process, twice into the same --out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.unit import rawtree

pytestmark = pytest.mark.slow


def _iofleet(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_poisoned_artifacts_in_out_cost_only_themselves_run_after_run(tmp_path: Path) -> None:
    # given an --out whose raw tree holds an earlier run with values no column can hold:
    # a lone surrogate in the description, an exit code and a slot number beyond int64
    old = "old-20261121t051200z"
    base = rawtree.write_run(tmp_path / "out" / "raw", old, slots=1)
    doc = rawtree.run_doc(old) | {"description": "a \ud800 run"}
    (base / "run.json").write_text(json.dumps(doc))
    cell = base / "c000-local-fast-x2-r1"
    (cell / "slot-0000" / "slot.json").write_text(
        json.dumps(rawtree.slot_doc() | {"exit_code": 2**64})
    )
    wild = cell / f"slot-{2**64}"
    wild.mkdir()
    (wild / "slot.json").write_text(json.dumps(rawtree.slot_doc()))
    matrix = tmp_path / "matrix.json"
    matrix.write_text(
        json.dumps(
            {
                "name": "poison",
                "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [
                    {
                        "fio": "randwrite-16k-psync-16jobs",
                        "params": {"RUNTIME": 1, "SIZE": "1m", "NUM_JOBS": 1},
                    }
                ],
                "parallelism": [1],
            }
        )
    )
    for attempt in range(2):  # the second run into the same --out works as the first
        # when
        result = _iofleet(["local", str(matrix), "--out", "out"], cwd=tmp_path)
        # then the run succeeds and reports
        assert result.returncode == 0, result.stderr
        assert "internal error" not in result.stderr
        assert (tmp_path / "out" / "report.html").is_file()
        con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
        try:
            runs = con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()
            new_runs = [r for (r,) in runs if r.startswith("poison-")]
            assert len(new_runs) == attempt + 1
            measured = con.execute(
                "SELECT count(*), sum(io_bytes) FROM fio_results WHERE run_id = ?",
                [new_runs[-1]],
            ).fetchone()
            assert measured is not None and measured[0] > 0 and measured[1] > 0
            errors = dict(
                con.execute(
                    "SELECT object_key, reason FROM ingest_errors WHERE run_id = ?", [old]
                ).fetchall()
            )
            # and the old run's good artifacts are in, its poisoned ones are errors
            old_fio = con.execute(
                "SELECT count(*) FROM fio_results WHERE run_id = ?", [old]
            ).fetchone()
        finally:
            con.close()
        assert old_fio is not None and old_fio[0] > 0
        assert sorted(errors) == sorted(
            [
                f"{old}/run.json",
                f"{old}/c000-local-fast-x2-r1/slot-0000/slot.json",
                f"{old}/c000-local-fast-x2-r1/slot-{2**64}/slot.json",
            ]
        )
        assert "runs.description" in errors[f"{old}/run.json"]
