"""Janitor logic: terminate / delete this stack's resources past their iofleet:expires-at.

Only resources tagged with this stack's `iofleet:stack` are considered, and an expiry
that cannot be read is "not mine": the janitor never deletes what it cannot vouch for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from iofleet.aws import fsx as fsx_cells
from iofleet.aws import keys, s3mount
from iofleet.aws.cleanup import LIVE_STATES, delete_file_system, terminate


def expired(value: str | None, now: datetime) -> bool:
    """True only for a readable expiry at or before `now`."""
    if not value:
        return False
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False  # unreadable: not an expiry we wrote, so not ours to delete
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when <= now


def sweep(
    *, ec2: Any, efs: Any, s3: Any = None, now: datetime | None = None, fsx: Any = None
) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    doomed: list[str] = []
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": "tag-key", "Values": [keys.TAG_EXPIRES]},
            {"Name": f"tag:{keys.TAG_STACK}", "Values": [keys.stack_name()]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
    )
    for page in pages:
        for res in page["Reservations"]:
            for inst in res["Instances"]:
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                if expired(tags.get(keys.TAG_EXPIRES), now):
                    doomed.append(inst["InstanceId"])
    terminate(ec2, doomed)
    file_systems: dict[str, str] = {}
    for page in efs.get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
            mine = keys.TAG_RUN in tags and tags.get(keys.TAG_STACK) == keys.stack_name()
            if mine and expired(tags.get(keys.TAG_EXPIRES), now):
                file_systems[fs["FileSystemId"]] = delete_file_system(efs, fs["FileSystemId"])
    if fsx is not None:  # FSx for OpenZFS / Lustre (iofleet/aws/fsx.py), same rules
        for found in fsx_cells.tagged(fsx):
            if expired(found["tags"].get(keys.TAG_EXPIRES), now):
                file_systems[found["id"]] = fsx_cells.delete(fsx, found["id"])
    # Mountpoint buckets: this stack's name prefix, the expiry their name carries
    buckets = s3mount.sweep(s3, now) if s3 is not None else {}
    return {"terminated": doomed, "file_systems": file_systems, "buckets": buckets}
