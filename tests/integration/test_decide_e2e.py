"""A real `iofleet local` run of a small matrix (two storage paths x two fleet sizes), then
`iofleet report`: the decision table comes first, and its numbers, the fleet totals, the
failure reasons and the environment are the warehouse's rows."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import duckdb
import numpy as np
import pytest

from iofleet import __version__

pytestmark = pytest.mark.slow

# fails on the 'b-broken' path only: a failure reason on some slots, builds on others
APP = (
    'case "$PWD" in *b-broken*) echo "out of inodes on purpose" >&2; exit 3;; esac; '
    "head -c 65536 /dev/zero > built.bin"
)


def _iofleet(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("decide-e2e")
    matrix = {
        "name": "decide",
        "description": "two local paths x fleets of 1 and 2",
        "storage": [
            {"label": "disk-a", "type": "local", "path": str(tmp / "a")},
            {"label": "disk-b", "type": "local", "path": str(tmp / "b-broken")},
        ],
        "workloads": [
            {
                "fio": "randwrite-16k-psync-16jobs",
                "params": {"RUNTIME": 1, "SIZE": "2m", "NUM_JOBS": 1},
            },
            {"app": {"name": "tinybuild", "run": APP}},
        ],
        "parallelism": [1, 2],
    }
    (tmp / "matrix.json").write_text(json.dumps(matrix))
    result = _iofleet(["local", "matrix.json", "--out", "out", "-q"], cwd=tmp)
    assert result.returncode == 1, result.stderr  # the disk-b builds failed: results kept
    db = duckdb.connect(str(tmp / "out" / "warehouse.duckdb"), read_only=True)
    (run_id,) = db.execute("SELECT run_id FROM runs").fetchone()  # type: ignore[misc]
    db.close()
    return tmp, run_id


def _db(tmp: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(tmp / "out" / "warehouse.duckdb"), read_only=True)


def _report(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _iofleet(["report", "--warehouse", "out/warehouse.duckdb", *args], cwd=tmp)


def _slot_iops(tmp: Path, run_id: str) -> dict[tuple[str, int], dict[tuple[str, int], float]]:
    """(storage, fleet) -> {(cell, slot): the slot's IOPS summed over fio's jobs[]}."""
    out: dict[tuple[str, int], dict[tuple[str, int], float]] = defaultdict(dict)
    with _db(tmp) as db:
        for label, fleet, cell, slot, iops in db.execute(
            "SELECT s.storage_label, s.fleet_size, f.cell_id, f.slot_index, sum(f.iops) "
            "FROM fio_results f JOIN slots s USING (run_id, cell_id, slot_index) "
            "WHERE f.run_id = ? AND f.error = 0 GROUP BY ALL",
            [run_id],
        ).fetchall():
            out[(label, fleet)][(cell, slot)] = iops
    return out


def test_the_table_report_shows_the_decision_table_first(run) -> None:
    tmp, run_id = run
    result = _report(tmp, "--target", "p50_iops>=1")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    first = out.index("Decision - target: p50_iops>=1")
    for later in ("Fleet totals", "Failures", "Environment", "Across slots"):
        assert first < out.index(later), later
    assert "Cheapest meeting the target: w00 fio randwrite-16k-psync-16jobs" in out
    assert out.index("Cheapest meeting the target") < out.index("Fleet totals")
    assert "instances" in out and "Fleet-size scaling" in out  # the pivot: two fleet sizes
    assert "out of inodes on purpose" in out
    assert f"| {__version__}" in out or f"  {__version__}" in out


def test_decision_rows_are_the_warehouse_slot_values_pooled_per_configuration(run) -> None:
    tmp, run_id = run
    result = _report(tmp, "--format", "json", "--view", "decision", "--target", "p50_iops>=1")
    assert result.returncode == 0, result.stderr
    rows = [r for r in json.loads(result.stdout) if r["metric_source"] == "fio"]
    slots = _slot_iops(tmp, run_id)
    assert {(r["storage_label"], r["fleet_size"]) for r in rows} == set(slots)
    for r in rows:
        values = list(slots[(r["storage_label"], r["fleet_size"])].values())
        assert r["slots"] == len(values) == r["fleet_size"]
        assert r["value"] == pytest.approx(np.percentile(values, 50))
        assert r["p100"] == pytest.approx(max(values))
        assert r["usd_per_run"] == 0.0  # a local run: the plan's cost is 0
        assert r["meets_target"] is True
    assert [r["rank"] for r in rows] == [1, 2, 3, 4]
    assert [r["value"] for r in rows] == sorted((r["value"] for r in rows), reverse=True)
    # all cost $0: the front is the best performer, and the cheapest meeting is rank 1
    assert [r["pareto"] for r in rows] == [True, False, False, False]
    assert [r["cheapest_meeting_target"] for r in rows] == [True, False, False, False]
    app = [r for r in json.loads(result.stdout) if r["metric_source"] == "app"]
    assert {r["storage_label"] for r in app} == {"disk-a"}  # failed builds are not build times


def test_fleet_totals_are_the_slots_rates_over_their_overlap_window(run) -> None:
    tmp, run_id = run
    result = _report(tmp, "--format", "csv", "--view", "fleet_totals")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 4
    with _db(tmp) as db:
        for r in rows:
            # each slot's job ran for its runtime_ms up to where fio ended the run (one
            # stonewall group): fio's own clock, whatever ran before it in the slot
            per_slot = db.execute(
                "SELECT max(f.fio_ended_ms), max(f.runtime_ms), sum(f.iops), sum(f.bw_bytes) "
                "FROM fio_results f WHERE f.run_id = ? AND f.cell_id = ? GROUP BY f.slot_index",
                [run_id, r["cell_id"]],
            ).fetchall()
            assert int(r["slots"]) == len(per_slot)
            assert float(r["total_iops"]) == pytest.approx(sum(p[2] for p in per_slot))
            assert float(r["total_bw_bytes"]) == pytest.approx(sum(p[3] for p in per_slot))
            start = max((p[0] - p[1]) * 1000 for p in per_slot)
            end = min(p[0] * 1000 for p in per_slot)
            assert float(r["overlap_s"]) == pytest.approx(max(0, end - start) / 1e6)
            assert r["binding"] == "unknown"  # local storage: no published ceiling


def test_failures_and_environment_come_from_the_slots(run) -> None:
    tmp, run_id = run
    failures = json.loads(_report(tmp, "--format", "json", "--view", "failures").stdout)
    with _db(tmp) as db:
        failed = db.execute(
            "SELECT cell_id, slot_index FROM app_runs WHERE run_id = ? AND exit_code <> 0",
            [run_id],
        ).fetchall()
        versions = {
            v for (v,) in db.execute("SELECT DISTINCT iofleet_version FROM slots").fetchall()
        }
    assert len(failed) == 3  # disk-b: one slot at fleet 1, two at fleet 2
    app_fail = {(f["cell_id"], f["slot_index"]) for f in failures if f["level"] == "app"}
    assert app_fail == set(failed)
    slot_fail = [f for f in failures if f["level"] == "slot"]
    assert {(f["cell_id"], f["slot_index"]) for f in slot_fail} == set(failed)
    assert all("tinybuild" in f["reason"] for f in slot_fail)
    assert versions == {__version__}
    env = json.loads(_report(tmp, "--format", "json", "--view", "environment").stdout)
    assert len(env) == 4 and {e["iofleet_version"] for e in env} == {__version__}
    assert all(e["fio_version"] and e["kernel"] and e["target_fstype"] for e in env)


def test_the_full_json_puts_the_decision_first_and_a_bad_target_exits_2(run) -> None:
    tmp, _ = run
    doc = json.loads(_report(tmp, "--format", "json").stdout)
    assert list(doc)[:3] == ["run_id", "target", "decision"]
    assert doc["pivot"] and doc["scaling"] and doc["fleet_totals"]
    bad = _report(tmp, "--target", "p98_build_hours<=2")
    assert bad.returncode == 2
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith("iofleet: --target: 'p98_build_hours<=2': unknown metric")
    page = (tmp / "out" / "report.html").read_text()
    assert (
        page.index("<h2>Decision")
        < page.index("<h2>Fleet totals")
        < page.index("<h2>Percentiles across slots")
    )
    assert "<h2>Failures (6)</h2>" in page and "<h2>Environment</h2>" in page
    unmeasured = _report(tmp, "--target", "p50_ioping_median<=1ms")
    assert unmeasured.returncode == 2 and "measured no ioping_median" in unmeasured.stderr
