"""Mountpoint for Amazon S3 storage: the bucket of a cell, its mount, its cleanup.

Two storage types (iofleet/plan/matrix.py): `s3-mountpoint`, a general purpose
bucket, and `s3express-mountpoint`, an S3 Express One Zone directory bucket.
Either is created per cell by PrepareCell, so no two cells (and no two runs)
share objects, and deleted (emptied first) by the cell's cleanup, the run's
cleanup (the abort rule and the failure catch) and the hourly janitor.

Names: `ifl-<stack8>-<expiry>-<cell10>` (general purpose) and
`ifl-<stack8>-<expiry>-<cell10>--<az-id>--x-s3` (directory bucket, the name format
S3 requires), where `stack8` is a hash of this stack's name (the IAM policies
allow bucket creation and deletion under `ifl-<stack8>-` only, and cleanup and the
janitor look only there), `expiry` the UTC minute (YYYYmmddHHMM) after which the
janitor may delete it (readable from the name alone: a directory bucket's tags
cannot be listed with the bucket), and `cell10` a hash of run and cell. General
purpose buckets also carry the usual tags (iofleet:run-id, cell, expires-at,
stack).

A directory bucket lives in one Availability Zone: PrepareCell maps the stack's
subnets to their AZ IDs, creates the bucket in the matrix's `az_id` (default: the
first subnet's) and hands the Fleet the subnets of that zone only; the launch's
capacity fallback then moves between those subnets, never to another zone (an
instance in another zone would measure cross-AZ access; the slot fails with
InsufficientCapacity instead, docs/decisions.md).

Stdlib only (boto3 clients are passed in): the instance imports `mount_argv`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from iofleet.aws import keys

GP = "s3-mountpoint"
EXPRESS = "s3express-mountpoint"
KINDS = (GP, EXPRESS)
NAME_PREFIX = "ifl-"
MOUNT_KIND = "mountpoint-s3"
# The official package (docs: "Installing Mountpoint for Amazon S3"), per architecture
# as `uname -m` spells it.
DEB_URL = "https://s3.amazonaws.com/mountpoint-s3-release/latest/{arch}/mount-s3.deb"
_EXPIRY_RE = re.compile(
    r"^ifl-[0-9a-f]{8}-(?P<when>[0-9]{12})-[0-9a-f]{10}(?:--[a-z0-9-]+--x-s3)?$"
)


def stack_hash(stack: str | None = None) -> str:
    return hashlib.sha256((stack or keys.stack_name()).encode()).hexdigest()[:8]


def name_prefix(stack: str | None = None) -> str:
    """Every bucket this stack creates starts with this (the IAM resource prefix)."""
    return f"{NAME_PREFIX}{stack_hash(stack)}-"


def _expiry_stamp(expires_at: str) -> str:
    when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    return when.astimezone(UTC).strftime("%Y%m%d%H%M")


def base_name(run_id: str, cell_id: str, expires_at: str, stack: str | None = None) -> str:
    cell = hashlib.sha256(f"{run_id}/{cell_id}".encode()).hexdigest()[:10]
    return f"{name_prefix(stack)}{_expiry_stamp(expires_at)}-{cell}"


def directory_bucket_name(base: str, az_id: str) -> str:
    return f"{base}--{az_id}--x-s3"


def name_expiry(name: str) -> datetime | None:
    """The expiry a bucket name of ours carries; None if the name is not one we make."""
    m = _EXPIRY_RE.match(name)
    if not m:
        return None
    try:
        return datetime.strptime(m["when"], "%Y%m%d%H%M").replace(tzinfo=UTC)
    except ValueError:
        return None


def is_ours(name: str, stack: str | None = None) -> bool:
    return name.startswith(name_prefix(stack)) and name_expiry(name) is not None


def is_mountpoint(storage: dict[str, Any] | None) -> bool:
    return (
        bool(storage) and str((storage or {}).get("type") or (storage or {}).get("kind")) in KINDS
    )


# --------------------------------------------------------------------------- create


def _subnet_zones(ec2: Any, subnet_ids: list[str]) -> list[tuple[str, str]]:
    """(subnet id, AZ ID) in the stack's order."""
    found = {
        s["SubnetId"]: s.get("AvailabilityZoneId", "")
        for s in ec2.describe_subnets(SubnetIds=subnet_ids)["Subnets"]
    }
    return [(s, found.get(s, "")) for s in subnet_ids]


