# ruff: noqa: F811 - the `network` fixture is imported from test_fleet_handlers
"""FSx for OpenZFS / Lustre per cell: PrepareCell creates, its status step polls, Cleanup,
the abort rule and the janitor delete, against a moto server (moto's FSx backend for
create/describe/delete/tags; moto reports no Lifecycle, so the stand-in in
tests/cloud/localcloud/fsx_lifecycle.py adds CREATING -> AVAILABLE and a Lustre MountName)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from iofleet.aws import keys
from lambdas.cleanup import handler as cleanup
from lambdas.janitor import handler as janitor
from lambdas.prepare_cell import handler as prepare
from tests.cloud.localcloud import fsx_lifecycle
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext
from tests.unit.lambdas.test_fleet_handlers import _planned, _seed000, network  # noqa: F401

ZFS_20K = {
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
    "storage_capacity_gib": 2400,
    "per_unit_storage_throughput": 250,
}


@pytest.fixture(autouse=True)
def _lifecycle(moto_endpoint: str) -> None:
    fsx_lifecycle.install()  # the server runs in this process


def _run(context: FakeLambdaContext, ami: str, storage: dict[str, Any]) -> dict[str, Any]:
    matrix = _seed000(ami)
    matrix["storage"] = [storage]
    matrix["parallelism"] = [2]
    matrix["workloads"] = [{"fio": "randread-16k-psync-16jobs", "params": {"RUNTIME": 5}}]
    return _planned(context, matrix)


_KEEPERS: dict[int, Any] = {}


def _keep(sink: list[tuple[str, dict[str, Any]]]) -> Any:
    """A botocore handler recording CreateFileSystem's parameters as sent (one per sink)."""

    def handler(params: dict[str, Any], **_: Any) -> None:
        sink.append(("CreateFileSystem", dict(params)))

    return _KEEPERS.setdefault(id(sink), handler)


