"""FSx for OpenZFS and FSx for Lustre created per cell, through the deployed state machine.

Real here: the state-machine definition, the PrepareCell / Launch / Cleanup / Janitor
handlers, moto's FSx backend (CreateFileSystem, DescribeFileSystems, DeleteFileSystem,
tags), the agent running fio and an app on the mounted directory, ingest.

Hand-written stand-ins (moto has no such thing), both in tests/cloud/localcloud/:
- fsx_lifecycle.py: moto reports no `Lifecycle` and no Lustre `MountName`; the stand-in
  says CREATING for a file system's first two descriptions, then AVAILABLE, so the
  CheckStorage -> WaitForStorage loop really runs;
- hooks.MOUNT_SHIM: an "FSx mount" (NFS v4.1 of fs-ID.fsx.REGION.amazonaws.com:/fsx, or
  Lustre's DNS@tcp:/MOUNTNAME) is a bind mount of the local directory `fsx_root/fs-ID`
  that the harness maps the file system's DNS name to; each mount's argv is logged in
  `fsx_root/mounts.jsonl`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from iofleet.agent.target import run_dir_name
from iofleet.aws import keys
from tests.cloud.localcloud.fixtures import LocalStack, poll
from tests.cloud.test_e2e import FIO

STACK = "IofleetStack"
ZFS = {
    "type": "fsx-openzfs",
    "label": "zfs-20k",
    "storage_capacity_gib": 256,
    "throughput_capacity": 4096,
    "iops": 20000,
}
LUSTRE = {
    "type": "fsx-lustre",
    "label": "lustre",
    "deployment_type": "PERSISTENT_2",
    "storage_capacity_gib": 1200,
    "per_unit_storage_throughput": 125,
}


def _cache_app(gate: Path) -> dict[str, Any]:
    """Populate once writes the cache on the file system; each slot says it started, waits
    (bounded) for the test to open its cell's gate, then reads the cache."""
    return {
        "app": {
            "name": "fsx-cache",
            "populate": 'echo "populated $IOFLEET_CELL_ID" > "$IOFLEET_SHARED/cache.txt"',
            "run": (
                f'touch "{gate}/started-$IOFLEET_CELL_ID-slot-$IOFLEET_SLOT"; '
                f'for _ in $(seq 1200); do [ -e "{gate}/go-$IOFLEET_CELL_ID" ] && break; '
                "sleep 0.25; done; "
                f'[ -e "{gate}/go-$IOFLEET_CELL_ID" ] && '
                'grep -qx "populated $IOFLEET_CELL_ID" "$IOFLEET_SHARED/cache.txt"'
            ),
        }
    }


def _doc(
    stack: LocalStack, name: str, storage: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name,
        "instance_types": ["m6i.large"],
        "ami_id": stack.ami,
        "storage": storage,
        "workloads": [FIO],
        "parallelism": [2],
        "slot_timeout_s": 600,
    }
    doc.update(extra)
    return doc


