"""A matrix's own `prices` (iofleet/plan/prices.py): rates laid over data/prices.json for
the plan's cost, checked leaf by leaf with `PATH: message`, through `iofleet plan` itself.

The rates here are round TEST RATES chosen for hand arithmetic, not AWS prices.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from iofleet.plan import cost, prices
from iofleet.plan.matrix import ValidationFailed, build_plan, validate_matrix_dict

ROOT = Path(__file__).resolve().parents[2]
SEED004 = ROOT / "examples" / "seed004-yocto-fleet.json"

OPENZFS_RATES = {
    "deployment_types": {
        "SINGLE_AZ_1": {"ssd_gib_month": 0.10, "throughput_mbps_month": 0.20, "iops_month": 0.01}
    }
}
PRICES = {
    "as_of": "2026-11-20",
    "source": "test rates, not AWS prices",
    "regions": {"us-east-1": {"fsx-openzfs": OPENZFS_RATES}},
}


def _matrix(**extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "zfs",
        "instance_types": ["m6i.4xlarge"],
        "storage": [
            {
                "type": "fsx-openzfs",
                "label": "zfs",
                "deployment_type": "SINGLE_AZ_1",
                "storage_capacity_gib": 256,
                "throughput_capacity": 4096,
                "iops": 20000,
            }
        ],
        "workloads": [{"fio": "latency-4k-qd1-randread"}],
        "parallelism": [10],
    }
    raw.update(extra)
    return raw


def _plan(raw: dict[str, Any]) -> dict[str, Any]:
    return build_plan(validate_matrix_dict(raw), target="aws").to_dict()


def _fsx_items(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (cell,) = plan["cells"]
    return {i["item"]: i for i in cell["cost"]["items"] if i["item"].startswith("fsx-")}


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        validate_matrix_dict(raw)
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def test_without_prices_fsx_cost_is_unknown_with_the_way_to_give_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    plan = _plan(_matrix())
    assert _fsx_items(plan) == {}
    (line,) = [u for u in plan["cost_unknown"] if "fsx-openzfs" in u]
    assert "give the rates in the matrix's prices" in line
    assert plan["matrix_prices"] is None


def test_matrix_prices_price_the_file_system_and_are_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    without = _plan(_matrix())
    plan = _plan(_matrix(prices=PRICES))
    items = _fsx_items(plan)
    assert set(items) == {
        "fsx-openzfs SINGLE_AZ_1 SSD storage",
        "fsx-openzfs SINGLE_AZ_1 throughput capacity",
        "fsx-openzfs provisioned SSD IOPS",
    }
    assert items["fsx-openzfs SINGLE_AZ_1 SSD storage"]["unit_usd"] == 0.10
    # the months the file system lives, from the storage line: 256 GiB x months
    months = items["fsx-openzfs SINGLE_AZ_1 SSD storage"]["quantity"] / 256
    assert items["fsx-openzfs SINGLE_AZ_1 throughput capacity"]["usd"] == pytest.approx(
        4096 * 0.20 * months, abs=1e-5
    )
    # 20,000 provisioned - 3 x 256 included = 19,232 IOPS-months at 0.01
    assert items["fsx-openzfs provisioned SSD IOPS"]["usd"] == pytest.approx(
        19232 * 0.01 * months, abs=1e-5
    )
    fsx_usd = sum(i["usd"] for i in items.values())
    assert plan["estimated_cost_usd"] == pytest.approx(
        without["estimated_cost_usd"] + fsx_usd, abs=1e-3
    )
    assert not [u for u in plan["cost_unknown"] if "fsx" in u]
    assert plan["matrix_prices"] == {
        "as_of": "2026-11-20",
        "source": "test rates, not AWS prices",
        "sections": ["fsx-openzfs"],
        "regions": ["us-east-1"],
    }


def test_matrix_prices_replace_only_the_leaves_they_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    shipped = cost.price_table()["regions"]["us-east-1"]
    mine = {
        "as_of": "2026-11-20",
        "source": "an agreement's rate",
        "regions": {"us-east-1": {"ec2_hourly": {"m6i.4xlarge": 0.5}}},
    }
    merged = prices.region_prices(cost.price_table(), "us-east-1", mine)
    assert merged["ec2_hourly"]["m6i.4xlarge"] == 0.5
    other = {k: v for k, v in merged["ec2_hourly"].items() if k != "m6i.4xlarge"}
    assert other == {k: v for k, v in shipped["ec2_hourly"].items() if k != "m6i.4xlarge"}
    assert merged["ebs"] == shipped["ebs"]
    assert cost.price_table()["regions"]["us-east-1"]["ec2_hourly"]["m6i.4xlarge"] != 0.5
    (cell,) = _plan(_matrix(prices=mine))["cells"]
    (ec2,) = [i for i in cell["cost"]["items"] if i["item"] == "ec2 m6i.4xlarge"]
    assert ec2["unit_usd"] == 0.5


def test_prices_for_another_region_change_nothing_and_the_plan_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    raw = _matrix(prices=PRICES)
    plan = build_plan(validate_matrix_dict(raw), target="aws")
    notes = plan.to_dict()
    assert _fsx_items(notes) == {}
    assert notes["matrix_prices"]["sections"] == []
    text = cost.render_annotations(plan)
    assert "the matrix's prices are for us-east-1, none for eu-central-1" in text


@pytest.mark.parametrize(
    ("prices_value", "expected"),
    [
        ([], "prices: "),
        ({}, "prices.as_of: required"),
        ({**PRICES, "as_of": "2026-02-30"}, "prices.as_of: not a calendar date: '2026-02-30'"),
        ({**PRICES, "as_of": 20261120}, "prices.as_of: expected a date YYYY-MM-DD"),
        ({**PRICES, "source": "  "}, "prices.source: expected a non-blank string"),
        ({**PRICES, "regions": {}}, "prices.regions: expected a non-empty object"),
        ({**PRICES, "note": "x"}, "prices.note: unknown key"),
        (
            {**PRICES, "regions": {"mars-1": {"ec2_hourly": {}}}},
            'prices.regions["mars-1"]: not an AWS Region code',
        ),
        (  # a trailing newline was taken, the rates then matched no region of the plan
            {**PRICES, "regions": {"us-east-1\n": {"ec2_hourly": {}}}},
            'prices.regions["us-east-1\\n"]: not an AWS Region code',
        ),
        (
            {**PRICES, "regions": {"us-east-1": {"ec2_hourly": {"m6i.4xlarge\n": 1}}}},
            'ec2_hourly["m6i.4xlarge\\n"]: unknown key: expected an EC2 instance type',
        ),
        (
            {**PRICES, "regions": {"us-east-1": {"fsx": {}}}},
            'prices.regions["us-east-1"].fsx: unknown key (expected one of: ec2_hourly',
        ),
        (
            {**PRICES, "regions": {"us-east-1": {"ec2_hourly": {"m6i.4xlarge": -0.1}}}},
            'prices.regions["us-east-1"].ec2_hourly["m6i.4xlarge"]: a price cannot be negative',
        ),
        (
            {**PRICES, "regions": {"us-east-1": {"ec2_hourly": {"m6i.4xlarge": "0.1"}}}},
            'ec2_hourly["m6i.4xlarge"]: expected a price in USD',
        ),
        (
            {**PRICES, "regions": {"us-east-1": {"ec2_hourly": {"m6i.4xlarge": True}}}},
            'ec2_hourly["m6i.4xlarge"]: expected a price in USD',
        ),
        (
            {**PRICES, "regions": {"us-east-1": {"ec2_hourly": {"M6I.big": 1}}}},
            'ec2_hourly["M6I.big"]: unknown key: expected an EC2 instance type',
        ),
        (
            {
                **PRICES,
                "regions": {
                    "us-east-1": {"fsx-openzfs": {"deployment_types": {"SINGLE_AZ_3": {}}}}
                },
            },
            "deployment_types.SINGLE_AZ_3: unknown key: expected an FSx for OpenZFS deployment "
            "type: one of SINGLE_AZ_1",
        ),
        (
            {
                **PRICES,
                "regions": {
                    "us-east-1": {
                        "fsx-openzfs": {"deployment_types": {"SINGLE_AZ_1": {"ssd_gb_month": 0.1}}}
                    }
                },
            },
            "SINGLE_AZ_1.ssd_gb_month: unknown key (expected one of: ssd_gib_month",
        ),
        (
            {
                **PRICES,
                "regions": {
                    "us-east-1": {
                        "fsx-lustre": {
                            "deployment_types": {"PERSISTENT_1": {"gib_month": {"125": 0.1}}}
                        }
                    }
                },
            },
            'PERSISTENT_1.gib_month["125"]: PERSISTENT_1 has no such tier (one of: 50, 100, 200)',
        ),
        (
            {
                **PRICES,
                "regions": {
                    "us-east-1": {"ebs": {"io2": {"iops_month_tiers": [[32000, 0.06], [100, 1]]}}}
                },
            },
            "ebs.io2.iops_month_tiers: tier 1: only the last tier has up_to null",
        ),
        (
            {**PRICES, "regions": {"us-east-1": {"athena": {"min_mb_per_query": 1.5}}}},
            "athena.min_mb_per_query: expected a whole number >= 0, got 1.5",
        ),
    ],
)
def test_bad_prices_are_refused_with_their_path(prices_value: object, expected: str) -> None:
    problems = _problems(_matrix(prices=prices_value))
    assert any(expected in p for p in problems), problems


def test_every_problem_of_a_bad_table_is_listed_once() -> None:
    bad = copy.deepcopy(PRICES)
    bad["regions"]["us-east-1"]["ec2_hourly"] = {"m6i.4xlarge": -1, "nope": 1}
    bad["regions"]["us-east-1"]["lambda"] = {"request": "0.2"}
    problems = _problems(_matrix(prices=bad))
    assert len([p for p in problems if p.startswith("prices.")]) == 3, problems


def test_the_shipped_table_has_the_shape_matrices_are_held_to() -> None:
    table = cost.price_table()
    for region, rates in table["regions"].items():
        assert prices.region_problems(rates, (region,)) == []


def test_iofleet_plan_prices_fsx_from_the_matrix_and_refuses_a_bad_table(tmp_path: Path) -> None:
    seed = json.loads(SEED004.read_text(encoding="utf-8"))
    seed["prices"] = PRICES
    good = tmp_path / "good.json"
    good.write_text(json.dumps(seed), encoding="utf-8")
    env = {"AWS_REGION": "us-east-1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", str(good)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    ).stdout
    (line,) = [x for x in out.splitlines() if x.startswith("estimated cost:")]
    assert (
        "fsx-openzfs from the matrix's prices as of 2026-11-20: test rates, not AWS prices"
    ) in line
    seed["prices"] = {**PRICES, "as_of": "yesterday"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(seed), encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    refused = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "plan", str(bad)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"{bad}: prices.as_of: expected a date YYYY-MM-DD, got 'yesterday'"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
