"""Amazon FSx file systems created per cell: create, poll until AVAILABLE, mount data, delete.

PrepareCell creates the file system from the cell's storage settings (validated by
iofleet/plan/fsx.py) with this stack's tags; its status step (run by the state
machine's CheckStorage/WaitForStorage loop, no sleeping in a Lambda) reads the
lifecycle until AVAILABLE and hands the slots the mount (NFS v4.1 export of the
OpenZFS root volume, or the Lustre mount name). Cleanup (every path), the abort
rule and the janitor delete them, only those tagged with this stack.
"""

from __future__ import annotations

import hashlib
from typing import Any

from iofleet.aws import keys

KINDS = ("fsx-openzfs", "fsx-lustre")
OPENZFS_EXPORT = "/fsx"  # the root volume's path
FAILED_STATES = ("FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE")
GONE_STATES = ("DELETING",)


class FileSystemFailed(RuntimeError):
    """The file system did not become AVAILABLE; the cell fails with this reason."""


def _tags(run_id: str, cell_id: str, expires_at: str) -> list[dict[str, str]]:
    return [
        {"Key": "Name", "Value": f"iofleet {cell_id}"},
        {"Key": keys.TAG_RUN, "Value": run_id},
        {"Key": keys.TAG_CELL, "Value": cell_id},
        {"Key": keys.TAG_EXPIRES, "Value": expires_at},
        {"Key": keys.TAG_STACK, "Value": keys.stack_name()},
    ]


def subnet_cidrs(ec2: Any, subnet_ids: list[str]) -> list[str]:
    """The fleet subnets' IPv4 CIDR blocks (who may mount the OpenZFS export)."""
    subnets = ec2.describe_subnets(SubnetIds=subnet_ids)["Subnets"]
    return sorted({s["CidrBlock"] for s in subnets})


def create_request(
    spec: dict[str, Any],
    run_id: str,
    cell_id: str,
    *,
    subnet_ids: list[str],
    security_group: str,
    client_cidrs: list[str],
    expires_at: str,
) -> dict[str, Any]:
    """CreateFileSystem's arguments for a matrix storage item (fsx-openzfs | fsx-lustre)."""
    if not subnet_ids:
        raise ValueError("no subnets configured for the fleet (SUBNET_IDS)")
    kind = spec["type"]
    args: dict[str, Any] = {
        # idempotent retries of PrepareCell create one file system ([A-Za-z0-9_.-], <= 63)
        "ClientRequestToken": hashlib.sha256(f"{run_id}/{cell_id}".encode()).hexdigest()[:63],
        "StorageCapacity": int(spec["storage_capacity_gib"]),
        "StorageType": "SSD",
        "SecurityGroupIds": [security_group],
        "Tags": _tags(run_id, cell_id, expires_at),
    }
    if kind == "fsx-openzfs":
        deployment = spec.get("deployment_type") or "SINGLE_AZ_1"
        if deployment == "MULTI_AZ_1":
            if len(subnet_ids) < 2:
                raise ValueError("MULTI_AZ_1 needs two fleet subnets in different zones")
            subnets = subnet_ids[:2]
        else:
            subnets = subnet_ids[:1]  # the first fleet subnet: the fleet's preferred zone
        iops = spec.get("iops")
        config: dict[str, Any] = {
            "DeploymentType": deployment,
            "ThroughputCapacity": int(spec["throughput_capacity"]),
            "AutomaticBackupRetentionDays": 0,
            "DiskIopsConfiguration": (
                {"Mode": "USER_PROVISIONED", "Iops": int(iops)}
                if iops is not None
                else {"Mode": "AUTOMATIC"}
            ),
            "RootVolumeConfiguration": {
                "DataCompressionType": "NONE",
                "NfsExports": [
                    {
                        "ClientConfigurations": [
                            {"Clients": cidr, "Options": ["rw", "crossmnt", "no_root_squash"]}
                            for cidr in client_cidrs
                        ]
                    }
                ],
            },
        }
        if deployment == "MULTI_AZ_1":
            config["PreferredSubnetId"] = subnets[0]
        args.update(FileSystemType="OPENZFS", SubnetIds=subnets, OpenZFSConfiguration=config)
        return args
    if kind == "fsx-lustre":
        deployment = spec.get("deployment_type") or "PERSISTENT_2"
        lustre: dict[str, Any] = {"DeploymentType": deployment, "DataCompressionType": "NONE"}
        if spec.get("per_unit_storage_throughput") is not None:
            lustre["PerUnitStorageThroughput"] = int(spec["per_unit_storage_throughput"])
        if deployment.startswith("PERSISTENT"):
            lustre["AutomaticBackupRetentionDays"] = 0
        args.update(
            FileSystemType="LUSTRE",
            FileSystemTypeVersion="2.15",
            SubnetIds=subnet_ids[:1],
            LustreConfiguration=lustre,
        )
        return args
    raise ValueError(f"not an FSx storage type: {kind!r}")


