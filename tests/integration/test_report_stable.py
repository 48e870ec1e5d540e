"""A report read again from the same warehouse is the same to the byte, however many
threads DuckDB has: its parallel aggregation adds a group's doubles in an order that
varies from one query to the next, and an avg() then differed in its last digit
(expected_vs_measured's iops_mean 9465.574102 and 9465.574101999999, an audit's finding
on a real run). The report now reads on one thread (Warehouse.one_thread).

Real fio output: eight runs of one job, imported as the eight slots of one cell, so that
each mean adds eight different values.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iofleet.report.cli import load_report_data, render
from iofleet.results.warehouse import Warehouse

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def test_a_report_read_again_is_the_same_to_the_byte(tmp_path: Path) -> None:
    files = []
    for i in range(8):
        out = tmp_path / f"slot-{i}.json"
        subprocess.run(
            ["fio", "--name=r", f"--directory={tmp_path}", "--size=1m", "--bs=4k"]
            + ["--rw=randread", "--ioengine=psync", "--output-format=json", f"--output={out}"],
            check=True,
            capture_output=True,
        )
        files.append(str(out))
    imported = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "import", *files, "--out", str(tmp_path / "w")]
        + ["--label", "stable", "-q"],
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr
    with Warehouse(tmp_path / "w" / "warehouse.duckdb", read_only=True) as wh:
        # many threads: before, 20 reads gave two different reports (each time tried)
        wh.con.execute("SET threads = 16")
        run_id = wh.latest_run_id()
        assert run_id is not None
        reports = {render(load_report_data(wh, run_id), "json") for _ in range(20)}
        assert len(reports) == 1
        assert '"iops_mean": ' in next(iter(reports))  # the mean of eight slots is in it
        # the caller's connection keeps its own setting
        assert wh.con.execute("SELECT current_setting('threads')").fetchone() == (16,)
