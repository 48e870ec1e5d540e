"""Two real `iofleet local` runs of one tiny matrix, then `iofleet compare` on them:
a verdict with its interval for every metric, and rows that match the warehouse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import mean

import duckdb
import pytest

from iofleet.results.compare import VERDICTS

pytestmark = pytest.mark.slow

FIO_METRICS = {
    "iops",
    "bw_bytes",
    "clat_mean_ns",
    "clat_p50_ns",
    "clat_p90_ns",
    "clat_p99_ns",
    "clat_p99_9_ns",
    "clat_max_ns",
}
IOPING_METRICS = {"lat_min_ns", "lat_median_ns", "lat_mean_ns", "lat_max_ns"}


def _iofleet(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, IOFLEET_CBUILD_FILES="4")
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    tmp = tmp_path_factory.mktemp("compare-e2e")
    matrix = {
        "name": "cmp",
        "description": "two local paths, a fleet of 4",
        "storage": [
            {"label": "disk-a", "type": "local", "path": str(tmp / "a")},
            {"label": "disk-b", "type": "local", "path": str(tmp / "b")},
        ],
        "workloads": [
            {
                "fio": "randwrite-16k-psync-16jobs",
                "params": {"RUNTIME": 1, "SIZE": "2m", "NUM_JOBS": 1},
            },
            {"ioping": {"count": 5, "interval_ms": 0, "write": False}},
            {"app": "c-build"},
        ],
        "parallelism": [4],
    }
    (tmp / "matrix.json").write_text(json.dumps(matrix))
    for _ in range(2):
        result = _iofleet(["local", "matrix.json", "--out", "out", "-q"], cwd=tmp)
        assert result.returncode == 0, result.stderr
    db = duckdb.connect(str(tmp / "out" / "warehouse.duckdb"), read_only=True)
    runs = [r for (r,) in db.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]
    db.close()
    assert len(runs) == 2
    return tmp, runs


def test_two_runs_compare_with_a_verdict_and_interval_per_metric(two_runs) -> None:
    tmp, (run_a, run_b) = two_runs
    result = _iofleet(
        ["compare", "--warehouse", "out/warehouse.duckdb", run_a, run_b, "--format", "json"],
        cwd=tmp,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    # each storage configuration appears in both runs: paired with itself
    for label in ("disk-a", "disk-b"):
        mine = [r for r in rows if f"storage_label={label}" in r["config"]]
        assert {r["metric"] for r in mine} == FIO_METRICS | IOPING_METRICS | {"wall_seconds"}
    for r in rows:
        assert r["verdict"] in VERDICTS
        assert r["a_n_slots"] == r["b_n_slots"] == 4
        assert r["ratio"] == pytest.approx(r["b"] / r["a"])
        assert r["ci_low"] <= r["ratio"] <= r["ci_high"]
        if r["verdict"] != "too_few_samples":
            assert 0 <= r["p_value"] <= r["p_adjusted"] <= 1


def test_the_rows_are_the_warehouse_s_slot_values(two_runs) -> None:
    tmp, (run_a, run_b) = two_runs
    result = _iofleet(
        ["compare", "--warehouse", "out/warehouse.duckdb", run_a, run_b, "--format", "json"],
        cwd=tmp,
    )
    rows = json.loads(result.stdout)
    db = duckdb.connect(str(tmp / "out" / "warehouse.duckdb"), read_only=True)

    def slot_iops(run: str) -> list[float]:
        # per slot: the sum over fio's jobs[] entries of the workload (numjobs)
        return [
            v
            for (v,) in db.execute(
                "SELECT sum(f.iops) FROM fio_results f JOIN slots s USING (run_id, cell_id, slot_index) "
                "WHERE f.run_id = ? AND s.storage_label = 'disk-b' AND f.error = 0 "
                "GROUP BY f.cell_id, f.slot_index",
                [run],
            ).fetchall()
        ]

    def slot_build_seconds(run: str) -> list[float]:
        return [
            v
            for (v,) in db.execute(
                "SELECT a.wall_seconds FROM app_runs a JOIN slots s USING (run_id, cell_id, slot_index) "
                "WHERE a.run_id = ? AND s.storage_label = 'disk-b' AND a.phase = 'run'",
                [run],
            ).fetchall()
        ]

    iops = next(r for r in rows if r["metric"] == "iops" and "disk-b" in r["config"])
    assert iops["a"] == pytest.approx(mean(slot_iops(run_a)))
    assert iops["b"] == pytest.approx(mean(slot_iops(run_b)))
    build = next(r for r in rows if r["metric"] == "wall_seconds" and "disk-b" in r["config"])
    assert build["a"] == pytest.approx(mean(slot_build_seconds(run_a)))
    assert (build["better"], iops["better"]) == ("lower", "higher")


def test_configurations_within_one_run_print_a_table_of_verdicts(two_runs) -> None:
    tmp, (run_a, _) = two_runs
    result = _iofleet(
        [
            "compare",
            "--warehouse",
            "out/warehouse.duckdb",
            run_a,
            "--a",
            "storage_label=disk-a",
            "--b",
            "storage_label=disk-b",
        ],
        cwd=tmp,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    metric_lines = [
        line
        for line in lines
        if line.startswith("  ") and any(line.rstrip().endswith(v) for v in VERDICTS)
    ]
    assert len(metric_lines) == 13  # 8 fio + 4 ioping + wall time
    for line in metric_lines:
        assert " [" in line and "]" in line  # the ratio's interval
    assert "13 comparisons:" in result.stdout
