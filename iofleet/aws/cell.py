"""PrepareCell Lambda logic: record the cell, create its start barrier, get shared storage ready."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from iofleet.aws import barrier, keys, s3mount
from iofleet.aws import fsx as fsx_cells
from iofleet.aws.ddb import set_attributes
from iofleet.aws.launch import launch_schedule
from iofleet.aws.plan import find_cell, load_manifest


def _now() -> str:
    return datetime.now(UTC).isoformat()


# How long CheckStorage/WaitForStorage may wait for a file system this cell created before
# the cell fails with the reason (the state machine's loop is otherwise bounded only by the
# execution's timeout). FSx for OpenZFS/Lustre report creation in minutes to tens of
# minutes (Multi-AZ and large Lustre the longest); an EFS file system and its mount
# targets take a minute or two.
READY_LIMIT_S = {"efs": 20 * 60, "fsx-openzfs": 90 * 60, "fsx-lustre": 90 * 60}


class StorageNotReady(RuntimeError):
    """A created file system did not become ready within READY_LIMIT_S: the cell fails."""


def _with_deadline(storage: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A created, not yet ready storage gets `ready_by` (ISO UTC), once."""
    if storage.get("ready") or not storage.get("created") or "ready_by" in storage:
        return storage
    limit = READY_LIMIT_S.get(str(storage.get("kind")))
    if limit is None:
        return storage
    return {**storage, "ready_by": (now + timedelta(seconds=limit)).isoformat()}


def _past_deadline(storage: dict[str, Any], now: datetime) -> None:
    ready_by = storage.get("ready_by")
    if storage.get("ready") or not ready_by:
        return
    try:
        deadline = datetime.fromisoformat(str(ready_by))
    except ValueError:
        raise StorageNotReady(f"unreadable ready_by {ready_by!r} on the cell's storage") from None
    if now > deadline:
        kind = storage.get("kind")
        what = storage.get("file_system_id") or kind
        state = storage.get("lifecycle")
        raise StorageNotReady(
            f"{kind} {what} not ready after {READY_LIMIT_S.get(str(kind), 0) // 60} min"
            + (f" (still {state})" if state else "")
        )


def prepare(
    event: dict[str, Any],
    *,
    s3: Any,
    ddb: Any,
    efs: Any,
    fsx: Any,
    bucket: str,
    table: str,
    region: str,
    expires_at: str,
    ec2: Any = None,
    network: dict[str, Any] | None = None,
    subnet_ids: list[str] | None = None,
) -> dict[str, Any]:
    run_id = event["run_id"]
    cell_id = event["cell"]["cell_id"]
    manifest = load_manifest(s3, bucket, run_id)
    cell = find_cell(manifest, cell_id)
    fleet = int(cell["fleet_size"])
    ddb.put_item(
        TableName=table,
        Item={
            **{k: {"S": v} for k, v in keys.cell_item_key(run_id, cell_id).items()},
            "status": {"S": "RUNNING"},
            "started_at": {"S": _now()},
            "fleet_size": {"N": str(fleet)},
        },
    )
    barrier.create_barrier(ddb, table, run_id, cell_id, fleet)
    if s3mount.is_mountpoint(cell["storage"]):  # a bucket per cell (iofleet/aws/s3mount.py)
        storage = s3mount.create(
            cell["storage"],
            run_id,
            cell_id,
            s3=s3,
            ec2=ec2,
            subnet_ids=list(subnet_ids or []),
            region=region,
            expires_at=expires_at,
            record=lambda name: set_attributes(
                ddb, table, keys.cell_item_key(run_id, cell_id), {"storage_bucket": name}
            ),
        )
        return {"storage": storage, "slots": launch_schedule(fleet)}
    storage = shared_storage(
        cell["storage"],
        run_id,
        cell_id,
        efs=efs,
        fsx=fsx,
        region=region,
        expires_at=expires_at,
        ec2=ec2,
        network=network,
    )
    storage = _with_deadline(storage, datetime.now(UTC))
    if storage.get("file_system_id"):  # Summarize reads its CloudWatch metrics after it is deleted
        ddb.update_item(
            TableName=table,
            Key={k: {"S": v} for k, v in keys.cell_item_key(run_id, cell_id).items()},
            UpdateExpression="SET file_system_id = :f",
            ExpressionAttributeValues={":f": {"S": storage["file_system_id"]}},
        )
    # the Fleet map's items: each slot with its launch wave's delay (launch.launch_schedule)
    return {"storage": storage, "slots": launch_schedule(fleet)}