def _describe(cloud: Cloud, fs_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cloud.client("fsx").describe_file_systems(FileSystemIds=[fs_id])[
        "FileSystems"
    ]
    return found


def _prepare_until_ready(
    context: FakeLambdaContext, run: dict[str, Any], cell: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    prepared = prepare.handler(
        {"action": "prepare", "run_id": run["run_id"], "cell": cell}, context
    )
    polls = 0
    while not prepared["storage"]["ready"]:
        assert polls < 10, prepared
        prepared = prepare.handler(
            {"action": "status", "run_id": run["run_id"], "cell": cell, "prepared": prepared},
            context,
        )
        polls += 1
    return prepared, polls


def test_openzfs_is_created_with_the_matrix_settings_and_tags(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    created: list[tuple[str, dict[str, Any]]] = []
    client = prepare._clients()["fsx"]

    client.meta.events.register("provide-client-params.fsx.CreateFileSystem", _keep(created))
    run = _run(context, network["ami"], ZFS_20K)
    cell = run["cells"][0]
    try:
        prepared, polls = _prepare_until_ready(context, run, cell)
    finally:
        client.meta.events.unregister("provide-client-params.fsx.CreateFileSystem", _keep(created))
    storage = prepared["storage"]
    assert polls >= 1  # CREATING at first: the state machine's loop waits
    (fs,) = _describe(cloud, storage["file_system_id"])
    assert fs["FileSystemType"] == "OPENZFS"
    assert fs["StorageCapacity"] == 256 and fs["StorageType"] == "SSD"
    assert fs["SubnetIds"] == [network["subnet"]]
    config = fs["OpenZFSConfiguration"]
    assert config["DeploymentType"] == "SINGLE_AZ_1"
    assert config["ThroughputCapacity"] == 4096
    assert config["DiskIopsConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 20000}
    # DescribeFileSystems does not echo the root volume's settings: the request does
    (sent,) = [p for name, p in created if name == "CreateFileSystem"]
    assert sent["SecurityGroupIds"] == [network["sg"]]
    root = sent["OpenZFSConfiguration"]["RootVolumeConfiguration"]
    export = root["NfsExports"][0]["ClientConfigurations"]
    assert [c["Clients"] for c in export] == ["10.0.1.0/24"]  # the fleet subnet only
    tags = {t["Key"]: t["Value"] for t in fs["Tags"]}
    assert tags[keys.TAG_RUN] == run["run_id"]
    assert tags[keys.TAG_CELL] == cell["cell_id"]
    assert tags[keys.TAG_STACK] == keys.stack_name()
    assert keys.TAG_EXPIRES in tags
    assert storage["mount"] == {"dns_name": fs["DNSName"], "export": "/fsx", "fstype": "nfs4"}
    # and the cell's cleanup deletes it
    out = cleanup.handler(
        {
            "scope": "cell",
            "outcome": "SUCCEEDED",
            "run_id": run["run_id"],
            "cell": cell,
            "prepared": {"result": prepared},
        },
        context,
    )
    assert out["file_system"] == "deleted"
    assert _describe(cloud, storage["file_system_id"]) == []


def test_openzfs_without_iops_is_automatic(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    storage = {k: v for k, v in ZFS_20K.items() if k != "iops"}
    storage["deployment_type"] = "SINGLE_AZ_2"
    storage["throughput_capacity"] = 160
    run = _run(context, network["ami"], storage)
    out = prepare.handler(
        {"action": "prepare", "run_id": run["run_id"], "cell": run["cells"][0]}, context
    )
    (fs,) = _describe(cloud, out["storage"]["file_system_id"])
    assert fs["OpenZFSConfiguration"]["DiskIopsConfiguration"] == {"Mode": "AUTOMATIC"}
    assert fs["OpenZFSConfiguration"]["DeploymentType"] == "SINGLE_AZ_2"


def test_lustre_is_created_and_mounted_by_its_mount_name(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    run = _run(context, network["ami"], LUSTRE)
    prepared, _ = _prepare_until_ready(context, run, run["cells"][0])
    (fs,) = _describe(cloud, prepared["storage"]["file_system_id"])
    assert fs["FileSystemType"] == "LUSTRE" and fs["StorageCapacity"] == 2400
    assert fs["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    assert fs["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    assert prepared["storage"]["mount"] == {
        "dns_name": fs["DNSName"],
        "mount_name": fs["LustreConfiguration"]["MountName"],
        "fstype": "lustre",
    }


def test_failed_cell_deletes_the_file_system_prepare_created(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    # given: PrepareCell created the file system, then its status step failed (CheckStorage
    # caught into CleanupFailedCell with the last prepared result)
    run = _run(context, network["ami"], ZFS_20K)
    cell = run["cells"][0]
    prepared = prepare.handler(
        {"action": "prepare", "run_id": run["run_id"], "cell": cell}, context
    )
    fs_id = prepared["storage"]["file_system_id"]
    out = cleanup.handler(
        {
            "scope": "cell",
            "outcome": "FAILED",
            "run_id": run["run_id"],
            "cell": cell,
            "prepared": {"result": prepared},
            "error": {"Error": "FileSystemFailed", "Cause": "MISCONFIGURED"},
        },
        context,
    )
    assert out["file_system"] == "deleted" and _describe(cloud, fs_id) == []


def test_cleanup_with_nothing_prepared_still_finds_the_cells_file_system(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    # PrepareCell failed after CreateFileSystem: the failure path has `prepared: {}`
    run = _run(context, network["ami"], ZFS_20K)
    cell = run["cells"][0]
    fs_id = prepare.handler({"action": "prepare", "run_id": run["run_id"], "cell": cell}, context)[
        "storage"
    ]["file_system_id"]
    cleanup.handler(
        {
            "scope": "cell",
            "outcome": "FAILED",
            "run_id": run["run_id"],
            "cell": cell,
            "prepared": {},
            "error": {"Error": "States.TaskFailed", "Cause": "x"},
        },
        context,
    )
    assert _describe(cloud, fs_id) == []


def test_abort_deletes_the_runs_file_systems_and_leaves_another_stacks(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    run = _run(context, network["ami"], LUSTRE)
    fs_id = prepare.handler(
        {"action": "prepare", "run_id": run["run_id"], "cell": run["cells"][0]}, context
    )["storage"]["file_system_id"]
    other = cloud.client("fsx").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        StorageType="SSD",
        SubnetIds=[network["subnet"]],
        Tags=[
            {"Key": keys.TAG_RUN, "Value": run["run_id"]},
            {"Key": keys.TAG_STACK, "Value": "SomeOtherStack"},
        ],
    )["FileSystem"]["FileSystemId"]
    out = cleanup.handler({"scope": "run", "run_id": run["run_id"], "outcome": "ABORTED"}, context)
    assert out["file_systems"] >= 1
    assert _describe(cloud, fs_id) == []
    assert len(_describe(cloud, other)) == 1


def test_janitor_deletes_only_this_stacks_expired_fsx(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    fsx = cloud.client("fsx")
    past = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    future = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    run = f"janitor-{uuid.uuid4().hex[:6]}"

    def make(stack: str, expires: str) -> str:
        fs_id: str = fsx.create_file_system(
            FileSystemType="OPENZFS",
            StorageCapacity=64,
            StorageType="SSD",
            SubnetIds=[network["subnet"]],
            OpenZFSConfiguration={"DeploymentType": "SINGLE_AZ_1", "ThroughputCapacity": 64},
            Tags=[
                {"Key": keys.TAG_RUN, "Value": run},
                {"Key": keys.TAG_STACK, "Value": stack},
                {"Key": keys.TAG_EXPIRES, "Value": expires},
            ],
        )["FileSystem"]["FileSystemId"]
        return fs_id

    expired_mine = make(keys.stack_name(), past)
    live_mine = make(keys.stack_name(), future)
    unreadable_mine = make(keys.stack_name(), "next tuesday")
    expired_other = make("SomeOtherStack", past)
    out = janitor.handler({}, context)
    assert out["file_systems"].get(expired_mine) == "deleted"
    assert _describe(cloud, expired_mine) == []
    for kept in (live_mine, unreadable_mine, expired_other):
        assert len(_describe(cloud, kept)) == 1, kept
