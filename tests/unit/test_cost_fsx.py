"""FSx cost lines of a cell (iofleet/plan/cost.py -> iofleet/plan/fsx.py add_cost), through
estimate_cell: the file system lives for the slot time plus the populate time, and is paid
once per cell (shared by the fleet), not per slot.

prices.json has no FSx rates yet (none could be sourced for us-east-1 or eu-central-1;
its `sections` say why), so the hand-computed tests put a table of round TEST RATES
(not AWS prices) in place of the file's; the unknown-price tests use the shipped file.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from iofleet.plan import cost
from iofleet.plan.cost import estimate_cell
from iofleet.plan.expect import StorageSpec

# test rates, chosen to make hand arithmetic easy; NOT AWS prices
OPENZFS_TEST_RATES = {
    "free_iops_per_gib": 3,
    "deployment_types": {
        "SINGLE_AZ_1": {"ssd_gib_month": 0.10, "throughput_mbps_month": 0.20, "iops_month": 0.01}
    },
}
LUSTRE_TEST_RATES = {
    "deployment_types": {
        "PERSISTENT_2": {"gib_month": {"125": 0.15, "250": 0.20}},
        "SCRATCH_2": {"gib_month": {"storage": 0.12}},
    }
}
# seed 004's slot: slot_timeout_s 21600 + 300 s overhead; the cache is populated once (300 s)
SLOT_S = 21900.0
ALIVE_MONTHS = (21900 + 300) / 3600 / 730


@pytest.fixture
def test_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    table: dict[str, Any] = copy.deepcopy(cost.price_table())
    region = table["regions"]["us-east-1"]
    region["fsx-openzfs"] = OPENZFS_TEST_RATES
    region["fsx-lustre"] = LUSTRE_TEST_RATES
    monkeypatch.setattr(cost, "price_table", lambda: table)


def _cell(storage: StorageSpec, fleet_size: int = 200) -> cost.Estimate:
    return estimate_cell(
        instance_type="m6i.4xlarge",
        storage=storage,
        fleet_size=fleet_size,
        slot_seconds=SLOT_S,
        region="us-east-1",
        populate=True,
    )


def _fsx_lines(est: cost.Estimate) -> dict[str, dict[str, Any]]:
    return {i["item"]: i for i in est.items if i["item"].startswith("fsx-")}


@pytest.mark.usefixtures("test_rates")
@pytest.mark.parametrize(
    ("iops", "iops_usd"),
    [
        # 20,000 provisioned - 768 included (3 x 256 GiB) = 19,232 IOPS-months x 0.01
        (20000, 192.32 * ALIVE_MONTHS),
        # 160,000 - 768 = 159,232 IOPS x 0.01
        (160000, 1592.32 * ALIVE_MONTHS),
    ],
)
def test_seed004_openzfs_4096_mbps_cell_cost(iops: int, iops_usd: float) -> None:
    spec = StorageSpec("fsx-openzfs", size_gib=256, iops=iops, throughput_mibps=4096)
    lines = _fsx_lines(_cell(spec))
    assert set(lines) == {
        "fsx-openzfs SINGLE_AZ_1 SSD storage",
        "fsx-openzfs SINGLE_AZ_1 throughput capacity",
        "fsx-openzfs provisioned SSD IOPS",
    }
    # 22,200 s alive = 6.1667 h = 0.0084475 months, whatever the fleet size
    storage = lines["fsx-openzfs SINGLE_AZ_1 SSD storage"]
    assert storage["quantity"] == pytest.approx(256 * ALIVE_MONTHS, abs=1e-6)
    assert storage["usd"] == pytest.approx(25.6 * ALIVE_MONTHS, abs=1e-6)  # 0.2163
    throughput = lines["fsx-openzfs SINGLE_AZ_1 throughput capacity"]
    assert throughput["usd"] == pytest.approx(819.2 * ALIVE_MONTHS, abs=1e-6)  # 6.9202
    assert lines["fsx-openzfs provisioned SSD IOPS"]["usd"] == pytest.approx(iops_usd, abs=1e-6)


@pytest.mark.usefixtures("test_rates")
def test_fsx_is_paid_once_per_cell_not_per_slot() -> None:
    spec = StorageSpec("fsx-openzfs", size_gib=256, iops=20000, throughput_mibps=4096)
    one, fleet = _fsx_lines(_cell(spec, 1)), _fsx_lines(_cell(spec, 200))
    assert {k: v["usd"] for k, v in one.items()} == {k: v["usd"] for k, v in fleet.items()}


@pytest.mark.usefixtures("test_rates")
def test_automatic_iops_cost_nothing_beyond_storage_and_throughput() -> None:
    spec = StorageSpec("fsx-openzfs", size_gib=256, throughput_mibps=4096)
    lines = _fsx_lines(_cell(spec))
    assert "fsx-openzfs provisioned SSD IOPS" not in lines
    assert not [u for u in _cell(spec).unknown if u.startswith("fsx-")]


@pytest.mark.usefixtures("test_rates")
def test_a_deployment_type_without_rates_is_unknown_not_zero() -> None:
    spec = StorageSpec(
        "fsx-openzfs", size_gib=256, iops=20000, throughput_mibps=5120, deployment_type="MULTI_AZ_1"
    )
    est = _cell(spec)
    assert _fsx_lines(est) == {}
    unknown = [u for u in est.unknown if u.startswith("fsx-openzfs")]
    assert len(unknown) == 3, unknown
    assert est.to_dict()["complete"] is False


@pytest.mark.usefixtures("test_rates")
def test_lustre_persistent_2_cell_cost() -> None:
    spec = StorageSpec(
        "fsx-lustre", size_gib=2400, deployment_type="PERSISTENT_2", per_unit_mbps=250
    )
    (line,) = _fsx_lines(_cell(spec)).values()
    assert line["item"] == "fsx-lustre PERSISTENT_2 storage at 250 MB/s/TiB"
    assert line["usd"] == pytest.approx(2400 * 0.20 * ALIVE_MONTHS, abs=1e-6)  # 4.0548


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
@pytest.mark.parametrize(
    "spec",
    [
        StorageSpec("fsx-openzfs", size_gib=256, iops=160000, throughput_mibps=4096),
        StorageSpec("fsx-lustre", size_gib=1200, deployment_type="SCRATCH_2"),
    ],
    ids=["openzfs", "lustre"],
)
def test_shipped_prices_report_fsx_unknown_with_the_reason(region: str, spec: StorageSpec) -> None:
    est = estimate_cell(
        instance_type="m6i.4xlarge",
        storage=spec,
        fleet_size=200,
        slot_seconds=SLOT_S,
        region=region,
        populate=True,
    )
    (line,) = [u for u in est.unknown if u.startswith(spec.type)]
    assert line.startswith(f"{spec.type} file system (6.17 hours): no FSx for ")
    assert "could be cited" in line
    assert not _fsx_lines(est)
    assert est.to_dict()["complete"] is False
    assert est.usd > 0  # the known part (EC2, orchestration) is still summed
