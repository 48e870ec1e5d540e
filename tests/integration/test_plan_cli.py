"""`iofleet plan` as users run it: a real process, exit codes, stdout/stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.json"))


def iofleet(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


MATRIX = {
    "name": "cli-test",
    "instance_types": ["m6i.4xlarge"],
    "storage": [{"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100}],
    "workloads": [{"fio": "seq-read-1m-qd32", "params": {"RUNTIME": 2}}],
    "parallelism": [1, 10],
}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_passes_plan(example: Path) -> None:
    target = "local" if "local" in example.stem else "aws"
    result = iofleet("plan", str(example), "--target", target, "--format", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["total_instances"] == sum(c["slots"] for c in plan["cells"]) > 0


def test_seed004_example_expands_to_the_seed_fleet_sizes() -> None:
    result = iofleet(
        "plan", str(REPO / "examples" / "seed004-yocto-fleet.json"), "--format", "json"
    )
    plan = json.loads(result.stdout)
    assert sorted({c["fleet_size"] for c in plan["cells"]}) == [1, 10, 50, 100, 200]
    assert plan["total_instances"] == 5 * (1 + 10 + 50 + 100 + 200)


def test_plan_table_from_stdin() -> None:
    result = iofleet("plan", "-", stdin=json.dumps(MATRIX))
    assert result.returncode == 0, result.stderr
    assert "c001-gp3-m6i.4xlarge-x10-r1" in result.stdout
    assert "2 cells, total instances: 11 (limit 100)" in result.stdout.splitlines()


def test_bad_matrix_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    bad = dict(MATRIX, parallelism=[0], storage=[dict(MATRIX["storage"][0], iops=100)])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    result = iofleet("plan", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "storage[0].iops: gp3 IOPS must be 3000-80000, got 100",
        "parallelism[0]: must be greater than or equal to 1, got 0",
    ]


def test_json_syntax_error_exits_2_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "name": "x",\n  "storage": [}\n')
    result = iofleet("plan", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == "line 3 column 15: Expecting value"


def test_over_the_instance_limit_exits_2_with_the_count(tmp_path: Path) -> None:
    result = iofleet("plan", "-", stdin=json.dumps(dict(MATRIX, parallelism=[50, 60])))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "limits.max_instances: plan needs 110 instances, over the limit of 100"
    )


def test_missing_file_exits_2_without_traceback(tmp_path: Path) -> None:
    result = iofleet("plan", str(tmp_path / "nope.json"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"iofleet: {tmp_path / 'nope.json'}: no such matrix file"


def test_local_target_rejects_aws_storage() -> None:
    result = iofleet("plan", "-", "--target", "local", stdin=json.dumps(MATRIX))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "storage[0].type: 'ebs' storage needs an AWS run; local runs take only 'local' storage"
    )
