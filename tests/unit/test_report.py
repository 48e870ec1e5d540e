"""The report: human units, table/JSON/CSV output, offline HTML, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from iofleet.cli import main
from iofleet.errors import UsageError
from iofleet.report.cli import report_command
from iofleet.report.machine import CSV_COLUMNS
from iofleet.report.units import fmt_duration, fmt_iops, fmt_ns, fmt_rate, fmt_value
from iofleet.results.warehouse import Warehouse
from tests.unit import rawtree

RUN = "demo-20261121t051200z"


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    rawtree.write_run(tmp_path / "raw", RUN, slots=2)
    path = tmp_path / "warehouse.duckdb"
    with Warehouse(path) as wh:
        wh.ingest_dir(tmp_path / "raw")
    return path


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5862, "97m 42s"), (7181.4, "119m 41s"), (60, "1m 00s"), (12.34, "12.3s"), (0.5, "0.500s")],
)
def test_durations_read_like_build_times(seconds: float, text: str) -> None:
    assert fmt_duration(seconds) == text


@pytest.mark.parametrize(
    ("ns", "text"),
    [(850, "850 ns"), (12_345, "12.3 us"), (4_560_000, "4.56 ms"), (1.5e9, "1.50 s")],
)
def test_nanoseconds_scale_to_us_ms_s(ns: float, text: str) -> None:
    assert fmt_ns(ns) == text


def test_rates_use_binary_units_and_iops_thousands_separators() -> None:
    assert fmt_rate(123 * 2**20) == "123 MiB/s"
    assert fmt_rate(1.5 * 2**30) == "1.50 GiB/s"
    assert fmt_iops(40123.4) == "40,123"
    assert fmt_value(None, "ns") == "-"


def test_table_report_shows_a_row_per_cell_with_human_units(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # when
    rc = report_command(warehouse, run_id=None, fmt="table", html=None)
    # then
    out = capsys.readouterr().out
    assert rc == 0
    assert f"run {RUN}" in out
    assert "w02 app c-build - wall time" in out
    lines = out.splitlines()
    start = lines.index("w02 app c-build - wall time")
    wall_line = next(line for line in lines[start:] if "c000-local-fast-x2-r1" in line)
    # P0 .. P100 over the two slots' 60.0 s and 61.0 s
    assert wall_line.endswith("1m 00s  1m 01s  1m 01s  1m 01s  1m 01s  1m 01s")
    assert "Fleet latency" in out and " us" in out


def test_json_report_carries_the_raw_numbers_of_the_views(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_command(warehouse, run_id=RUN, fmt="json", html=None)
    doc = json.loads(capsys.readouterr().out)
    with Warehouse(warehouse) as wh:
        expected = wh.cell_percentiles(RUN)
    assert doc["run_id"] == RUN
    assert doc["run"]["matrix_name"] == "demo"
    assert [r["p50"] for r in doc["cell_percentiles"]] == [r["p50"] for r in expected]
    assert doc["fleet_latency"] and isinstance(doc["fleet_latency"][0]["p99_ns"], int)


def test_csv_report_is_cell_percentiles_with_a_header(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_command(warehouse, run_id=RUN, fmt="csv", html=None, view="cell_percentiles")
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    with Warehouse(warehouse) as wh:
        expected = wh.cell_percentiles(RUN)
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(expected)
    wall = next(r for r in rows if r["metric"] == "wall_seconds")
    assert (float(wall["p0"]), float(wall["p100"]), wall["job"]) == (60.0, 61.0, "")


def test_html_report_is_one_offline_file_with_charts(warehouse: Path, tmp_path: Path) -> None:
    # given
    out = tmp_path / "report.html"
    # when
    report_command(warehouse, run_id=None, fmt="table", html=str(out))
    # then: inline data + uPlot, nothing loaded (tests/unit/test_report_charts.py has more)
    page = out.read_text()
    assert not re.search(r"(src|href)\s*=", page, re.I)  # nothing loaded from anywhere
    assert re.findall(r"https?://[^\"' ]+", page) == ["https://github.com/leeoniya/uPlot"]
    assert page.count('<div class="chart" data-chart=') >= 3  # latency, ioping, ladders
    assert "var uPlot=" in page and "c000-local-fast-x2-r1" in page


def test_default_run_is_the_latest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rawtree.write_run(tmp_path / "raw", "old-run", slots=1, started_at="2026-01-01T00:00:00Z")
    rawtree.write_run(tmp_path / "raw", "new-run", slots=1, started_at="2026-03-01T00:00:00Z")
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(tmp_path / "raw")
    report_command(tmp_path / "w.duckdb", run_id=None, fmt="json", html=None)
    assert json.loads(capsys.readouterr().out)["run_id"] == "new-run"


def test_unknown_run_is_a_usage_error_naming_the_known_runs(warehouse: Path) -> None:
    with pytest.raises(UsageError, match=rf"--run nope: unknown run \(known: {RUN}\)"):
        report_command(warehouse, run_id="nope", fmt="table", html=None)


def test_a_warehouse_without_runs_is_a_usage_error(tmp_path: Path) -> None:
    Warehouse(tmp_path / "empty.duckdb").close()
    with pytest.raises(UsageError, match="no runs"):
        report_command(tmp_path / "empty.duckdb", run_id=None, fmt="table", html=None)


def test_missing_warehouse_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["report", "--warehouse", str(tmp_path / "nope.duckdb")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "no such file" in err
    assert not (tmp_path / "nope.duckdb").exists()


def test_a_file_that_is_not_a_warehouse_is_a_usage_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_text("not a database")
    with pytest.raises(UsageError, match="cannot open"):
        report_command(bogus, run_id=None, fmt="table", html=None)


def test_reports_show_each_cells_start_skew_from_the_slots_barrier_instants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given two slots on two hosts released at one instant, passing it 0 and 1,250 us
    # later, with kernel clock error bounds of 2 ms and 0.9 ms
    cell_dir = rawtree.write_run(tmp_path / "raw", RUN, slots=2) / rawtree.cell_doc()["cell_id"]
    for slot, (passed, max_error) in enumerate([("01.250000", 2000), ("01.251250", 900)]):
        manifest = cell_dir / f"slot-{slot:04d}" / "manifest.json"
        manifest.write_text(
            json.dumps({**json.loads(manifest.read_text()), "hostname": f"h{slot}"})
        )
        path = cell_dir / f"slot-{slot:04d}" / "slot.json"
        doc = json.loads(path.read_text())
        doc.update(
            barrier_released_at="2026-11-21T05:12:01.250000Z",
            barrier_passed_at=f"2026-11-21T05:12:{passed}Z",
            barrier_late_s=0.0,
            clock={"synced": True, "max_error_us": max_error, "est_error_us": 50},
        )
        path.write_text(json.dumps(doc))
    warehouse = tmp_path / "warehouse.duckdb"
    with Warehouse(warehouse) as wh:
        wh.ingest_dir(tmp_path / "raw")
    html = tmp_path / "report.html"
    # when
    report_command(warehouse, run_id=RUN, fmt="table", html=str(html))
    # then the table has the cell's skew, worst clock error and the bound skew + 2 x error
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Start skew"))
    row = next(line for line in lines[start:] if "c000-local-fast-x2-r1" in line)
    assert row.split()[-8:] == ["2", "1.25", "ms", "2.00", "ms", "5.25", "ms", "no"]
    page = html.read_text()
    assert "<h2>Start skew</h2>" in page and "1.25 ms" in page and "5.25 ms" in page
    # and the JSON report carries the view's raw numbers
    report_command(warehouse, run_id=RUN, fmt="json", html=None)
    (skew,) = json.loads(capsys.readouterr().out)["start_skew"]
    assert (skew["start_skew_us"], skew["clock_max_error_us"], skew["slots_passed"]) == (
        1250,
        2000,
        2,
    )


def test_a_skew_under_one_microsecond_is_shown_as_such_not_as_zero_ns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given two slots on one host that passed the barrier in the same microsecond (the
    # readings are whole microseconds), the kernel reporting no clock error
    cell_dir = rawtree.write_run(tmp_path / "raw", RUN, slots=2) / rawtree.cell_doc()["cell_id"]
    for slot in range(2):
        path = cell_dir / f"slot-{slot:04d}" / "slot.json"
        doc = json.loads(path.read_text())
        doc.update(
            barrier_released_at="2026-11-21T05:12:01.250000Z",
            barrier_passed_at="2026-11-21T05:12:01.250000Z",
            barrier_late_s=0.0,
            clock={"synced": True, "max_error_us": 0, "est_error_us": 0},
        )
        path.write_text(json.dumps(doc))
    warehouse = tmp_path / "warehouse.duckdb"
    with Warehouse(warehouse) as wh:
        wh.ingest_dir(tmp_path / "raw")
    # when
    report_command(warehouse, run_id=RUN, fmt="table", html=None)
    # then the skew, the clock error and the bound read "< 1 us", not a 0 ns resolution
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Start skew"))
    row = next(line for line in lines[start:] if "c000-local-fast-x2-r1" in line)
    assert row.count("< 1 us") == 3 and " ns" not in row, row


def test_an_interrupted_html_write_leaves_the_previous_report_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a report from an earlier run
    from iofleet.report import cli as report_cli

    report = tmp_path / "report.html"
    report.write_text("<html>earlier run</html>")

    # when Ctrl-C lands once the new text is written, before it replaces the old one
    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(report_cli.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report_cli._write_whole(report, "<html>" + "x" * 1_000_000 + "</html>")
    # then the earlier report is whole and nothing else is left beside it
    assert report.read_text() == "<html>earlier run</html>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