def _run_file_systems(stack: LocalStack, run_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for page in stack.client("fsx").get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
            if tags.get(keys.TAG_RUN) == run_id:
                out.append(fs)
    return out


def _gone(stack: LocalStack, fs_ids: list[str]) -> bool:
    fsx = stack.client("fsx")
    return all(not fsx.describe_file_systems(FileSystemIds=[i])["FileSystems"] for i in fs_ids)


def _tags(fs: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in fs.get("Tags", [])}


def _fsx_root(stack: LocalStack) -> Path:
    return Path(stack.base_config["fsx_root"])


def _mounts(stack: LocalStack) -> list[dict[str, Any]]:
    log = _fsx_root(stack) / "mounts.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture(scope="module")
def fsx_run(local_stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    gate = tmp_path_factory.mktemp("fsx-gate")
    # given: seed 004's FSx for OpenZFS row (256 GiB, 4096 MB/s, 20k IOPS) and a Lustre
    # PERSISTENT_2 file system, fleets of 2 running fio and an app with a populate phase
    doc = _doc(local_stack, "fsx-e2e", [ZFS, LUSTRE], workloads=[FIO, _cache_app(gate)])
    arn = local_stack.start(doc)
    run_id = poll(lambda: _run_id(local_stack, arn), timeout_s=120, what="plan written")
    seen: dict[str, dict[str, Any]] = {}
    for _ in range(2):  # cells run one at a time
        # when: both slots of a cell are in their app, its file system is described
        started = poll(
            lambda: _started_cell(gate, seen),
            timeout_s=400,
            what="both slots of the next cell in their app",
        )
        (fs,) = [
            f for f in _run_file_systems(local_stack, run_id) if _tags(f)[keys.TAG_CELL] == started
        ]
        seen[started] = fs
        (gate / f"go-{started}").touch()
    desc = local_stack.wait(arn, timeout_s=600)
    local_stack.esm.wait_drained()
    return {"arn": arn, "run_id": run_id, "desc": desc, "file_systems": seen}


def _run_id(stack: LocalStack, arn: str) -> str | None:
    try:
        return stack.run_id_of(arn)
    except Exception:  # noqa: BLE001 - not planned yet
        return None


def _started_cell(gate: Path, seen: dict[str, Any]) -> str | None:
    cells: dict[str, int] = {}
    for p in gate.glob("started-*"):
        cell, _, _slot = p.name[len("started-") :].rpartition("-slot-")
        cells[cell] = cells.get(cell, 0) + 1
    ready = [c for c, n in cells.items() if n == 2 and c not in seen]
    return ready[0] if ready else None


def test_fsx_cells_succeed_and_every_slot_is_ingested(
    fsx_run: dict[str, Any], local_stack: LocalStack
) -> None:
    # the cells (PrepareCell, the storage loop, populate, the fleet, CleanupCell); the
    # run's own end (Summarize's SQL on Trino) is test_e2e's, and can time out under load
    cells = local_stack.items(fsx_run["run_id"], "cell#")
    assert sorted(c["status"] for c in cells) == ["SUCCEEDED", "SUCCEEDED"], cells
    assert {c["file_system_id"] for c in cells} == {
        f["FileSystemId"] for f in fsx_run["file_systems"].values()
    }
    slots = local_stack.items(fsx_run["run_id"], "slot#")
    assert len(slots) == 4
    assert {(s["agent_status"], s.get("ingested")) for s in slots} == {("SUCCEEDED", True)}
    raw = list(local_stack.raw_objects(fsx_run["run_id"]))  # relpaths, the writer's id left out
    assert len([k for k in raw if k.endswith("/w00-fio-randread-16k-psync-16jobs.json")]) == 4
    assert len([k for k in raw if k.endswith("/w01-app-fsx-cache.json")]) == 4 + 2  # + populate


def test_openzfs_was_created_with_the_matrix_settings(fsx_run: dict[str, Any]) -> None:
    (fs,) = [f for f in fsx_run["file_systems"].values() if f["FileSystemType"] == "OPENZFS"]
    assert fs["Lifecycle"] == "AVAILABLE"
    assert (fs["StorageCapacity"], fs["StorageType"]) == (256, "SSD")
    config = fs["OpenZFSConfiguration"]
    assert config["DeploymentType"] == "SINGLE_AZ_1"
    assert config["ThroughputCapacity"] == 4096
    assert config["DiskIopsConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 20000}
    tags = _tags(fs)
    assert tags[keys.TAG_STACK] == STACK and tags[keys.TAG_RUN] == fsx_run["run_id"]
    assert "zfs-20k" in tags[keys.TAG_CELL] and keys.TAG_EXPIRES in tags


def test_lustre_was_created_with_the_matrix_settings(fsx_run: dict[str, Any]) -> None:
    (fs,) = [f for f in fsx_run["file_systems"].values() if f["FileSystemType"] == "LUSTRE"]
    assert (fs["StorageCapacity"], fs["StorageType"]) == (1200, "SSD")
    assert fs["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    assert fs["LustreConfiguration"]["PerUnitStorageThroughput"] == 125
    assert _tags(fs)[keys.TAG_STACK] == STACK


def test_populate_and_every_slot_mounted_the_cells_file_system(
    fsx_run: dict[str, Any], local_stack: LocalStack
) -> None:
    mounts = _mounts(local_stack)
    for cell_id, fs in fsx_run["file_systems"].items():
        argvs = [m["argv"] for m in mounts if m["fs_id"] == fs["FileSystemId"]]
        assert len(argvs) == 3  # the populate instance and both slots
        if fs["FileSystemType"] == "OPENZFS":
            for argv in argvs:
                assert argv[:2] == ["-t", "nfs4"] and "nfsvers=4.1" in argv[3]
                assert argv[-2] == f"{fs['DNSName']}:/fsx"
        else:
            name = fs["LustreConfiguration"]["MountName"]
            for argv in argvs:
                assert argv[:2] == ["-t", "lustre"]
                assert argv[-2] == f"{fs['DNSName']}@tcp:/{name}"
        # where the effect landed: the populate phase's cache, on that file system's directory
        cache = (
            _fsx_root(local_stack)
            / fs["FileSystemId"]
            / run_dir_name(fsx_run["run_id"])
            / cell_id
            / "shared"
            / "cache.txt"
        )
        assert cache.read_text() == f"populated {cell_id}\n"


def test_file_systems_are_gone_after_the_run(
    fsx_run: dict[str, Any], local_stack: LocalStack
) -> None:
    ids = [f["FileSystemId"] for f in fsx_run["file_systems"].values()]
    assert len(ids) == 2 and _gone(local_stack, ids)
    assert _run_file_systems(local_stack, fsx_run["run_id"]) == []
    assert local_stack.live_instances(fsx_run["run_id"]) == []


def test_failed_cell_deletes_its_file_system(local_stack: LocalStack) -> None:
    # given: an OpenZFS cell whose only slot's app fails
    fail = {"app": {"name": "fail", "run": "exit 3"}}
    doc = _doc(local_stack, "fsx-fail", [ZFS], workloads=[fail], parallelism=[1])
    arn = local_stack.start(doc)
    local_stack.wait(arn, timeout_s=400)
    run_id = local_stack.run_id_of(arn)
    # then: the cell failed (CleanupFailedCell) and its file system was created and deleted
    (cell,) = local_stack.items(run_id, "cell#")
    assert cell["status"] == "FAILED" and cell["file_system_id"].startswith("fs-")
    assert _gone(local_stack, [cell["file_system_id"]])
    assert _run_file_systems(local_stack, run_id) == []


def test_aborted_run_deletes_its_file_system(local_stack: LocalStack, tmp_path: Path) -> None:
    # given: a Lustre cell whose slot waits in its app (a gate that never opens)
    doc = _doc(
        local_stack,
        "fsx-abort",
        [LUSTRE],
        workloads=[_cache_app(tmp_path)],
        parallelism=[1],
    )
    arn = local_stack.start(doc)
    run_id = poll(lambda: _run_id(local_stack, arn), timeout_s=120, what="plan written")
    poll(lambda: list(tmp_path.glob("started-*")), timeout_s=400, what="the slot in its app")
    (fs,) = _run_file_systems(local_stack, run_id)
    # when: the execution is stopped and EventBridge delivers the status change
    local_stack.client("stepfunctions").stop_execution(
        executionArn=arn, cause="stopped by the test"
    )
    assert local_stack.wait(arn)["status"] == "ABORTED"
    ((result, error),) = local_stack.d.deliver_event(
        local_stack.d.execution_status_event(arn, "ABORTED", "stopped by the test")
    )
    # then: the abort rule's cleanup deleted the run's file system
    assert error is None and result["file_systems"] == 1, result
    assert _gone(local_stack, [fs["FileSystemId"]])


def test_janitor_deletes_only_this_stacks_expired_file_systems(local_stack: LocalStack) -> None:
    fsx = local_stack.client("fsx")
    subnet = local_stack.client("ec2").describe_subnets()["Subnets"][0]["SubnetId"]
    past = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def make(stack: str, expires: str) -> str:
        fs_id: str = fsx.create_file_system(
            FileSystemType="LUSTRE",
            StorageCapacity=1200,
            StorageType="SSD",
            SubnetIds=[subnet],
            LustreConfiguration={"DeploymentType": "SCRATCH_2"},
            Tags=[
                {"Key": keys.TAG_RUN, "Value": "janitor-fsx"},
                {"Key": keys.TAG_STACK, "Value": stack},
                {"Key": keys.TAG_EXPIRES, "Value": expires},
            ],
        )["FileSystem"]["FileSystemId"]
        return fs_id

    mine = make(STACK, past)
    other = make("AnotherStack", past)
    unreadable = make(STACK, "soon")
    # when: the hourly janitor runs
    out, error = local_stack.d.invoke("janitor", {})
    assert error is None, out
    # then: only this stack's expired file system is gone
    assert _gone(local_stack, [mine])
    assert not _gone(local_stack, [other]) and not _gone(local_stack, [unreadable])
    for fs_id in (other, unreadable):
        fsx.delete_file_system(FileSystemId=fs_id)
