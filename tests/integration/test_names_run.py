"""A job and a parameter named at the edge of what `plan` takes run in a real slot: the
agent takes the same names (tests/unit/test_names_agree.py), and the rows land under
the job's own name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb


def test_a_job_named_at_the_edge_of_the_rules_runs_and_lands_under_its_name(
    tmp_path: Path,
) -> None:
    name = "9a-b.c_" + "d" * 121  # 128: starts with a digit, every other kind of character
    param = "P" * 64
    library = tmp_path / "jobs"
    library.mkdir()
    (library / f"{name}.fio").write_text(
        f"; d\n; @param TARGET=.\n; @param {param}:size=64k  bytes\n"
        f"[x]\ndirectory=${{TARGET}}\nrw=write\nbs=4k\nsize=${{{param}}}\n"
    )
    matrix = tmp_path / "m.json"
    matrix.write_text(
        json.dumps(
            {
                "name": "edge",
                "storage": [{"label": "a", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [{"fio": name, "params": {param: "32k"}}],
                "parallelism": [1],
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "iofleet", "local", str(matrix), "--out", "out", "-q"],
        cwd=tmp_path,
        env=dict(os.environ, IOFLEET_FIO_JOBS=str(library), TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT workload, io_bytes FROM fio_results").fetchall()
        (status,) = con.execute("SELECT status FROM slots").fetchone()
    finally:
        con.close()
    assert status == "SUCCEEDED"
    assert rows == [(name, 32 * 1024)]  # the parameter's value reached fio
