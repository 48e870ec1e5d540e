"""`iofleet report`'s decision sections: --view exports every section as CSV/JSON, and a
bad --target or --view is one line and exit 2 before anything is read."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from iofleet.cli import main
from iofleet.report.cli import report_command
from iofleet.report.machine import VIEWS
from tests.unit import rawtree

RUN = "demo-20261121t051200z"


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    from iofleet.results.warehouse import Warehouse

    rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    path = tmp_path / "warehouse.duckdb"
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
    return path


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_exports_as_csv_and_json_with_the_same_rows(
    warehouse: Path, view: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report_command(warehouse, run_id=RUN, fmt="json", html=None, view=view)
    rows = json.loads(capsys.readouterr().out)
    report_command(warehouse, run_id=RUN, fmt="json", html=None)
    full = json.loads(capsys.readouterr().out)
    assert rows == (full[view] or [])
    report_command(warehouse, run_id=RUN, fmt="csv", html=None, view=view)
    lines = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(lines) == len(rows)


def test_csv_without_a_view_is_the_decision_table(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_command(warehouse, run_id=RUN, fmt="csv", html=None)
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["metric"] for r in rows} == {"iops", "lat_median_ns", "wall_seconds"}
    assert all(r["rank"] == "1" for r in rows)  # one configuration per workload


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "p98_build_hours<=2"], "--target: 'p98_build_hours<=2': unknown metric"),
        (["--target", "p50_throughput>=125"], "needs a unit"),
        (["--format", "csv", "--view", "nope"], "--view nope: expected one of decision, "),
        (["--view", "decision"], "--view: only with --format csv or json"),
    ],
)
def test_bad_target_or_view_is_one_line_and_exit_2_even_without_a_warehouse(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["report", "--warehouse", str(tmp_path / "missing.duckdb"), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0]
    assert list(tmp_path.iterdir()) == []  # nothing created
