"""Launch Lambda logic: one instance per slot (or one for a cell's populate phase).

Idempotent: the RunInstances ClientToken is derived from run, cell and slot, so
a retried invocation returns the instance already launched instead of a second one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from iofleet.agent.payload import CELL_FIELDS
from iofleet.aws import ec2 as ec2_spec
from iofleet.aws import keys
from iofleet.aws.plan import find_cell, load_manifest
from iofleet.aws.userdata import UserDataParams, render_user_data
from iofleet.hosts import HostPlan

EXPIRY_MARGIN = timedelta(hours=2)


@dataclass(frozen=True)
class LaunchEnv:
    bucket: str
    table: str
    region: str
    launch_template_id: str
    subnet_ids: tuple[str, ...]
    agent_bucket: str
    agent_key: str


def client_token(run_id: str, cell_id: str, name: str) -> str:
    return hashlib.sha256(f"{run_id}/{cell_id}/{name}".encode()).hexdigest()[:64]


def expires_at(slot_timeout_s: int, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return (now + timedelta(seconds=slot_timeout_s) + EXPIRY_MARGIN).strftime("%Y-%m-%dT%H:%M:%SZ")


def instance_payload(
    event: dict[str, Any], manifest: dict[str, Any], cell: dict[str, Any], env: LaunchEnv
) -> dict[str, Any]:
    """The document an instance reads from S3: task token + the agent's slot payload."""
    populate = event.get("mode") == "populate"
    slot_index = 0 if populate else int(event["slot_index"])
    storage = event.get("storage") or {}
    slot = {
        "version": 1,
        "run_id": manifest["run_id"],
        "cell": {k: cell[k] for k in CELL_FIELDS},
        "slot_index": slot_index,
        "platform": "aws",
        "target": ec2_spec.target_for(cell["storage"], storage.get("mount")),
        "workloads": cell["workloads"],
        "barrier": {"kind": "none"}
        if populate
        else {
            "kind": "dynamodb",
            "table": env.table,
            "run_id": manifest["run_id"],
            "cell_id": cell["cell_id"],
            "parties": int(cell["fleet_size"]),
            "timeout_s": 900,
        },
        "results": {"kind": "s3", "bucket": env.bucket, "prefix": keys.RAW_PREFIX},
        "time_limit_s": int(manifest.get("slot_timeout_s", 7200)),
        "burst": cell.get("burst") or {"policy": "as-is", "actions": []},  # docs/expectations.md
    }
    return {
        "mode": "populate" if populate else "slot",
        "task_token": event.get("task_token"),
        "table": env.table,
        "heartbeat_s": int(event.get("heartbeat_s") or cell.get("heartbeat_s") or 600),
        "slot": slot,
        "populate_workloads": cell.get("populate_workloads", []) if populate else [],
    }


def launch(
    event: dict[str, Any], *, s3: Any, ec2: Any, ssm: Any, ddb: Any, env: LaunchEnv
) -> dict[str, Any]:
    run_id, cell_id = event["run_id"], event["cell_id"]
    manifest = load_manifest(s3, env.bucket, run_id)
    cell = find_cell(manifest, cell_id)
    populate = event.get("mode") == "populate"
    name = "populate" if populate else keys.slot_name(int(event["slot_index"]))
    doc = instance_payload(event, manifest, cell, env)
    payload_key = keys.payload_key(run_id, cell_id, name)
    s3.put_object(
        Bucket=env.bucket,
        Key=payload_key,
        Body=json.dumps(doc).encode(),
        ContentType="application/json",
    )

    instance_type = cell["instance_type"]
    host = HostPlan.from_dict(cell.get("host"))  # the release the plan chose for the presets
    parameter = ec2_spec.ami_parameter(instance_type, host.release)
    image_id = manifest.get("ami_id") or ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    time_limit = int(manifest.get("slot_timeout_s", 7200))
    user_data = render_user_data(
        UserDataParams(
            region=env.region,
            bucket=env.bucket,
            payload_key=payload_key,
            agent_bucket=env.agent_bucket,
            agent_key=env.agent_key,
            time_limit_s=time_limit,
            host=host,
        )
    )
    expiry = expires_at(time_limit)
    tags = [
        {"Key": "Name", "Value": f"iofleet {cell_id} {name}"},
        {"Key": keys.TAG_RUN, "Value": run_id},
        {"Key": keys.TAG_CELL, "Value": cell_id},
        {"Key": keys.TAG_SLOT, "Value": name},
        {"Key": keys.TAG_EXPIRES, "Value": expiry},
        {"Key": keys.TAG_STACK, "Value": keys.stack_name()},
    ]
    index = 0 if populate else int(event["slot_index"])
    out = ec2.run_instances(
        LaunchTemplate={"LaunchTemplateId": env.launch_template_id, "Version": "$Latest"},
        ImageId=image_id,
        InstanceType=instance_type,
        MinCount=1,
        MaxCount=1,
        SubnetId=env.subnet_ids[index % len(env.subnet_ids)],
        UserData=user_data,
        BlockDeviceMappings=ec2_spec.block_device_mappings(cell["storage"]),
        InstanceInitiatedShutdownBehavior="terminate",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": tags},
            {"ResourceType": "volume", "Tags": tags},
        ],
        ClientToken=client_token(run_id, cell_id, name),
    )
    instance_id = out["Instances"][0]["InstanceId"]
    if not populate:
        ddb.put_item(
            TableName=env.table,
            Item={
                **{k: {"S": v} for k, v in keys.slot_item_key(run_id, cell_id, index).items()},
                "status": {"S": "LAUNCHED"},
                "instance_id": {"S": instance_id},
                "payload_key": {"S": payload_key},
            },
        )
    return {"instance_id": instance_id, "payload_key": payload_key}
