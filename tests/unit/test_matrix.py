"""Matrix validation: every rule has a bad-input case, reported as `PATH: message`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from iofleet.errors import ValidationFailed
from iofleet.plan.matrix import load_matrix_file, load_matrix_text, validate_matrix_dict


def base() -> dict[str, Any]:
    return {
        "name": "demo",
        "description": "test matrix",
        "instance_types": ["m6i.4xlarge"],
        "storage": [
            {"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100},
            {"type": "efs", "label": "efs", "throughput_mode": "elastic"},
        ],
        "workloads": [
            {"fio": "randread-16k-psync-16jobs", "params": {"RUNTIME": 2}},
            {"ioping": {"count": 10, "interval_ms": 0}},
            {"app": "c-build"},
        ],
        "parallelism": [1, 10],
    }


def problems_for(doc: object) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        validate_matrix_dict(doc)
    return info.value.lines()


def with_change(path: str, value: Any) -> dict[str, Any]:
    """base() with `a.b.0.c`-style path set (value ... = delete)."""
    doc = base()
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in path.split(".")]
    target: Any = doc
    for part in parts[:-1]:
        target = target[part]
    if value is ...:
        del target[parts[-1]]
    else:
        target[parts[-1]] = value
    return doc


def test_base_matrix_is_valid() -> None:
    matrix = validate_matrix_dict(base())
    assert matrix.name == "demo"
    assert matrix.repeats == 1
    assert matrix.limits.max_instances == 100
    assert (matrix.stop_on_failure, matrix.cell_concurrency, matrix.slot_timeout_s) == (
        False,
        1,
        7200,
    )


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        # top level
        ("bogus", 1, "bogus: unknown key (allowed: name, description,"),
        ("name", ..., "name: required"),
        ("name", "Has_Upper", "name: must be 1-48 characters of a-z, 0-9 and '-', got 'Has_Upper'"),
        ("name", "x" * 49, "name: must be 1-48 characters"),
        ("description", 5, "description: must be a valid string, got 5"),
        (
            "instance_types",
            ["m6i"],
            "instance_types[0]: must be an EC2 instance type like m6i.4xlarge",
        ),
        ("instance_types", ["m6i.huge"], "instance_types[0]: must be an EC2 instance type"),
        (
            "instance_types",
            ["m6i.large", "m6i.large"],
            "instance_types[1]: duplicate instance type 'm6i.large' (also instance_types[0])",
        ),
        ("storage", [], "storage: must not be empty"),
        ("workloads", [], "workloads: must not be empty"),
        ("workloads", ..., "workloads: required"),
        ("parallelism", [], "parallelism: must not be empty"),
        ("parallelism", [1, 0], "parallelism[1]: must be greater than or equal to 1, got 0"),
        ("parallelism", [1, 2.5], "parallelism[1]: must be a valid integer, got 2.5"),
        ("parallelism", ["10"], "parallelism[0]: must be a valid integer, got '10'"),
        (
            "parallelism",
            [10, 1, 10],
            "parallelism[2]: duplicate fleet size 10 (also parallelism[0])",
        ),
        ("repeats", 0, "repeats: must be greater than or equal to 1, got 0"),
        (
            "limits",
            {"max_instances": 0},
            "limits.max_instances: must be greater than or equal to 1",
        ),
        ("limits", {"max": 5}, "limits.max: unknown key (allowed: max_instances, budget_usd)"),
        (
            "ami_id",
            "ami-XYZ",
            "ami_id: must be an AMI id like ami-0123456789abcdef0, got 'ami-XYZ'",
        ),
        ("stop_on_failure", "yes", "stop_on_failure: must be a valid boolean, got 'yes'"),
        ("cell_concurrency", 0, "cell_concurrency: must be greater than or equal to 1, got 0"),
        ("slot_timeout_s", 0, "slot_timeout_s: must be greater than or equal to 1, got 0"),
        ("storage", "gp3", "storage: expected an array, got 'gp3'"),
        ("limits", 5, "limits: expected an object, got 5"),
        ("workloads.1.ioping", [], "workloads[1].ioping: expected an object, got an array"),
        (
            "workloads.0.params",
            "RUNTIME=2",
            "workloads[0].params: expected an object, got 'RUNTIME=2'",
        ),
        # storage, any type
        ("storage.0", "gp3", "storage[0]: expected an object, got 'gp3'"),
        (
            "storage.0.type",
            ...,
            "storage[0].type: required (one of: ebs, efs, fsx-openzfs, fsx-lustre, instance-store, local, s3-mountpoint, s3express-mountpoint)",
        ),
        ("storage.0.type", "nfs", "storage[0].type: unknown storage type 'nfs' (one of: ebs, efs,"),
        ("storage.0.label", "Big Label", "storage[0].label: must be 1-32 characters"),
        ("storage.0.label", ..., "storage[0].label: required"),
        (
            "storage.1.label",
            "gp3",
            "storage[1].label: duplicate storage label 'gp3' (also storage[0])",
        ),
        (
            "storage.0.color",
            "red",
            "storage[0].color: unknown key (allowed: type, label, volume_type,",
        ),
        # ebs
        (
            "storage.0.volume_type",
            "gp4",
            "storage[0].volume_type: must be one of 'gp2', 'gp3', 'io1', 'io2', 'st1' or 'sc1', got 'gp4'",
        ),
        ("storage.0.size_gib", ..., "storage[0].size_gib: required"),
        ("storage.0.size_gib", "100", "storage[0].size_gib: must be a valid integer, got '100'"),
        (
            "storage.0.size_gib",
            70000,
            "storage[0].size_gib: gp3 size must be 1-65536 GiB, got 70000",
        ),
        ("storage.0.iops", 2000, "storage[0].iops: gp3 IOPS must be 3000-80000, got 2000"),
        (
            "storage.0.iops",
            60000,
            "storage[0].iops: gp3 allows at most 500 IOPS per GiB: 100 GiB allows 50000, got 60000",
        ),
        (
            "storage.0.throughput_mibps",
            800,
            "storage[0].throughput_mibps: gp3 allows at most 0.25 MiB/s per IOPS: 3000 IOPS allows 750 MiB/s, got 800",
        ),
        (
            "storage.0.filesystem",
            "btrfs",
            "storage[0].filesystem: must be one of 'xfs', 'ext4' or 'raw', got 'btrfs'",
        ),
        # efs
        (
            "storage.1.file_system_id",
            "fs-12",
            "storage[1].file_system_id: must be a file system id like fs-0123456789abcdef0",
        ),
        (
            "storage.1.file_system_id",
            "fs-0123456789abcdef0",
            "storage[1].throughput_mode: not allowed with file_system_id",
        ),
        (
            "storage.1.throughput_mode",
            "provisioned",
            "storage[1].provisioned_mibps: required when throughput_mode is provisioned",
        ),
        (
            "storage.1.provisioned_mibps",
            100,
            "storage[1].provisioned_mibps: only with throughput_mode provisioned",
        ),
        (
            "storage.1.performance_mode",
            "maxIO",
            "storage[1].performance_mode: maxIO is not supported with elastic throughput",
        ),
        (
            "storage.1.performance_mode",
            "turbo",
            "storage[1].performance_mode: must be one of 'generalPurpose' or 'maxIO', got 'turbo'",
        ),
        (
            "storage.1.throughput_mode",
            "fast",
            "storage[1].throughput_mode: must be one of 'bursting', 'elastic' or 'provisioned', got 'fast'",
        ),
        # workloads
        ("workloads.0", {}, "workloads[0]: expected exactly one of fio, ioping, app (keys: none)"),
        (  # a key with a line break is quoted, so the problem stays one line
            "workloads.0",
            {"\r": 1, "fi o": 2, "job": 3},
            'workloads[0]: expected exactly one of fio, ioping, app (keys: "\\r", "fi o", job)',
        ),
        (
            "workloads.0",
            {"fio": "seq-read-1m-qd32", "app": "c-build"},
            "workloads[0]: has fio and app; expected exactly one of fio, ioping, app",
        ),
        (
            "workloads.0",
            "fio",
            "workloads[0]: expected an object with exactly one of fio, ioping, app, got 'fio'",
        ),
        (
            "workloads.0.fio",
            "no-such-job",
            "workloads[0].fio: unknown fio job 'no-such-job' (known: latency-4k-qd1-randread,",
        ),
        (
            "workloads.0.params",
            {"BOGUS": 1},
            "workloads[0].params.BOGUS: unknown parameter (known:",
        ),
        (
            "workloads.0.params",
            {"RUNTIME": True},
            "workloads[0].params.RUNTIME: must be a string or a number, got true",
        ),
        (
            "workloads.0.params",
            {"RUN TIME": 1},
            'workloads[0].params["RUN TIME"]: must be a parameter name',
        ),
        (
            "workloads.0.extra",
            1,
            "workloads[0].extra: unknown key (allowed: fio, params, job_sha256)",
        ),
        (
            "workloads.1.ioping.count",
            0,
            "workloads[1].ioping.count: must be greater than or equal to 1, got 0",
        ),
        (
            "workloads.1.ioping.interval_ms",
            -1,
            "workloads[1].ioping.interval_ms: must be greater than or equal to 0",
        ),
        (
            "workloads.1.ioping.write",
            "no",
            "workloads[1].ioping.write: must be a valid boolean, got 'no'",
        ),
        (
            "workloads.1.ioping.depth",
            4,
            "workloads[1].ioping.depth: unknown key (allowed: count, interval_ms, write)",
        ),
        (
            "workloads.2.app",
            "no-such-app",
            "workloads[2].app: unknown app preset 'no-such-app' (known: c-build, yocto-core-image-sato-sdk)",
        ),
        (
            "workloads.2.app",
            3,
            "workloads[2].app: expected a preset name or an object with name, run, got 3",
        ),
        ("workloads.2.app", {"name": "mine"}, "workloads[2].app.run: required"),
        (
            "workloads.2.app",
            {"name": "mine", "run": "  "},
            "workloads[2].app.run: must not be empty",
        ),
        (
            "workloads.2.app",
            {"name": "Mine!", "run": "make"},
            "workloads[2].app.name: must be 1-48 characters",
        ),
        (
            "workloads.2.app",
            {"name": "m", "run": "make", "x": 1},
            "workloads[2].app.x: unknown key (allowed: name, populate, run)",
        ),
    ],
)
def test_bad_input_is_reported_at_its_path(path: str, value: Any, expected: str) -> None:
    lines = problems_for(with_change(path, value))
    assert any(line.startswith(expected) for line in lines), lines


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        (
            {
                "type": "fsx-openzfs",
                "label": "z",
                "file_system_id": "fs-0123456789abcdef0",
                "iops": 9,
            },
            "storage[0].iops: not allowed with file_system_id",
        ),
        (
            {"type": "fsx-openzfs", "label": "z"},
            "storage[0].storage_capacity_gib: required without file_system_id",
        ),
        (
            {
                "type": "fsx-openzfs",
                "label": "z",
                "storage_capacity_gib": 32,
                "throughput_capacity": 160,
            },
            "storage[0].storage_capacity_gib: must be greater than or equal to 64, got 32",
        ),
        (
            {"type": "instance-store", "label": "n", "filesystem": "zfs"},
            "storage[0].filesystem: must be one of",
        ),
        ({"type": "local", "label": "l", "path": ""}, "storage[0].path: must not be empty"),
        ({"type": "local", "label": "l"}, "storage[0].path: required"),
        ({"type": "io2", "label": "l"}, "storage[0].type: unknown storage type 'io2'"),
        (
            {"type": "ebs", "label": "v", "volume_type": "io2", "size_gib": 8},
            "storage[0].iops: required for io2",
        ),
        (
            {"type": "ebs", "label": "v", "volume_type": "gp2", "size_gib": 8, "iops": 100},
            "storage[0].iops: gp2 does not take provisioned IOPS",
        ),
    ],
)
def test_storage_type_rules(storage: dict[str, Any], expected: str) -> None:
    lines = problems_for(with_change("storage", [storage]))
    assert any(line.startswith(expected) for line in lines), lines


def test_valid_storage_of_every_type_passes() -> None:
    doc = with_change(
        "storage",
        [
            {"type": "ebs", "label": "io2", "volume_type": "io2", "size_gib": 100, "iops": 50000},
            {"type": "efs", "label": "efs-id", "file_system_id": "fs-0123456789abcdef0"},
            {
                "type": "efs",
                "label": "efs-prov",
                "throughput_mode": "provisioned",
                "provisioned_mibps": 1024,
            },
            {
                "type": "fsx-openzfs",
                "label": "zfs",
                "storage_capacity_gib": 256,
                "throughput_capacity": 4096,
                "iops": 20000,
            },
            {"type": "instance-store", "label": "nvme"},
            {"type": "local", "label": "here", "path": "/tmp"},
        ],
    )
    assert [s.type for s in validate_matrix_dict(doc).storage] == [
        "ebs",
        "efs",
        "efs",
        "fsx-openzfs",
        "instance-store",
        "local",
    ]


def test_all_problems_are_reported_at_once_in_document_order() -> None:
    doc = base()
    doc["name"] = "BAD"
    doc["storage"][0]["iops"] = 1
    doc["workloads"][0]["fio"] = "nope"
    doc["parallelism"] = [0]
    lines = problems_for(doc)
    assert [line.split(":")[0] for line in lines] == [
        "name",
        "storage[0].iops",
        "workloads[0].fio",
        "parallelism[0]",
    ]


def test_semantic_checks_run_even_when_another_item_is_malformed() -> None:
    doc = base()
    doc["storage"][0]["iops"] = 90000  # over the gp3 maximum
    doc["storage"][1]["type"] = "nfs"
    lines = problems_for(doc)
    assert any(line.startswith("storage[0].iops: gp3 IOPS must be 3000-80000") for line in lines)
    assert any(line.startswith("storage[1].type: unknown storage type") for line in lines)


def test_non_object_document_is_one_problem() -> None:
    assert problems_for([1, 2]) == ["the matrix must be a JSON object, got an array"]


def test_json_syntax_error_has_line_and_column() -> None:
    text = '{\n  "name": "x",\n  "storage": [,]\n}'
    with pytest.raises(ValidationFailed) as info:
        load_matrix_text(text)
    assert info.value.lines() == ["line 3 column 15: Expecting value"]


def test_empty_text_is_a_clear_error() -> None:
    with pytest.raises(ValidationFailed, match="the matrix is empty"):
        load_matrix_text("  \n")


def test_missing_file_is_one_line_starting_with_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationFailed) as info:
        load_matrix_file(tmp_path / "absent.json")
    assert info.value.lines() == [f"{tmp_path / 'absent.json'}: no such matrix file"]


def test_directory_is_one_line_starting_with_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationFailed) as info:
        load_matrix_file(tmp_path)
    assert info.value.lines() == [f"{tmp_path}: is a directory, expected a matrix JSON file"]


def test_every_problem_line_of_a_file_starts_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(dict(base(), parallelism=[0], repeats=0)))
    with pytest.raises(ValidationFailed) as info:
        load_matrix_file(path)
    assert info.value.lines() == [
        f"{path}: parallelism[0]: must be greater than or equal to 1, got 0",
        f"{path}: repeats: must be greater than or equal to 1, got 0",
    ]


def test_matrix_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(base()))
    assert load_matrix_file(path).parallelism == [1, 10]


def test_model_dump_validates_again() -> None:
    # given a matrix with defaults filled in (as run.json stores it)
    doc = base()
    doc["workloads"].append({"app": {"name": "mine", "run": "true"}})
    dumped = validate_matrix_dict(doc).model_dump(mode="json")
    # when / then: the dump is itself a valid matrix
    assert validate_matrix_dict(copy.deepcopy(dumped)).model_dump(mode="json") == dumped


def test_a_problem_quoting_a_line_break_is_still_one_line() -> None:
    # whatever text a message carries (a user's key or name), each problem prints as
    # one line: every character str.splitlines() breaks at is written as its escape
    from iofleet.errors import Problem

    breaks = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
    failed = ValidationFailed([Problem("workloads[0]", f"bad{breaks}key"), Problem("", "a\nb")])
    lines = failed.lines()
    assert [line.splitlines() for line in lines] == [[line] for line in lines]
    assert lines[0] == "workloads[0]: bad\\n\\r\\x0b\\x0c\\x1c\\x1d\\x1e\\x85\\u2028\\u2029key"
    assert str(failed).splitlines() == lines
