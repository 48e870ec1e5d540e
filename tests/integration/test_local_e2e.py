"""`iofleet local` end to end: real fio, ioping and a real build, in processes.

These run the console script exactly as a user does, then check the raw
layout, the warehouse and the printed table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path

import duckdb
import pytest

from iofleet.report.model import fmt_us
from tests.integration.proctable import wait_for

pytestmark = pytest.mark.slow


def _matrix(tmp_path: Path, **overrides: object) -> Path:
    doc: dict[str, object] = {
        "name": "e2e",
        "description": "two local paths, fleets of 1 and 3",
        "storage": [
            {"label": "disk-a", "type": "local", "path": str(tmp_path / "a")},
            {"label": "disk-b", "type": "local", "path": "rel-b"},
        ],
        "workloads": [
            {
                "fio": "randwrite-16k-psync-16jobs",
                "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 2},
            },
            {"ioping": {"count": 5, "interval_ms": 0, "write": False}},
            {"app": "c-build"},
        ],
        "parallelism": [1, 3],
    }
    doc.update(overrides)
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(doc))
    return path


def _iofleet(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, IOFLEET_CBUILD_FILES="12")
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def finished_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("e2e")
    matrix = _matrix(tmp)
    result = _iofleet(["local", str(matrix), "--out", "out"], cwd=tmp)
    return tmp, result


def test_local_run_succeeds_and_prints_the_percentile_table(finished_run) -> None:
    _, result = finished_run
    assert result.returncode == 0, result.stderr
    for column in ("P0", "P50", "P75", "P90", "P98", "P100"):
        assert column in result.stdout


def test_relative_storage_path_resolves_under_the_working_directory(finished_run) -> None:
    tmp, _ = finished_run
    assert (tmp / "rel-b").is_dir()


def test_every_slot_wrote_its_raw_artifacts(finished_run) -> None:
    tmp, _ = finished_run
    runs = list((tmp / "out" / "raw").iterdir())
    assert len(runs) == 1
    slot_dirs = sorted(runs[0].glob("*/slot-*"))
    # 2 storage labels x (1 + 3) slots
    assert len(slot_dirs) == 8
    for slot_dir in slot_dirs:
        names = {p.name for p in slot_dir.iterdir()}
        assert {"manifest.json", "slot.json"} <= names
        assert any(n.startswith("w00-fio-") for n in names)
        assert any(n.startswith("w01-ioping") for n in names)
        assert any(n.startswith("w02-app-") for n in names)
        assert json.loads((slot_dir / "slot.json").read_text())["exit_code"] == 0


def test_warehouse_has_a_percentile_row_per_cell_with_every_slot(finished_run) -> None:
    tmp, _ = finished_run
    con = duckdb.connect(str(tmp / "out" / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT storage_label, fleet_size, slots FROM cell_percentiles "
            "WHERE metric_source = 'app' AND metric = 'wall_seconds' ORDER BY 1, 2"
        ).fetchall()
    finally:
        con.close()
    assert rows == [("disk-a", 1, 1), ("disk-a", 3, 3), ("disk-b", 1, 1), ("disk-b", 3, 3)]


def test_html_report_is_written_and_self_contained(finished_run) -> None:
    tmp, _ = finished_run
    html = (tmp / "out" / "report.html").read_text()
    assert 'data-chart="0"' in html and html.count("var uPlot=") == 1  # charts, inlined once
    # nothing fetched when opened: no external scripts, styles or images
    for external in ('src="http', "src='http", 'href="http', "<link ", "@import"):
        assert external not in html


def test_a_failing_slot_keeps_partial_results_and_exits_nonzero(tmp_path: Path) -> None:
    # given: an app that fails on every slot after fio and ioping ran
    matrix = _matrix(
        tmp_path,
        parallelism=[1],
        storage=[{"label": "disk-a", "type": "local", "path": str(tmp_path / "a")}],
        workloads=[
            {
                "fio": "randwrite-16k-psync-16jobs",
                "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 1},
            },
            {"app": {"name": "broken", "run": "echo failing on purpose >&2; exit 3"}},
        ],
    )
    # when
    result = _iofleet(["local", str(matrix), "--out", "out", "-q"], cwd=tmp_path)
    # then: exit 1, the fio results are still in the warehouse
    assert result.returncode == 1, result.stderr
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        (fio_rows,) = con.execute("SELECT count(*) FROM fio_results").fetchone()
        (status,) = con.execute("SELECT status FROM slots").fetchone()
    finally:
        con.close()
    assert fio_rows >= 1
    assert status == "FAILED"


def test_a_bad_matrix_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path, parallelism=[0])
    result = _iofleet(["local", str(matrix), "--out", "out"], cwd=tmp_path)
    assert result.returncode == 2
    assert "parallelism[0]" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def _processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line or environment mentions `text` (e.g. a temp dir)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        for name in ("cmdline", "environ"):
            try:
                if text.encode() in (proc / name).read_bytes():
                    found.append(int(proc.name))
                    break
            except OSError:
                continue
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_stops_every_slot_and_keeps_what_was_measured(
    tmp_path: Path, signum: signal.Signals
) -> None:
    # given: two slots busy with a long fio job
    matrix = _matrix(
        tmp_path,
        parallelism=[2],
        storage=[{"label": "disk-a", "type": "local", "path": str(tmp_path / "a")}],
        workloads=[
            {"ioping": {"count": 3, "interval_ms": 0, "write": False}},
            {
                "fio": "randwrite-16k-psync-16jobs",
                "params": {"RUNTIME": 120, "SIZE": "4m", "NUM_JOBS": 1},
            },
        ],
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "iofleet.cli", "local", str(matrix), "--out", "out", "-q"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # wait (bounded) until both slots have finished ioping, i.e. fio is running
        iopings = (tmp_path / "out" / "raw").glob
        wait_for(
            lambda: (
                len(list(iopings("*/*/slot-*/w00-ioping.json"))) == 2 or proc.poll() is not None
            ),
            120,
            "both slots to get to their fio workload",
        )
        assert proc.poll() is None, proc.communicate()
        # when
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # then: exit 128 + signal, nothing left running, the ioping rows and the run are in
    # the warehouse
    assert proc.returncode == 128 + signum, stderr
    assert _processes_mentioning(str(tmp_path)) == []
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        (status,) = con.execute("SELECT status FROM runs").fetchone()
        (requests,) = con.execute("SELECT count(*) FROM ioping_requests").fetchone()
        slot_status = [r[0] for r in con.execute("SELECT status FROM slots").fetchall()]
    finally:
        con.close()
    assert status == "ABORTED"
    assert requests == 2 * 2  # 3 requests per slot, the warm-up dropped
    assert slot_status == ["FAILED", "FAILED"]


def test_each_fleet_started_at_one_instant_and_the_report_shows_its_skew(finished_run) -> None:
    # the raw slot.json files: every slot of a cell recorded the one agreed instant
    # and passed at or after it; the warehouse's start_skew row is their spread
    tmp, result = finished_run
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp / "out" / "raw").iterdir()
    con = duckdb.connect(str(tmp / "out" / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT cell_id, fleet_size, slots_passed, release_instants, start_skew_us, "
            "clock_max_error_us, start_skew_bound_us FROM start_skew ORDER BY cell_index"
        ).fetchall()
    finally:
        con.close()
    assert len(rows) == 4
    for cell_id, fleet_size, slots_passed, instants, skew_us, max_error, bound in rows:
        records = [json.loads(p.read_text()) for p in run_dir.glob(f"{cell_id}/slot-*/slot.json")]
        assert len(records) == fleet_size == slots_passed and instants == 1
        (released,) = {_epoch_us(r["barrier_released_at"]) for r in records}
        passed = [_epoch_us(r["barrier_passed_at"]) for r in records]
        assert all(p >= released for p in passed)
        assert skew_us == max(passed) - min(passed)
        assert max_error == max(r["clock"]["max_error_us"] for r in records)
        assert bound == skew_us  # one host, one clock: its error is common to every slot
        fleet_line = next(line for line in _skew_lines(result.stdout) if cell_id in line)
        assert f" {fmt_us(skew_us)} " in fleet_line
    html = (tmp / "out" / "report.html").read_text()
    skew_table = html.split("<h2>Start skew</h2>", 1)[1].split("</table>", 1)[0]
    for cell_id, *_, skew_us, _max_error, _bound in rows:
        assert f'<td class="l">{cell_id}</td>' in skew_table
        assert f"<td>{escape(fmt_us(skew_us))}</td>" in skew_table  # "&lt; 1 us"


def _skew_lines(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Start skew"))
    return lines[start:]


def _epoch_us(iso: str) -> int:
    when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def test_a_failed_populate_fails_its_cell_and_runs_no_slot_of_it(tmp_path: Path) -> None:
    # given a cell whose app populates its data once and fails doing so, and a second
    # storage whose populate succeeds (the app writes where it is told)
    populate = 'case "$IOFLEET_CELL_ID" in *disk-a*) exit 3;; esac; echo x > "$IOFLEET_SHARED/d"'
    matrix = _matrix(
        tmp_path,
        parallelism=[2],
        storage=[
            {"label": "disk-a", "type": "local", "path": str(tmp_path / "a")},
            {"label": "disk-b", "type": "local", "path": str(tmp_path / "b")},
        ],
        workloads=[
            {"app": {"name": "p", "populate": populate, "run": 'cat "$IOFLEET_SHARED/d"'}},
            {"ioping": {"count": 3, "interval_ms": 0, "write": False}},
        ],
    )
    # when
    result = _iofleet(["local", str(matrix), "--out", "out", "-q"], cwd=tmp_path)
    # then the run fails, and the failed cell ran no slot (before: its fleet timed its app
    # on missing data and the decision table ranked it); the other cell ran both
    assert result.returncode == 1, result.stderr
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        slots = con.execute(
            "SELECT storage_label, count(*) FROM slots GROUP BY 1 ORDER BY 1"
        ).fetchall()
        pings = con.execute("SELECT DISTINCT cell_id FROM ioping_requests ORDER BY 1").fetchall()
        phases = con.execute(
            "SELECT cell_id, phase, exit_code FROM app_runs WHERE phase = 'populate' ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    assert slots == [("disk-b", 2)]
    assert len(pings) == 1 and "disk-b" in pings[0][0]
    assert [(("disk-a" in c), p, e) for c, p, e in phases] == [
        (True, "populate", 3),
        (False, "populate", 0),
    ]
