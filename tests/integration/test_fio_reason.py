"""When fio fails a job it prints its reason on stdout ahead of its JSON (`fio: pid=N,
err=84/file:io_u.c:2152, func=io_u_sync_complete, error=...`); the slot's error carries
it, beside what fio wrote on stderr (before: "fio exited with status 1" and the last
stderr line only, the reason left in the raw artifact). A real run of a job the plan
cannot refuse: a verify of a new file that is only read (what fio laid out carries no
verify headers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb


def test_fios_own_reason_reaches_the_slots_error(tmp_path: Path) -> None:
    library = tmp_path / "jobs"
    library.mkdir()
    (library / "verify.fio").write_text(
        "; d\n; @param TARGET=.\n[x]\ndirectory=${TARGET}\nrw=read\nbs=4k\nsize=64k\n"
        "verify=crc32c\n"
    )
    matrix = tmp_path / "m.json"
    matrix.write_text(
        json.dumps(
            {
                "name": "reason",
                "storage": [{"label": "a", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [{"fio": "verify"}],
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
    assert done.returncode == 1, done.stderr
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        (error,) = con.execute("SELECT error FROM slots").fetchone()
    finally:
        con.close()
    assert "fio exited with status 1: verify: bad magic header" in error
    assert "(fio: pid=" in error and ", err=" in error, error
