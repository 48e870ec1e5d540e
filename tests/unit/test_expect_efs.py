"""EFS ceilings (iofleet/plan/expect.py, figures in limits_catalogue.json `efs`): read and
write IOPS per throughput mode count only their own direction, the per-client throughput
is each instance's own (not split by the fleet), and the modes the plan assumes are the
ones the stack creates (iofleet/aws/cell.py: unset means elastic, generalPurpose)."""

from __future__ import annotations

import pytest

from iofleet.plan.expect import CellContext, StorageSpec, expect_cell, storage_spec
from iofleet.plan.matrix import validate_matrix_dict

MIB = 1024 * 1024


def fio(name: str, **params: str) -> dict:
    return {"kind": "fio", "name": name, "params": params}


def by_direction(entries: list[dict]) -> dict[str, dict]:
    return {e["direction"]: e for e in entries}


def provisioned(mibps: int = 3000) -> StorageSpec:
    return StorageSpec(
        "efs",
        throughput_mode="provisioned",
        throughput_mibps=mibps,
        performance_mode="generalPurpose",
    )


def test_a_created_file_system_is_planned_with_the_modes_the_stack_creates() -> None:
    matrix = validate_matrix_dict(
        {
            "name": "efs",
            "instance_types": ["m6i.large"],
            "storage": [{"type": "efs", "label": "new"}],
            "workloads": [{"fio": "latency-4k-qd1-randread"}],
            "parallelism": [1],
        }
    )
    spec = storage_spec(matrix.storage[0])
    assert (spec.throughput_mode, spec.performance_mode) == ("elastic", "generalPurpose")


def test_an_existing_file_system_has_unknown_ceilings_not_bursting_ones() -> None:
    spec = storage_spec({"type": "efs", "file_system_id": "fs-0123456789abcdef0"})
    assert spec.throughput_mode is None
    entries, warnings, _ = expect_cell(
        CellContext("m6i.large", spec), [fio("latency-4k-qd1-randread")]
    )
    (entry,) = entries
    assert entry["limited_by"] == "unknown"
    assert any("not known offline" in w for w in warnings)
    assert not any("burst" in w for w in warnings)


def test_mixed_job_is_capped_by_the_read_iops_share_it_uses() -> None:
    # provisioned, General Purpose: 55,000 read / 25,000 write IOPS per file system,
    # 10 slots share it: 5,500 read / 2,500 write each. randrw 80/20: reads cap the job
    # at 5,500 / 0.8 = 6,875 I/Os per second, writes at 2,500 / 0.2 = 12,500.
    ctx = CellContext("m6i.4xlarge", provisioned(), fleet_size=10)
    entries, _, _ = expect_cell(ctx, [fio("randrw-4k-80-20-qd64", RUNTIME="60")])
    got = by_direction(entries)
    assert got["read"]["expected_iops"] == pytest.approx(5500)
    assert got["write"]["expected_iops"] == pytest.approx(1375)
    assert got["read"]["limited_by"] == "volume"
    assert got["read"]["phases"][0]["limit"] == "EFS read IOPS (provisioned)"


def test_write_only_job_meets_the_write_iops_and_ignores_the_read_figure() -> None:
    ctx = CellContext("m6i.4xlarge", provisioned(), fleet_size=10)
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randwrite", RUNTIME="60")])
    (entry,) = entries
    assert entry["expected_iops"] == pytest.approx(2500)
    assert entry["phases"][0]["limit"] == "EFS write IOPS (provisioned)"


def test_per_client_throughput_is_each_instances_not_split_by_the_fleet() -> None:
    # 3,000 MiB/s provisioned shared by 4 slots is 750 each; each client is held to 500
    ctx = CellContext("m6i.4xlarge", provisioned(3000), fleet_size=4)
    entries, _, _ = expect_cell(ctx, [fio("seq-read-1m-qd32", RUNTIME="60")])
    (entry,) = entries
    assert entry["expected_bw_bytes"] == 500 * MIB
    assert entry["phases"][0]["limit"] == "EFS per-client throughput (provisioned)"
    # with 10 slots the file system's share (300 MiB/s) is below the client's limit
    ctx = CellContext("m6i.4xlarge", provisioned(3000), fleet_size=10)
    entries, _, _ = expect_cell(ctx, [fio("seq-read-1m-qd32", RUNTIME="60")])
    (entry,) = entries
    assert entry["expected_bw_bytes"] == 300 * MIB
    assert entry["phases"][0]["limit"] == "EFS provisioned throughput"


def test_elastic_read_iops_ceiling_is_the_top_of_the_published_range() -> None:
    spec = StorageSpec("efs", throughput_mode="elastic", performance_mode="generalPurpose")
    ctx = CellContext("m6i.4xlarge", spec, fleet_size=200)
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="60")])
    (entry,) = entries
    # 2,500,000 / 200 slots; the file system's elastic throughput has no figure
    assert entry["expected_iops"] == pytest.approx(12500)
    assert entry["upper_bound"] is True
    assert entry["limited_by"] == "unknown"


def test_max_io_mode_has_no_iops_figure() -> None:
    spec = StorageSpec(
        "efs", throughput_mode="provisioned", throughput_mibps=3000, performance_mode="maxIO"
    )
    entries, warnings, _ = expect_cell(
        CellContext("m6i.4xlarge", spec, fleet_size=10),
        [fio("latency-4k-qd1-randwrite", RUNTIME="60")],
    )
    (entry,) = entries
    assert entry["limited_by"] == "unknown"
    assert any("file system iops" in w for w in warnings)
