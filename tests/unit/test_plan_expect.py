"""`iofleet plan`: expectations, warnings, cost and the budget, end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iofleet.cli import main


def matrix(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "expect-test",
        "instance_types": ["c6a.xlarge"],
        "storage": [
            {
                "type": "ebs",
                "label": "io2-50k",
                "volume_type": "io2",
                "size_gib": 100,
                "iops": 50000,
            }
        ],
        "workloads": [{"fio": "randwrite-16k-psync-16jobs", "params": {"RUNTIME": 180}}],
        "parallelism": [1],
    }
    doc.update(overrides)
    return doc


def plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict, *args: str
) -> tuple[int, str, str]:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    code = main(["plan", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def test_plan_json_carries_expected_per_cell(tmp_path: Path, capsys) -> None:
    code, out, _ = plan(tmp_path, capsys, matrix(), "--format", "json")
    assert code == 0
    cell = json.loads(out)["cells"][0]
    [entry] = cell["expected"]
    assert (entry["job"], entry["direction"], entry["limited_by"]) == (
        "randwrite",
        "write",
        "instance",
    )
    assert entry["expected_iops"] == 40000
    assert entry["seconds_to_exhaust"] == 1800
    assert any("measures the burst" in w for w in cell["warnings"])


def test_plan_json_carries_cost_per_cell_and_at_the_top(tmp_path: Path, capsys) -> None:
    doc = matrix(parallelism=[1, 2])
    _, out, _ = plan(tmp_path, capsys, doc, "--format", "json")
    data = json.loads(out)
    per_cell = [c["estimated_cost_usd"] for c in data["cells"]]
    assert all(c > 0 for c in per_cell)
    assert data["estimated_cost_usd"] == pytest.approx(
        sum(per_cell) + data["run_overhead"]["estimated_cost_usd"], abs=1e-3
    )
    assert (data["region"], data["prices_as_of"]) == ("us-east-1", "2025-06-01")


def test_plan_over_budget_is_refused_with_the_estimate(tmp_path: Path, capsys) -> None:
    doc = matrix(limits={"budget_usd": 0.01})
    code, out, err = plan(tmp_path, capsys, doc)
    assert code == 2
    assert out == ""
    [line] = err.strip().splitlines()
    assert line.startswith(f"{tmp_path / 'm.json'}: limits.budget_usd: plan estimated at $")
    assert "over the budget of $0.01" in line


def test_a_budget_under_a_cent_is_shown_as_given_not_as_0(tmp_path: Path, capsys) -> None:
    code, _, err = plan(tmp_path, capsys, matrix(limits={"budget_usd": 0.0031}))
    assert code == 2
    assert err.rstrip().endswith("over the budget of $0.0031")


def test_a_budget_in_a_region_without_prices_is_refused_not_passed_on_0(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "ap-south-2")
    code, out, err = plan(tmp_path, capsys, matrix(limits={"budget_usd": 1000}))
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"{tmp_path / 'm.json'}: limits.budget_usd: no prices for ap-south-2")
    assert "the budget cannot be checked" in line
    # with the region's rates in the matrix, the budget is checked against them
    mine = {
        "as_of": "2026-11-20",
        "source": "test rates, not AWS prices",
        "regions": {"ap-south-2": {"ec2_hourly": {"c6a.xlarge": 100000.0}}},
    }
    code, _, err = plan(tmp_path, capsys, matrix(limits={"budget_usd": 1000}, prices=mine))
    assert code == 2
    assert "plan estimated at $" in err and "over the budget of $1,000.00" in err


def test_plan_within_budget_passes(tmp_path: Path, capsys) -> None:
    code, out, _ = plan(tmp_path, capsys, matrix(limits={"budget_usd": 1000}))
    assert code == 0
    assert "budget $1,000.00" in out


def test_plan_table_shows_ceilings_and_cost(tmp_path: Path, capsys) -> None:
    _, out, _ = plan(tmp_path, capsys, matrix())
    assert "randwrite write: 40,000 IOPS" in out
    assert "limited by instance" in out
    assert "estimated cost: $" in out


def test_drain_policy_reaches_the_plan(tmp_path: Path, capsys) -> None:
    doc = matrix(
        instance_types=["m6i.4xlarge"],
        storage=[{"type": "ebs", "label": "gp2", "volume_type": "gp2", "size_gib": 100}],
        workloads=[{"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 60}}],
        burst_policy="drain",
    )
    _, out, _ = plan(tmp_path, capsys, doc, "--format", "json")
    data = json.loads(out)
    [entry] = data["cells"][0]["expected"]
    assert data["burst_policy"] == "drain"
    assert (entry["expected_iops"], entry["limited_by"]) == (300, "volume")


def test_unknown_burst_policy_is_a_matrix_error(tmp_path: Path, capsys) -> None:
    code, _, err = plan(tmp_path, capsys, matrix(burst_policy="sometimes"))
    assert code == 2
    assert err.startswith(f"{tmp_path / 'm.json'}: burst_policy:")


def test_unknown_instance_type_plans_with_limited_by_unknown(tmp_path: Path, capsys) -> None:
    doc = matrix(instance_types=["z9.48xlarge"])
    code, out, _ = plan(tmp_path, capsys, doc, "--format", "json")
    assert code == 0
    cell = json.loads(out)["cells"][0]
    assert cell["expected"][0]["limited_by"] == "unknown"
    assert json.loads(out)["cost_complete"] is False


def test_local_plan_has_expectations_but_no_cost(tmp_path: Path, capsys) -> None:
    doc = matrix(
        instance_types=[],
        storage=[{"type": "local", "label": "here", "path": str(tmp_path)}],
        limits={"budget_usd": 0.01},
    )
    code, out, _ = plan(tmp_path, capsys, doc, "--format", "json", "--target", "local")
    assert code == 0
    data = json.loads(out)
    assert data["estimated_cost_usd"] == 0.0
    assert data["cells"][0]["expected"][0]["limited_by"] == "unknown"


def _efs(**fields: Any) -> list[dict[str, Any]]:
    return [{"type": "efs", "label": "efs", **fields}]


def test_elastic_efs_transfer_is_priced_from_the_expected_rates_and_the_layout(
    tmp_path: Path, capsys
) -> None:
    # given an EFS the stack creates (elastic), 4 slots of a sequential 1 MiB read and
    # an ioping probe of 10 reads
    fleet, size_gib = 4, 2
    doc = matrix(
        storage=_efs(),
        workloads=[
            {"fio": "seq-read-1m-qd32", "params": {"RUNTIME": 60, "SIZE": f"{size_gib}g"}},
            {"ioping": {"count": 10, "interval_ms": 0}},
        ],
        parallelism=[fleet],
    )
    # when it is planned
    code, out, _ = plan(tmp_path, capsys, doc, "--format", "json")
    assert code == 0
    [cell] = json.loads(out)["cells"]
    items = {i["item"]: i for i in cell["cost"]["items"]}
    # then reads are the job at its expected rate for its run time plus ioping's 11
    # requests of 4 KiB, per slot, times the fleet; writes are the file fio lays out
    # before reading plus ioping's 1 MiB working set
    [entry] = cell["expected"]
    slot_read = entry["expected_bw_bytes"] * entry["runtime_s"] + 11 * 4096
    assert items["efs elastic reads"]["quantity"] == pytest.approx(
        slot_read * fleet / 1024**3, rel=1e-6
    )
    slot_written = size_gib * 1024**3 + 1024**2
    assert items["efs elastic writes"]["quantity"] == pytest.approx(
        slot_written * fleet / 1024**3, rel=1e-6
    )
    # at the shipped rates, and nothing is left unknown
    assert (items["efs elastic reads"]["unit_usd"], items["efs elastic writes"]["unit_usd"]) == (
        0.03,
        0.06,
    )
    assert cell["cost"]["complete"] is True


@pytest.mark.parametrize(
    ("storage", "workloads", "left_out"),
    [
        # an existing file system: its throughput mode (and so its transfer charges)
        # is not known offline
        (_efs(file_system_id="fs-0123456789abcdef0"), None, "efs transfer charges"),
        # an app's traffic on an elastic file system is not known before it runs
        (
            _efs(),
            [{"app": "c-build"}],
            "efs elastic throughput (per GiB transferred; app c-build",
        ),
    ],
    ids=["existing-efs", "app-on-elastic"],
)
def test_a_budget_is_refused_when_the_estimate_leaves_something_out(
    tmp_path: Path, capsys, storage: list, workloads: list | None, left_out: str
) -> None:
    # given a budget far above the known part of the estimate
    doc = matrix(storage=storage, limits={"budget_usd": 100000})
    if workloads:
        doc["workloads"] = workloads
    # when it is planned
    code, out, err = plan(tmp_path, capsys, doc)
    # then it is refused in one line naming what the estimate leaves out
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"{tmp_path / 'm.json'}: limits.budget_usd: the estimate ($")
    assert left_out in line and "leaves out " in line and "the budget cannot be checked" in line
    # and without a budget the same matrix plans, its estimate saying what is unknown
    del doc["limits"]
    code, out, _ = plan(tmp_path, capsys, doc)
    assert code == 0 and "unknown: 1 item(s), not included" in out
