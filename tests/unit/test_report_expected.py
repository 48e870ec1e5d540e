"""The report's expected-vs-measured block: shown when an expectation is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iofleet.report.cli import report_command
from iofleet.results.warehouse import Warehouse
from tests.unit import rawtree
from tests.unit.test_expected_vs_measured import add_plan, expected_entry

RUN = "demo-20261121t051200z"
HEADING = "Expected vs measured"


def _warehouse(tmp_path: Path, entries: list[dict] | None) -> Path:
    run_dir = rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    if entries is not None:
        add_plan(run_dir, entries)
    path = tmp_path / "warehouse.duckdb"
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
    return path


def _report(path: Path, capsys: pytest.CaptureFixture[str], fmt: str, html: Path) -> str:
    assert report_command(path, run_id=None, fmt=fmt, html=str(html)) == 0
    return capsys.readouterr().out


def test_known_expectation_shows_the_ratio_in_the_table_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _warehouse(tmp_path, [expected_entry()])

    out = _report(path, capsys, "table", tmp_path / "r.html")

    block = out[out.index(HEADING) :]
    line = next(row for row in block.splitlines() if "grouped (write)" in row)
    assert "instance" in line
    assert "40,000" in line and "19,244" in line
    assert "48%" in line  # 19,243.5 / 40,000
    assert "empties ~1,800 s" in line
    html = (tmp_path / "r.html").read_text()
    assert f"<h2>{HEADING}</h2>" in html and "48%" in html


def test_only_unknown_expectations_show_no_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a local run: limited_by unknown, no figures
    unknown = expected_entry(expected_iops=None, expected_bw_bytes=None, limited_by="unknown")
    path = _warehouse(tmp_path, [unknown])

    out = _report(path, capsys, "table", tmp_path / "r.html")

    assert HEADING not in out
    assert HEADING not in (tmp_path / "r.html").read_text()


def test_run_without_expectations_shows_no_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _warehouse(tmp_path, None)

    assert HEADING not in _report(path, capsys, "table", tmp_path / "r.html")


def test_json_report_carries_expected_vs_measured_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _warehouse(tmp_path, [expected_entry()])

    doc = json.loads(_report(path, capsys, "json", tmp_path / "r.html"))

    [row] = doc["expected_vs_measured"]
    assert (row["limited_by"], row["expected_iops"]) == ("instance", 40000.0)
    assert row["iops_ratio"] == pytest.approx(19243.512974 / 40000)