def create(
    spec: dict[str, Any],
    run_id: str,
    cell_id: str,
    *,
    s3: Any,
    ec2: Any,
    subnet_ids: list[str],
    region: str,
    expires_at: str,
    record: Any = None,
) -> dict[str, Any]:
    """Create the cell's bucket; the storage object the Fleet and the cleanup get.

    `record(name)` is called with the bucket's name before it is created (the cell item
    keeps it, so the run's cleanup finds a bucket whose creation call was cut short).
    """
    kind = spec["type"]
    base = base_name(run_id, cell_id, expires_at)
    storage: dict[str, Any] = {"ready": True, "kind": kind, "created": True}
    if kind == EXPRESS:
        zones = _subnet_zones(ec2, subnet_ids)
        az_id = spec.get("az_id") or (zones[0][1] if zones else "")
        inside = [s for s, z in zones if z == az_id]
        if not inside:
            have = ", ".join(f"{s} ({z})" for s, z in zones) or "none"
            raise ValueError(
                f"storage {spec.get('label')!r}: no subnet of this stack is in {az_id!r} "
                f"(subnets: {have}); the directory bucket and the fleet must share a zone"
            )
        name = directory_bucket_name(base, az_id)
        if record:
            record(name)
        s3.create_bucket(
            Bucket=name,
            CreateBucketConfiguration={
                "Location": {"Type": "AvailabilityZone", "Name": az_id},
                "Bucket": {"Type": "Directory", "DataRedundancy": "SingleAvailabilityZone"},
            },
        )
        storage.update(az_id=az_id, subnet_ids=inside)
    else:
        name = base
        if record:
            record(name)
        args: dict[str, Any] = {"Bucket": name}
        if region != "us-east-1":
            args["CreateBucketConfiguration"] = {"LocationConstraint": region}
        s3.create_bucket(**args)
        s3.put_bucket_tagging(
            Bucket=name,
            Tagging={
                "TagSet": [
                    {"Key": keys.TAG_RUN, "Value": run_id},
                    {"Key": keys.TAG_CELL, "Value": cell_id},
                    {"Key": keys.TAG_EXPIRES, "Value": expires_at},
                    {"Key": keys.TAG_STACK, "Value": keys.stack_name()},
                ]
            },
        )
    storage["bucket"] = name
    storage["mount"] = {"kind": MOUNT_KIND, "bucket": name, "region": region}
    return storage


# --------------------------------------------------------------------------- mount


def mount_argv(mount: dict[str, Any], path: str) -> list[str]:
    """`mount-s3` for the cell's bucket at `path` (run as root by the instance wrapper).

    --allow-delete: the agent removes its files at the end of the slot (and fio's
    `unlink=1`); no --allow-overwrite: the plan refuses every workload that would
    overwrite (iofleet/plan/mountpoint.py), so an overwrite is an error, not a silent
    replace; no --cache: a local cache would measure the instance's disk, not S3;
    metadata TTL left at Mountpoint's default (strong consistency).
    """
    argv = ["mount-s3", "--allow-delete", "--region", str(mount["region"])]
    prefix = str(mount.get("prefix") or "")
    if prefix:
        argv += ["--prefix", prefix if prefix.endswith("/") else prefix + "/"]
    return [*argv, str(mount["bucket"]), path]


def unmount_argv(path: str) -> list[str]:
    return ["umount", path]


# --------------------------------------------------------------------------- delete


def empty_bucket(s3: Any, name: str) -> int:
    """Delete every object (and unfinished multipart upload) of bucket `name`."""
    deleted = 0
    token: dict[str, str] = {}
    while True:
        page = s3.list_objects_v2(Bucket=name, **token)
        batch = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for i in range(0, len(batch), 1000):
            s3.delete_objects(Bucket=name, Delete={"Objects": batch[i : i + 1000], "Quiet": True})
        deleted += len(batch)
        if not page.get("IsTruncated"):
            break
        token = {"ContinuationToken": page["NextContinuationToken"]}
    uploads = s3.list_multipart_uploads(Bucket=name).get("Uploads", [])
    for upload in uploads:
        s3.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    return deleted


def _code(exc: Exception) -> str:
    return str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))


def delete_bucket(s3: Any, name: str) -> str:
    """Empty and delete one of our buckets: "deleted", or "gone" if it no longer exists.
    Refuses (ValueError) a name this stack does not make."""
    if not is_ours(name):
        raise ValueError(f"{name!r} is not a bucket of stack {keys.stack_name()!r}")
    try:
        empty_bucket(s3, name)
        s3.delete_bucket(Bucket=name)
    except Exception as exc:
        if _code(exc) in ("NoSuchBucket", "404"):
            return "gone"
        raise
    return "deleted"


def delete_cell_storage(s3: Any, storage: dict[str, Any]) -> str | None:
    """The cell cleanup's part: delete the bucket PrepareCell created, if any."""
    if storage.get("kind") in KINDS and storage.get("created") and storage.get("bucket"):
        return delete_bucket(s3, str(storage["bucket"]))
    return None


def delete_named(s3: Any, names: Iterable[str]) -> dict[str, str]:
    return {name: delete_bucket(s3, name) for name in names if is_ours(name)}


def our_buckets(s3: Any) -> list[str]:
    """This stack's buckets, general purpose and directory."""
    prefix = name_prefix()
    names = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
    token: dict[str, str] = {}
    while True:
        page = s3.list_directory_buckets(**token)
        names += [b["Name"] for b in page.get("Buckets", [])]
        if not page.get("ContinuationToken"):
            break
        token = {"ContinuationToken": page["ContinuationToken"]}
    return sorted({n for n in names if n.startswith(prefix) and is_ours(n)})


def sweep(s3: Any, now: datetime) -> dict[str, str]:
    """The janitor's part: delete this stack's buckets whose name says they expired."""
    out: dict[str, str] = {}
    for name in our_buckets(s3):
        when = name_expiry(name)
        if when is not None and when <= now:
            out[name] = delete_bucket(s3, name)
    return out
