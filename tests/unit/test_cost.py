"""Cost estimates: known prices summed, unknown ones reported, never guessed."""

from __future__ import annotations

import pytest

from iofleet.plan.cost import estimate_cell, estimate_run_overhead, slot_seconds, table_info
from iofleet.plan.expect import StorageSpec


def item(estimate, name: str) -> dict:
    found = [i for i in estimate.items if i["item"] == name]
    assert len(found) == 1, estimate.items
    return found[0]


def test_instance_hours_are_fleet_size_times_slot_hours() -> None:
    est = estimate_cell(
        instance_type="c6a.xlarge",
        storage=StorageSpec("gp3", size_gib=100),
        fleet_size=10,
        slot_seconds=1800,
        region="us-east-1",
    )
    ec2 = item(est, "ec2 c6a.xlarge")
    assert ec2["quantity"] == 5.0
    assert ec2["usd"] == pytest.approx(5 * 0.153)


def test_io2_iops_are_priced_by_tier() -> None:
    # 50,000 IOPS: 32,000 at 0.065 + 18,000 at 0.0455 per month
    est = estimate_cell(
        instance_type="c6a.xlarge",
        storage=StorageSpec("io2", size_gib=100, iops=50000),
        fleet_size=1,
        slot_seconds=730 * 3600,
        region="us-east-1",
    )
    assert item(est, "ebs io2 iops")["usd"] == pytest.approx(32000 * 0.065 + 18000 * 0.0455)
    assert item(est, "ebs io2 storage")["usd"] == pytest.approx(100 * 0.125)


def test_gp3_defaults_cost_nothing_beyond_storage() -> None:
    est = estimate_cell(
        instance_type="m6i.4xlarge",
        storage=StorageSpec("gp3", size_gib=100),
        fleet_size=1,
        slot_seconds=3600,
        region="us-east-1",
    )
    assert not [i for i in est.items if i["item"].startswith("ebs gp3 i")]
    assert est.unknown == []


def test_unknown_instance_price_is_reported_not_guessed() -> None:
    est = estimate_cell(
        instance_type="c6a.xlarge",
        storage=StorageSpec("gp3", size_gib=100),
        fleet_size=2,
        slot_seconds=3600,
        region="eu-central-1",  # no c6a price recorded for Frankfurt
    )
    assert est.to_dict()["complete"] is False
    assert any(u.startswith("ec2 c6a.xlarge (2 instance-hours)") for u in est.unknown)
    assert not [i for i in est.items if i["item"].startswith("ec2")]


def test_unknown_region_makes_everything_unknown() -> None:
    est = estimate_cell(
        instance_type="c6a.xlarge",
        storage=StorageSpec("gp3", size_gib=100),
        fleet_size=1,
        slot_seconds=3600,
        region="ap-southeast-7",
    )
    assert est.usd == 0
    assert len(est.unknown) >= 2
    assert table_info("ap-southeast-7")["known_region"] is False


def test_fsx_without_prices_is_unknown() -> None:
    est = estimate_cell(
        instance_type="m6i.4xlarge",
        storage=StorageSpec("fsx-openzfs", size_gib=256, iops=20000, throughput_mibps=4096),
        fleet_size=1,
        slot_seconds=3600,
        region="eu-central-1",
    )
    assert any(u.startswith("fsx-openzfs") for u in est.unknown)


def test_efs_provisioned_throughput_is_priced_per_mibps_month() -> None:
    est = estimate_cell(
        instance_type="m6i.4xlarge",
        storage=StorageSpec("efs", throughput_mibps=1024, throughput_mode="provisioned"),
        fleet_size=5,
        slot_seconds=730 * 3600,
        region="us-east-1",
    )
    # shared by the fleet: paid once, not per slot
    assert item(est, "efs provisioned throughput")["usd"] == pytest.approx(1024 * 6.0)


def test_run_overhead_prices_athena_and_step_functions() -> None:
    est = estimate_run_overhead("us-east-1")
    assert est.unknown == []
    assert est.usd > 0


def test_slot_seconds_adds_overhead_and_waits() -> None:
    assert slot_seconds(fio_s=180, burst_wait_s=2000) == 300 + 180 + 2000
