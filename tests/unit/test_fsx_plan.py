"""FSx for OpenZFS / Lustre on the plan side (iofleet/plan/fsx.py): what plans, what the
ceilings are, what the cost lines are. The refusals are the probe set
(tests/data/probes/matrices/fsx-*.json)."""

from __future__ import annotations

from typing import Any

import pytest

from iofleet.errors import ValidationFailed
from iofleet.plan.cost import Estimate
from iofleet.plan.expect import StorageSpec, storage_ceilings, storage_spec
from iofleet.plan.fsx import add_cost, lustre_capacity_ok
from iofleet.plan.matrix import build_plan, validate_matrix_dict


def _doc(storage: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "fsx",
        "instance_types": ["m6i.4xlarge"],
        "storage": storage,
        # 200 slots x 256 MiB fit the smallest file system below (64 GiB, 1/32 kept back)
        "workloads": [{"fio": "seq-read-1m-qd32", "params": {"RUNTIME": 60, "SIZE": "256m"}}],
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
    (throughput,) = [limit for limit in ceilings.limits if limit.direction is None]
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


# ------------------------------------------------- figures pinned to the AWS docs
# OpenZFS: https://docs.aws.amazon.com/fsx/latest/OpenZFSGuide/performance-ssd.html
# Lustre:  https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html


def _openzfs(deployment: str, gib: int, mbps: int, iops: int | None) -> Any:
    spec = StorageSpec(
        "fsx-openzfs", size_gib=gib, iops=iops, throughput_mibps=mbps, deployment_type=deployment
    )
    ceilings = storage_ceilings(spec)
    return {lim.unit: lim.sustained for lim in ceilings.limits}, ceilings.notes


@pytest.mark.parametrize(
    ("deployment", "mbps", "disk_iops", "disk_burst_mbps", "disk_burst_iops", "network", "burst"),
    [
        # Single-AZ 1 (All AWS Regions) disk table; cached reads: "All other AWS Regions"
        ("SINGLE_AZ_1", 512, 20000, 1024, 40000, 1600, 3200),
        # Single-AZ 2 (All AWS Regions)
        ("SINGLE_AZ_2", 1280, 50000, 3125, 100000, 3125, 6250),
        # Multi-AZ, the table of the Regions that include N. Virginia and Frankfurt
        ("MULTI_AZ_1", 160, 6250, 3125, 100000, 375, 3125),
    ],
)
def test_openzfs_burst_rows_match_the_docs(
    deployment: str,
    mbps: int,
    disk_iops: int,
    disk_burst_mbps: int,
    disk_burst_iops: int,
    network: int,
    burst: int,
) -> None:
    limits, notes = _openzfs(deployment, 4096, mbps, 400000 if mbps > 512 else 160000)
    assert limits == {"ops": float(disk_iops), "bytes": mbps * 1e6}
    assert any(
        f"{deployment} at {mbps} MB/s bursts to {disk_burst_iops} disk IOPS" in n for n in notes
    )
    assert any(f"bursts disk throughput to {disk_burst_mbps} MB/s" in n for n in notes)
    assert any(f"up to {network} MB/s (bursts to {burst} MB/s)" in n for n in notes)


@pytest.mark.parametrize(
    ("deployment", "mbps", "disk_iops", "network"),
    [
        ("SINGLE_AZ_1", 4096, 160000, 12800),  # seed 004's tier: no burst column
        ("SINGLE_AZ_2", 10240, 400000, 21000),
        ("SINGLE_AZ_HA_2", 5120, 200000, 12500),
    ],
)
def test_openzfs_tiers_without_burst_have_no_burst_note(
    deployment: str, mbps: int, disk_iops: int, network: int
) -> None:
    limits, notes = _openzfs(deployment, 1024, mbps, disk_iops)
    assert limits == {"ops": float(disk_iops), "bytes": mbps * 1e6}
    assert not [n for n in notes if "bursts" in n]
    assert any(f"up to {network} MB/s, above the disk ceiling" in n for n in notes)


def test_multi_az_10240_writes_are_limited_to_7500() -> None:
    _, notes = _openzfs("MULTI_AZ_1", 1024, 10240, 400000)
    assert "MULTI_AZ_1 at 10240 MB/s: writes are limited to 7500 MB/s" in notes


def _plan_problems(storage: dict[str, Any]) -> list[str]:
    from iofleet.plan.fsx import openzfs_problems

    return [
        message
        for _, message in openzfs_problems(
            storage.get("deployment_type"),
            storage["storage_capacity_gib"],
            storage["throughput_capacity"],
            storage.get("iops"),
        )
    ]


def test_openzfs_iops_the_tier_drives_only_in_bursts_plan() -> None:
    # 512 MB/s Single-AZ 1: 20,000 disk IOPS baseline, 40,000 burst: provisioning
    # 40,000 SSD IOPS is what the docs advise for the burst, not a mistake
    assert (
        _plan_problems({"storage_capacity_gib": 2048, "throughput_capacity": 512, "iops": 40000})
        == []
    )
    assert _plan_problems(
        {"storage_capacity_gib": 2048, "throughput_capacity": 512, "iops": 40001}
    ) == [
        "40001 IOPS is more than a 512 MB/s SINGLE_AZ_1 file server can drive (20000 SSD IOPS, "
        "40000 in bursts at that throughput capacity): raise throughput_capacity or lower iops"
    ]


def test_openzfs_iops_are_at_most_1000_per_gib() -> None:
    assert (
        _plan_problems({"storage_capacity_gib": 160, "throughput_capacity": 4096, "iops": 160000})
        == []
    )
    assert _plan_problems(
        {"storage_capacity_gib": 159, "throughput_capacity": 4096, "iops": 160000}
    ) == [
        "160000 IOPS is more than 1000 IOPS per GiB of 159 GiB (at most 159000): "
        "raise storage_capacity_gib or lower iops"
    ]


@pytest.mark.parametrize(
    ("per_unit", "baseline", "burst"),
    [(125, 125, 500), (250, 250, 500), (500, 500, None), (1000, 1000, None)],
)
def test_lustre_persistent_2_disk_burst_matches_the_docs(
    per_unit: int, baseline: int, burst: int | None
) -> None:
    spec = StorageSpec(
        "fsx-lustre", size_gib=4800, deployment_type="PERSISTENT_2", per_unit_mbps=per_unit
    )
    ceilings = storage_ceilings(spec)
    (throughput,) = ceilings.limits
    assert throughput.sustained == pytest.approx(baseline * 4800 / 1024 * 1e6)
    bursts = [n for n in ceilings.notes if "bursts to" in n]
    if burst is None:
        assert bursts == []
    else:
        assert bursts == [
            f"PERSISTENT_2 bursts to {burst * 4800 / 1024:.0f} MB/s on credits whose size is "
            "not published: the ceiling here is the baseline"
        ]


def test_lustre_persistent_1_disk_bursts_to_240_per_tib() -> None:
    spec = StorageSpec(
        "fsx-lustre", size_gib=2400, deployment_type="PERSISTENT_1", per_unit_mbps=50
    )
    assert any("bursts to 562 MB/s" in n for n in storage_ceilings(spec).notes)  # 240 x 2.34


def test_lustre_scratch_2_writes_are_100_per_tib() -> None:
    # 2400 GiB = 2.34 TiB: reads 200 MB/s per TiB (469 MB/s), writes 100 (234 MB/s)
    from iofleet.plan.expect import CellContext, expect_cell

    spec = StorageSpec("fsx-lustre", size_gib=2400, deployment_type="SCRATCH_2")
    tib = 2400 / 1024

    def expected(job: str) -> dict[str, dict]:
        entries, _, _ = expect_cell(
            CellContext("m6i.4xlarge", spec), [{"kind": "fio", "name": job, "params": {}}]
        )
        return {e["direction"]: e for e in entries}

    write = expected("seq-write-1m-qd32")["write"]
    assert write["expected_bw_bytes"] == pytest.approx(100 * tib * 1e6, rel=1e-6)
    assert write["phases"][0]["limit"] == "FSx for Lustre SCRATCH_2 write baseline throughput"
    read = expected("seq-read-1m-qd32")["read"]
    assert read["expected_bw_bytes"] == pytest.approx(200 * tib * 1e6, rel=1e-6)
    assert read["phases"][0]["limit"] == "FSx for Lustre SCRATCH_2 baseline throughput"


@pytest.mark.parametrize(
    ("region", "warned"), [("us-east-1", False), ("eu-central-1", False), ("sa-east-1", True)]
)
def test_multi_az_figures_are_those_of_the_documented_regions(region: str, warned: bool) -> None:
    from iofleet.plan.cost import plan_annotations

    storage = {
        "type": "fsx-openzfs",
        "label": "maz",
        "deployment_type": "MULTI_AZ_1",
        "storage_capacity_gib": 1024,
        "throughput_capacity": 5120,
    }
    plan = build_plan(validate_matrix_dict(_doc([storage])))
    (cell, _) = plan_annotations(plan, region)["cells"]
    found = [w for w in cell["warnings"] if "ceilings are the figures documented" in w]
    assert bool(found) is warned, cell["warnings"]
    if warned:
        assert found == [
            "MULTI_AZ_1 ceilings are the figures documented for 16 Regions (us-east-1, "
            "us-east-2, us-west-1, ...) that do not include sa-east-1: AWS documents lower "
            "ones for some other Regions, so these may be too high"
        ]


def test_a_created_file_system_must_hold_the_largest_cells_files() -> None:
    # 248 GiB of a 256 GiB OpenZFS (1/32 kept back): 200 slots x 1.24 GiB do not fit,
    # 200 x 1.2 GiB do; an existing file system (file_system_id) has no size to check
    def plan(size: str, storage: dict[str, Any]) -> None:
        doc = _doc([storage])
        doc["workloads"] = [{"fio": "seq-read-1m-qd32", "params": {"RUNTIME": 60, "SIZE": size}}]
        build_plan(validate_matrix_dict(doc))

    created = {
        "type": "fsx-openzfs",
        "label": "z",
        "storage_capacity_gib": 256,
        "throughput_capacity": 4096,
    }
    plan("1228m", created)
    with pytest.raises(ValidationFailed) as caught:
        plan("1270m", created)
    assert [p.path for p in caught.value.problems] == ["storage[0].storage_capacity_gib"]
    assert "a cell of 200 slots lays out ~248.0 GiB" in caught.value.problems[0].message
    plan("64g", {"type": "fsx-openzfs", "label": "z", "file_system_id": "fs-0123456789abcdef0"})