def shared_storage(
    spec: dict[str, Any],
    run_id: str,
    cell_id: str,
    *,
    efs: Any,
    fsx: Any,
    region: str,
    expires_at: str,
    ec2: Any = None,
    network: dict[str, Any] | None = None,
) -> dict[str, Any]:
    kind = spec.get("type")
    if kind in fsx_cells.KINDS:  # FSx for OpenZFS / Lustre: iofleet/aws/fsx.py
        net = network or {}
        return fsx_cells.prepare(
            spec,
            run_id,
            cell_id,
            fsx=fsx,
            ec2=ec2,
            subnet_ids=list(net.get("subnet_ids") or []),
            security_group=str(net.get("security_group") or ""),
            expires_at=expires_at,
        )
    if kind == "efs":
        fs_id = spec.get("file_system_id")
        if fs_id:
            efs.describe_file_systems(FileSystemId=fs_id)  # fails fast on a wrong id
            return {
                "ready": True,
                "kind": "efs",
                "file_system_id": fs_id,
                "created": False,
                "mount": _efs_mount(fs_id, region),
            }
        args: dict[str, Any] = {
            "CreationToken": f"{run_id}/{cell_id}"[:64],
            "PerformanceMode": spec.get("performance_mode") or "generalPurpose",
            "ThroughputMode": spec.get("throughput_mode") or "elastic",
            "Encrypted": True,
            "Tags": [
                {"Key": "Name", "Value": f"iofleet {cell_id}"},
                {"Key": keys.TAG_RUN, "Value": run_id},
                {"Key": keys.TAG_CELL, "Value": cell_id},
                {"Key": keys.TAG_EXPIRES, "Value": expires_at},
                {"Key": keys.TAG_STACK, "Value": keys.stack_name()},
            ],
        }
        if args["ThroughputMode"] == "provisioned":
            args["ProvisionedThroughputInMibps"] = float(spec["provisioned_mibps"])
        fs = efs.create_file_system(**args)
        return {
            "ready": False,
            "kind": "efs",
            "file_system_id": fs["FileSystemId"],
            "created": True,
            "mount": _efs_mount(fs["FileSystemId"], region),
        }
    return {"ready": True, "kind": kind or "ebs", "created": False}


def _efs_mount(fs_id: str, region: str) -> dict[str, str]:
    return {"dns_name": f"{fs_id}.efs.{region}.amazonaws.com", "export": "/"}


def status(
    event: dict[str, Any],
    *,
    efs: Any,
    subnet_ids: list[str],
    security_group: str,
    fsx: Any = None,
) -> dict[str, Any]:
    """Poll step for created storage (EFS: the file system and a mount target per subnet
    available; FSx: AVAILABLE). Past its `ready_by` and still not ready: StorageNotReady,
    which fails the cell with that reason (the catch on CheckStorage)."""
    prepared = _status(
        event, efs=efs, subnet_ids=subnet_ids, security_group=security_group, fsx=fsx
    )
    _past_deadline(prepared["storage"], datetime.now(UTC))
    return prepared


def _status(
    event: dict[str, Any],
    *,
    efs: Any,
    subnet_ids: list[str],
    security_group: str,
    fsx: Any = None,
) -> dict[str, Any]:
    prepared = dict(event["prepared"])
    storage = dict(prepared["storage"])
    if storage.get("kind") in fsx_cells.KINDS:
        return fsx_cells.status(prepared, fsx=fsx)
    fs_id = storage["file_system_id"]
    fs = efs.describe_file_systems(FileSystemId=fs_id)["FileSystems"][0]
    if fs["LifeCycleState"] != "available":
        prepared["storage"] = {**storage, "ready": False}
        return prepared
    targets = efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]
    have = {t["SubnetId"] for t in targets}
    for subnet in subnet_ids:
        if subnet not in have:
            efs.create_mount_target(
                FileSystemId=fs_id, SubnetId=subnet, SecurityGroups=[security_group]
            )
    targets = efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]
    ready = len(targets) >= len(subnet_ids) and all(
        t["LifeCycleState"] == "available" for t in targets
    )
    prepared["storage"] = {**storage, "ready": ready}
    return prepared