def _mount(kind: str, fs: dict[str, Any]) -> dict[str, str]:
    if kind == "fsx-lustre":
        name = (fs.get("LustreConfiguration") or {}).get("MountName")
        if not name:
            raise FileSystemFailed(f"{fs['FileSystemId']}: AVAILABLE without a Lustre MountName")
        return {"dns_name": fs["DNSName"], "mount_name": name, "fstype": "lustre"}
    return {"dns_name": fs["DNSName"], "export": OPENZFS_EXPORT, "fstype": "nfs4"}


def prepare(
    spec: dict[str, Any],
    run_id: str,
    cell_id: str,
    *,
    fsx: Any,
    ec2: Any,
    subnet_ids: list[str],
    security_group: str,
    expires_at: str,
) -> dict[str, Any]:
    """PrepareCell's storage for an FSx item: an existing file system, or a new one."""
    kind = spec["type"]
    fs_id = spec.get("file_system_id")
    if fs_id:
        found = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
        if not found:
            raise FileSystemFailed(f"file system {fs_id} not found")
        return {
            "ready": True,
            "kind": kind,
            "file_system_id": fs_id,
            "created": False,
            "mount": _mount(kind, found[0]),
        }
    cidrs = subnet_cidrs(ec2, subnet_ids) if kind == "fsx-openzfs" else []
    request = create_request(
        spec,
        run_id,
        cell_id,
        subnet_ids=subnet_ids,
        security_group=security_group,
        client_cidrs=cidrs,
        expires_at=expires_at,
    )
    fs = fsx.create_file_system(**request)["FileSystem"]
    return {"ready": False, "kind": kind, "file_system_id": fs["FileSystemId"], "created": True}


def status(prepared: dict[str, Any], *, fsx: Any) -> dict[str, Any]:
    """One poll of a created file system: ready once AVAILABLE, with its mount."""
    prepared = dict(prepared)
    storage = dict(prepared["storage"])
    fs_id = storage["file_system_id"]
    found = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
    if not found:
        raise FileSystemFailed(f"file system {fs_id} disappeared while it was being created")
    fs = found[0]
    state = fs.get("Lifecycle")
    if state in FAILED_STATES:
        why = (fs.get("FailureDetails") or {}).get("Message") or "no failure details"
        raise FileSystemFailed(f"file system {fs_id} is {state}: {why}")
    if state != "AVAILABLE":
        prepared["storage"] = {**storage, "ready": False, "lifecycle": state}
        return prepared
    prepared["storage"] = {
        **storage,
        "ready": True,
        "lifecycle": state,
        "mount": _mount(storage["kind"], fs),
    }
    return prepared


def delete(fsx: Any, fs_id: str) -> str:
    """Delete a file system with no final backup: 'deleted', 'gone' or 'pending'.

    'pending': FSx refused for now (still CREATING, an update in progress); the
    janitor retries once the expiry tag has passed.
    """
    found = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
    if not found:
        return "gone"
    fs = found[0]
    if fs.get("Lifecycle") in GONE_STATES:
        return "deleted"
    args: dict[str, Any] = {"FileSystemId": fs_id}
    if fs.get("FileSystemType") == "OPENZFS":
        args["OpenZFSConfiguration"] = {"SkipFinalBackup": True}
    elif fs.get("FileSystemType") == "LUSTRE":
        deployment = (fs.get("LustreConfiguration") or {}).get("DeploymentType", "")
        if str(deployment).startswith("PERSISTENT"):
            args["LustreConfiguration"] = {"SkipFinalBackup": True}
    try:
        fsx.delete_file_system(**args)
    except Exception as exc:
        code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
        if code == "FileSystemNotFound":
            return "gone"
        if code in ("BadRequest", "IncompatibleParameterError", "ServiceLimitExceeded"):
            return "pending"
        raise
    return "deleted"


def tagged(fsx: Any, run_id: str | None = None) -> list[dict[str, Any]]:
    """FSx file systems of this stack (and run, if given) created by iofleet, with their tags."""
    out: list[dict[str, Any]] = []
    for page in fsx.get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
            if tags.get(keys.TAG_STACK) != keys.stack_name() or keys.TAG_RUN not in tags:
                continue
            if run_id is not None and tags.get(keys.TAG_RUN) != run_id:
                continue
            out.append({"id": fs["FileSystemId"], "tags": tags})
    return out
