"""Expanding a matrix into cells, payload pieces and the plan table."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from iofleet.errors import ValidationFailed
from iofleet.plan.apps import get_preset
from iofleet.plan.fiojobs import jobs_dir
from iofleet.plan.matrix import Plan, build_plan, render_plan_table, validate_matrix_dict


def aws_doc(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "demo",
        "instance_types": ["m6i.4xlarge", "c6a.xlarge"],
        "storage": [
            {"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100},
            {"type": "efs", "label": "efs", "throughput_mode": "elastic"},
        ],
        "workloads": [
            {
                "fio": "randread-16k-psync-16jobs",
                "params": {"runtime": 2, "SIZE": "16m", "Direct": 0},
            },
            {"ioping": {"count": 10, "interval_ms": 0}},
            {"app": "c-build"},
            {"app": {"name": "mine", "populate": "echo fill", "run": "echo run"}},
        ],
        "parallelism": [1, 10],
        "repeats": 2,
    }
    doc.update(overrides)
    return doc


def local_doc(**overrides: Any) -> dict[str, Any]:
    doc = aws_doc(
        instance_types=[],
        storage=[
            {"type": "local", "label": "fast", "path": "/tmp/a"},
            {"type": "local", "label": "slow", "path": "/tmp/b"},
        ],
        parallelism=[2],
        repeats=1,
    )
    doc.update(overrides)
    return doc


def plan_problems(doc: dict[str, Any], target: str) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        build_plan(validate_matrix_dict(doc), target=target)
    return info.value.lines()


def test_cells_are_ordered_by_instance_type_storage_fleet_size_repeat() -> None:
    plan = build_plan(validate_matrix_dict(aws_doc()))
    keys = [(c.instance_type, c.storage_label, c.fleet_size, c.repeat) for c in plan.cells]
    assert keys[:5] == [
        ("m6i.4xlarge", "gp3", 1, 1),
        ("m6i.4xlarge", "gp3", 1, 2),
        ("m6i.4xlarge", "gp3", 10, 1),
        ("m6i.4xlarge", "gp3", 10, 2),
        ("m6i.4xlarge", "efs", 1, 1),
    ]
    assert len(plan.cells) == 2 * 2 * 2 * 2
    assert [c.cell_index for c in plan.cells] == list(range(16))


def test_total_instances_is_the_sum_of_fleet_sizes() -> None:
    plan = build_plan(validate_matrix_dict(aws_doc()))
    assert plan.total_instances == 2 * 2 * 2 * (1 + 10)


def test_cell_ids_are_deterministic_and_filesystem_safe() -> None:
    plan = build_plan(validate_matrix_dict(aws_doc()))
    assert plan.cells[3].cell_id == "c003-gp3-m6i.4xlarge-x10-r2"
    assert len({c.cell_id for c in plan.cells}) == len(plan.cells)
    assert all(set(c.cell_id) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-_") for c in plan.cells)
    again = build_plan(validate_matrix_dict(aws_doc()))
    assert [c.cell_id for c in again.cells] == [c.cell_id for c in plan.cells]


def test_over_max_instances_is_refused_with_the_count() -> None:
    doc = aws_doc(parallelism=[1, 10, 50], repeats=3)  # 2*2*3*61 = 732
    assert plan_problems(doc, "aws") == [
        "limits.max_instances: plan needs 732 instances, over the limit of 100"
    ]


def test_raised_max_instances_allows_the_plan() -> None:
    doc = aws_doc(parallelism=[1, 10, 50], repeats=3, limits={"max_instances": 732})
    assert build_plan(validate_matrix_dict(doc)).total_instances == 732


def test_aws_plan_needs_instance_types() -> None:
    assert plan_problems(aws_doc(instance_types=[]), "aws") == [
        "instance_types: required for an AWS plan"
    ]


def test_aws_plan_rejects_local_storage() -> None:
    doc = aws_doc(storage=[{"type": "local", "label": "here", "path": "/tmp"}])
    assert plan_problems(doc, "aws") == [
        "storage[0].type: 'local' storage is for local runs only (iofleet local)"
    ]


def test_local_plan_rejects_aws_storage() -> None:
    doc = local_doc()
    doc["storage"].append({"type": "instance-store", "label": "nvme"})
    assert plan_problems(doc, "local") == [
        "storage[2].type: 'instance-store' storage needs an AWS run; local runs take only 'local' storage"
    ]


def test_local_plan_rejects_aws_only_app_preset() -> None:
    doc = local_doc()
    doc["workloads"].append({"app": "yocto-core-image-sato-sdk"})
    assert plan_problems(doc, "local") == [
        "workloads[4].app: preset 'yocto-core-image-sato-sdk' needs AWS and network access; "
        "not available for local runs"
    ]


def test_unknown_target_is_refused() -> None:
    assert plan_problems(local_doc(), "gcp") == ["unknown target 'gcp' (aws or local)"]


def test_local_plan_ignores_instance_types() -> None:
    plan = build_plan(validate_matrix_dict(local_doc(instance_types=["m6i.large"])), "local")
    assert [c.instance_type for c in plan.cells] == ["local", "local"]
    assert [c.cell_id for c in plan.cells] == ["c000-fast-x2-r1", "c001-slow-x2-r1"]


def test_cell_info_is_the_slot_payload_cell_object() -> None:
    cell = build_plan(validate_matrix_dict(local_doc()), "local").cells[1]
    assert cell.cell_info() == {
        "cell_id": "c001-slow-x2-r1",
        "cell_index": 1,
        "instance_type": "local",
        "storage_label": "slow",
        "storage_type": "local",
        "storage_detail": "/tmp/b",
        "fleet_size": 2,
        "repeat": 1,
    }


def test_workload_payloads_resolve_presets_and_stringify_params() -> None:
    cell = build_plan(validate_matrix_dict(local_doc()), "local").cells[0]
    fio, ioping, preset, inline = cell.workload_payloads()
    assert fio == {
        "kind": "fio",
        "name": "randread-16k-psync-16jobs",
        "params": {"RUNTIME": "2", "SIZE": "16m", "DIRECT": "0"},
        # the library's job as planned: its file's bytes (no include, '\n' line ends)
        "job_sha256": hashlib.sha256(
            (jobs_dir() / "randread-16k-psync-16jobs.fio").read_bytes()
        ).hexdigest(),
    }
    assert ioping == {"kind": "ioping", "count": 10, "interval_ms": 0, "write": False}
    assert preset == {
        "kind": "app",
        "name": "c-build",
        "run": get_preset("c-build").run,
        "populate": None,
    }
    assert inline == {"kind": "app", "name": "mine", "run": "echo run", "populate": "echo fill"}


@pytest.mark.parametrize(
    ("storage", "detail"),
    [
        (
            {
                "type": "ebs",
                "label": "v",
                "volume_type": "io2",
                "size_gib": 100,
                "iops": 50000,
                "filesystem": "raw",
            },
            "io2 100 GiB 50000 IOPS raw",
        ),
        (
            {"type": "efs", "label": "v", "file_system_id": "fs-0123456789abcdef0"},
            "fs-0123456789abcdef0",
        ),
        (
            {
                "type": "efs",
                "label": "v",
                "throughput_mode": "provisioned",
                "provisioned_mibps": 1024,
            },
            "generalPurpose, provisioned 1024 MiB/s",
        ),
        (
            {
                "type": "fsx-openzfs",
                "label": "v",
                "storage_capacity_gib": 282,
                "throughput_capacity": 4096,
                "iops": 20000,
            },
            "SINGLE_AZ_1, 282 GiB, 4096 MB/s, 20000 IOPS",
        ),
        (
            {
                "type": "fsx-lustre",
                "label": "v",
                "storage_capacity_gib": 4800,
                "per_unit_storage_throughput": 500,
            },
            "PERSISTENT_2, 4800 GiB, 500 MB/s/TiB",
        ),
        ({"type": "instance-store", "label": "v"}, "instance store xfs"),
    ],
)
def test_storage_detail_describes_the_storage(storage: dict[str, Any], detail: str) -> None:
    doc = aws_doc(storage=[storage])
    if storage.get("filesystem") == "raw":  # an app needs a filesystem: fio and ioping only
        doc["workloads"] = [w for w in doc["workloads"] if "app" not in w]
    plan = build_plan(validate_matrix_dict(doc))
    assert plan.cells[0].storage_detail == detail


def test_plan_to_dict_has_cells_with_slots_and_the_total() -> None:
    plan = build_plan(validate_matrix_dict(aws_doc()))
    doc = plan.to_dict()
    assert (doc["name"], doc["target"], doc["cell_count"], doc["total_instances"]) == (
        "demo",
        "aws",
        16,
        88,
    )
    cell = doc["cells"][2]
    assert cell["slots"] == cell["fleet_size"] == 10
    assert cell["storage"] == {
        "type": "ebs",
        "label": "gp3",
        "volume_type": "gp3",
        "size_gib": 100,
        "iops": None,
        "throughput_mibps": None,
        "filesystem": "xfs",
    }
    assert [w["kind"] for w in cell["workloads"]] == ["fio", "ioping", "app", "app"]


def test_plan_table_lists_every_cell_and_the_total() -> None:
    plan: Plan = build_plan(validate_matrix_dict(aws_doc()))
    table = render_plan_table(plan)
    for cell in plan.cells:
        assert cell.cell_id in table
    assert "w02  app c-build" in table
    assert "16 cells, total instances: 88 (limit 100)" in table.splitlines()


def test_an_aws_ioping_count_the_ingest_lambda_cannot_read_is_refused_local_is_not() -> None:
    from iofleet.plan.matrix import AWS_IOPING_MAX_COUNT

    def matrix(storage: dict, count: int) -> dict:
        return {
            "name": "ioping-big",
            "instance_types": ["m6i.large"],
            "storage": [storage],
            "workloads": [{"ioping": {"count": count, "interval_ms": 0}}],
            "parallelism": [1],
        }

    ebs = {"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100}
    local = {"type": "local", "label": "here", "path": "."}
    build_plan(validate_matrix_dict(matrix(ebs, AWS_IOPING_MAX_COUNT)), target="aws")
    with pytest.raises(ValidationFailed) as info:
        build_plan(validate_matrix_dict(matrix(ebs, AWS_IOPING_MAX_COUNT + 1)), target="aws")
    (problem,) = info.value.problems
    assert problem.path == "workloads[0].ioping.count"
    assert problem.message.startswith("at most 100,000 requests on AWS, got 100,001")
    plan = build_plan(validate_matrix_dict(matrix(local, 1_000_000)), target="local")
    assert len(plan.cells) == 1
