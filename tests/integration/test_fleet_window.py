"""Fleet totals say the slots ran together only when their fio jobs did: real local
runs of two slots, one where an app before fio holds slot 1 back 4 s (the jobs, 2 s
each, never overlap), one where nothing does.

fleet_totals placed each slot's job at the barrier plus the runtimes of its earlier fio
workloads, so an app or ioping before fio (or fio's file layout) did not move it: the
staggered run was reported as "2.0s of 2.0s" together, its fleet IOPS summed over slots
that never ran at once. The window now ends where fio ended (docs/decisions.md #103)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb


def _run(tmp_path: Path, before: str) -> tuple[float, list[int]]:
    matrix = tmp_path / "m.json"
    matrix.write_text(
        json.dumps(
            {
                "name": "window",
                "storage": [{"label": "s", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [
                    {"app": {"name": "before", "run": before}},
                    {"fio": "latency-4k-qd1-randwrite", "params": {"RUNTIME": 2, "SIZE": "1m"}},
                ],
                "parallelism": [2],
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "iofleet", "local", str(matrix), "--out", "out", "-q"],
        cwd=tmp_path,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        (overlap,) = con.execute("SELECT overlap_s FROM fleet_totals").fetchone()
        ends = [
            e
            for (e,) in con.execute(
                "SELECT fio_ended_ms FROM fio_results ORDER BY slot_index"
            ).fetchall()
        ]
    finally:
        con.close()
    return overlap, ends


def test_slots_held_apart_by_an_app_before_fio_are_not_reported_together(tmp_path: Path) -> None:
    overlap, (first, second) = _run(tmp_path, "sleep $((IOFLEET_SLOT*4))")
    # fio's own ends are about the app's 4 s apart, so the 2 s jobs never overlapped
    assert second - first >= 3500
    assert overlap == 0.0


def test_slots_that_ran_fio_at_once_are_reported_together(tmp_path: Path) -> None:
    overlap, (first, second) = _run(tmp_path, "true")
    assert abs(second - first) < 1000
    assert overlap > 1.0  # most of the 2 s
