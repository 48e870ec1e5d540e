"""FSx for OpenZFS / Lustre on the plan side (iofleet/plan/fsx.py): what plans, what the
ceilings are, what the cost lines are. The refusals are the probe set
(tests/data/probes/matrices/fsx-*.json)."""

from __future__ import annotations

from typing import Any

import pytest

from iofleet.plan.cost import Estimate
from iofleet.plan.expect import StorageSpec, storage_ceilings, storage_spec
from iofleet.plan.fsx import add_cost, lustre_capacity_ok
from iofleet.plan.matrix import build_plan, validate_matrix_dict


def _doc(storage: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "fsx",
        "instance_types": ["m6i.4xlarge"],
        "storage": storage,
        "workloads": [{"fio": "seq-read-1m-qd32", "params": {"RUNTIME": 60}}],
        "parallelism": [1, 200],
        "limits": {"max_instances": 2000},
    }


def test_seed004_third_table_plans() -> None:
    # 4,096 MB/s with 20k IOPS vs 160k IOPS, 256 and 1024 GiB (seed 004, section 1.3)
    storage = [
        {
            "type": "fsx-openzfs",
            "label": f"zfs-{gib}-{iops // 1000}k",
            "storage_capacity_gib": gib,
            "throughput_capacity": 4096,
            "iops": iops,
        }
        for gib in (256, 1024)
        for iops in (20000, 160000)
    ]
    plan = build_plan(validate_matrix_dict(_doc(storage)))
    assert len(plan.cells) == 8


@pytest.mark.parametrize(
    ("deployment", "throughput"),
    [("SINGLE_AZ_1", 64), ("SINGLE_AZ_HA_1", 4096), ("SINGLE_AZ_2", 160), ("MULTI_AZ_1", 10240)],
)
def test_every_deployment_type_plans_at_its_own_tiers(deployment: str, throughput: int) -> None:
    storage = {
        "type": "fsx-openzfs",
        "label": "z",
        "deployment_type": deployment,
        "storage_capacity_gib": 64,
        "throughput_capacity": throughput,
    }
    assert build_plan(validate_matrix_dict(_doc([storage]))).cells


@pytest.mark.parametrize(
    ("capacity", "ok"), [(1200, True), (2400, True), (4800, True), (3600, False), (1201, False)]
)
def test_lustre_capacity_is_1200_2400_then_multiples_of_2400(capacity: int, ok: bool) -> None:
    assert lustre_capacity_ok("PERSISTENT_2", capacity) is ok
    assert lustre_capacity_ok("SCRATCH_2", capacity) is ok


def test_openzfs_ceilings_are_throughput_capacity_and_provisioned_iops() -> None:
    spec = storage_spec(
        {
            "type": "fsx-openzfs",
            "storage_capacity_gib": 256,
            "throughput_capacity": 4096,
            "iops": 20000,
        }
    )
    limits = {lim.unit: lim.sustained for lim in storage_ceilings(spec).limits}
    assert limits == {"ops": 20000.0, "bytes": 4096e6}
    # shared by a fleet of 200: 1/200 each (the seed's 20.48 MB/s per slot)
    per_slot = {lim.unit: lim.sustained for lim in storage_ceilings(spec, 200).limits}
    assert per_slot["bytes"] == pytest.approx(20.48e6)


def test_openzfs_automatic_iops_are_3_per_gib() -> None:
    spec = StorageSpec("fsx-openzfs", size_gib=1024, throughput_mibps=512)
    limits = {lim.unit: lim.sustained for lim in storage_ceilings(spec).limits}
    assert limits["ops"] == 3072.0


def test_lustre_baseline_is_per_unit_throughput_times_tib() -> None:
    spec = storage_spec(
        {"type": "fsx-lustre", "storage_capacity_gib": 4800, "per_unit_storage_throughput": 500}
    )
    ceilings = storage_ceilings(spec)
    (throughput,) = [lim for lim in ceilings.limits if lim.unit == "bytes"]
    assert throughput.sustained == pytest.approx(500 * 4800 / 1024 * 1e6)
    assert "file system iops" in ceilings.unknown  # not published: never guessed


def test_scratch_2_baseline_is_200_per_tib_and_its_burst_is_noted() -> None:
    spec = StorageSpec("fsx-lustre", size_gib=2400, deployment_type="SCRATCH_2")
    ceilings = storage_ceilings(spec)
    (throughput,) = ceilings.limits
    assert throughput.sustained == pytest.approx(200 * 2400 / 1024 * 1e6)
    assert any("bursts to 3047 MB/s" in n for n in ceilings.notes)


PRICES = {
    "fsx-openzfs": {
        "free_iops_per_gib": 3,
        "deployment_types": {
            "SINGLE_AZ_1": {"ssd_gib_month": 0.1, "throughput_mbps_month": 0.2, "iops_month": 0.01}
        },
    },
    "fsx-lustre": {"deployment_types": {"PERSISTENT_2": {"gib_month": {"250": 0.21}}}},
}


def test_openzfs_cost_is_storage_throughput_and_iops_above_the_free_3_per_gib() -> None:
    est = Estimate()
    spec = StorageSpec("fsx-openzfs", size_gib=256, iops=20000, throughput_mibps=4096)
    add_cost(est, spec, 1.0, PRICES)
    by = {i["item"]: i for i in est.items}
    assert by["fsx-openzfs SINGLE_AZ_1 SSD storage"]["usd"] == pytest.approx(25.6)
    assert by["fsx-openzfs SINGLE_AZ_1 throughput capacity"]["usd"] == pytest.approx(819.2)
    assert by["fsx-openzfs provisioned SSD IOPS"]["quantity"] == 20000 - 768
    assert est.unknown == []


def test_lustre_cost_is_storage_at_its_throughput_tier() -> None:
    est = Estimate()
    spec = StorageSpec(
        "fsx-lustre", size_gib=2400, deployment_type="PERSISTENT_2", per_unit_mbps=250
    )
    add_cost(est, spec, 0.5, PRICES)
    (line,) = est.items
    assert line["usd"] == pytest.approx(2400 * 0.5 * 0.21)


def test_fsx_without_a_price_table_is_unknown_not_zero() -> None:
    est = Estimate()
    add_cost(est, StorageSpec("fsx-lustre", size_gib=1200, deployment_type="SCRATCH_2"), 1.0, {})
    assert est.items == [] and est.unknown[0].startswith("fsx-lustre")
