"""Launch Lambda logic: one instance per slot (or one for a cell's populate phase).

Idempotent: the RunInstances ClientToken is derived from run, cell, slot and
subnet, so a retried call or invocation returns the instance already launched
instead of a second one.

At fleet scale (docs/decisions.md, "The fleet launches in waves ..."; the
answer-by-answer table is in docs/internals.md, "Launching a fleet on AWS"):
- the fleet launches in waves (`launch_schedule`): the Fleet map waits each
  slot's `launch_after_s` before calling this, 20 calls every 10 s;
- RunInstances throttling (`RequestLimitExceeded`) and EC2's transient
  failures are retried here with exponential backoff and full jitter
  (botocore's own EC2 retries are off, so every retry passes through this loop
  and is recorded); when the budget of one invocation runs out,
  `LaunchThrottled` (`LaunchUnavailable`) is raised and the state machine
  retries the task (its own backoff, full jitter);
- a capacity error (`InsufficientInstanceCapacity`, `Unsupported` for the
  type in that AZ, a subnet out of addresses) moves the slot to the stack's
  next subnet (another AZ); when every subnet refused, `InsufficientCapacity`
  fails the slot with each subnet's answer;
- every retry is recorded on the slot item as it happens (`launch_retries`,
  `launch_retry_reasons`), and the launched slot's `subnet_id` and
  `availability_zone`.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from iofleet.agent.payload import CELL_FIELDS, MAX_SLOT_TIMEOUT_S
from iofleet.aws import ec2 as ec2_spec
from iofleet.aws import keys, s3mount
from iofleet.aws.ddb import set_attributes
from iofleet.aws.plan import find_cell, load_manifest
from iofleet.aws.userdata import UserDataParams, render_user_data
from iofleet.plan.hosts import HostPlan

EXPIRY_MARGIN = timedelta(hours=2)
BARRIER_TIMEOUT_S = 900  # after the last wave's launch (see barrier_timeout_s)

# The launch rate. EC2's documented token buckets (per account and Region): RunInstances is a
# mutating action (request bucket 200, refill 5/s) and is also resource-limited (1,000
# instances, refill 2/s). 20 calls every 10 s is 2 calls/s and 2 instances/s: the resource
# refill rate, and under half the request refill, whatever the fleet size.
LAUNCH_WAVE_SIZE = 20
LAUNCH_WAVE_INTERVAL_S = 10

THROTTLED = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException"})
# EC2's own transient failures (HTTP 5xx); botocore would retry them, but its EC2 retries are
# off (every retry is recorded here), so this loop retries them the same way as throttling.
# Safe: the ClientToken returns the instance if the failed call had launched it after all.
UNAVAILABLE = frozenset({"InternalError", "ServiceUnavailable", "Unavailable", "InternalFailure"})
# this subnet's AZ cannot take the instance now (or ever, for Unsupported); another AZ may
NO_CAPACITY = frozenset(
    {"InsufficientInstanceCapacity", "Unsupported", "InsufficientFreeAddressesInSubnet"}
)


class LaunchThrottled(Exception):  # noqa: N818 - the state machine's error name
    """RunInstances stayed throttled for this invocation's whole retry budget."""


class LaunchUnavailable(Exception):  # noqa: N818 - the state machine's error name
    """EC2 kept failing (5xx, or no answer) for this invocation's whole retry budget."""


class InsufficientCapacity(Exception):  # noqa: N818 - the state machine's error name
    """Every subnet of the stack refused the instance for lack of capacity."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: before retry k (0-based), sleep a uniformly
    random time in [0, min(cap_s, base_s * 2**k)]."""

    base_s: float = 1.0
    cap_s: float = 20.0
    attempts: int = 6  # RunInstances calls per subnet per invocation (worst case ~31 s asleep)

    def delay(self, retry: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_s, self.base_s * 2**retry))


def launch_schedule(fleet_size: int) -> list[dict[str, int]]:
    """The Fleet map's items: each slot with the seconds its launch waits (its wave)."""
    return [
        {"slot_index": i, "launch_after_s": (i // LAUNCH_WAVE_SIZE) * LAUNCH_WAVE_INTERVAL_S}
        for i in range(fleet_size)
    ]


def launch_spread_s(fleet_size: int) -> int:
    """Seconds between the first and the last wave of a fleet."""
    return max(0, (fleet_size - 1) // LAUNCH_WAVE_SIZE) * LAUNCH_WAVE_INTERVAL_S


def barrier_timeout_s(fleet_size: int) -> int:
    """The start barrier waits out the launch waves too: the first slot up must not give
    up on the last wave's slots."""
    return BARRIER_TIMEOUT_S + launch_spread_s(fleet_size)


@dataclass(frozen=True)
class LaunchEnv:
    bucket: str
    table: str
    region: str
    launch_template_id: str
    subnet_ids: tuple[str, ...]
    agent_bucket: str
    agent_key: str
    subnet_zones: tuple[str, ...] = field(default=())  # the AZ of each subnet, same order
    # the instance role's RoleId: with the instance id, the `aws:userid` its payload is keyed by
    instance_role_id: str = ""


def client_token(run_id: str, cell_id: str, name: str, subnet_id: str) -> str:
    """One token per (slot, subnet): a retry in the same subnet is idempotent, and moving to
    another subnet is a new request rather than a changed one (IdempotentParameterMismatch)."""
    return hashlib.sha256(f"{run_id}/{cell_id}/{name}/{subnet_id}".encode()).hexdigest()[:64]


def slot_time_limit(manifest: dict[str, Any]) -> int:
    """The run's slot_timeout_s, refused (one line) unless 1 to MAX_SLOT_TIMEOUT_S seconds."""
    value = manifest.get("slot_timeout_s", 7200)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_SLOT_TIMEOUT_S
    ):
        raise ValueError(
            f"run {manifest.get('run_id')!r}: slot_timeout_s must be an integer from 1 to "
            f"{MAX_SLOT_TIMEOUT_S}, got {value!r}"
        )
    return value


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
            "timeout_s": barrier_timeout_s(int(cell["fleet_size"])),
        },
        "results": {"kind": "s3", "bucket": env.bucket, "prefix": keys.RAW_PREFIX},
        "time_limit_s": slot_time_limit(manifest),
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


def _error_code(exc: Exception) -> str | None:
    """EC2's error code; for no answer at all (connection refused or reset, read timeout),
    the botocore exception's name, counted as UNAVAILABLE."""
    from botocore.exceptions import ConnectionError as NoConnection
    from botocore.exceptions import HTTPClientError

    if isinstance(exc, NoConnection | HTTPClientError):
        return type(exc).__name__
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = (response.get("Error") or {}).get("Code")
    return str(code) if code else None


def _unavailable(exc: Exception, code: str | None) -> bool:
    from botocore.exceptions import ConnectionError as NoConnection
    from botocore.exceptions import HTTPClientError

    return code in UNAVAILABLE or isinstance(exc, NoConnection | HTTPClientError)


@dataclass
class LaunchRecord:
    """Where this launch's retries and its outcome are written, as they happen: the slot
    item (a slot) or the cell item under `populate_` names (the populate instance)."""

    ddb: Any
    table: str
    key: dict[str, str]
    prefix: str = ""
    retries: list[str] = field(default_factory=list)

    def retry(self, why: str, refused_subnet: str | None = None) -> None:
        """One more refused call: the count and the reason, appended atomically (a retried
        invocation adds to what the earlier ones wrote); a subnet refused for capacity joins
        `launch_refused_subnets`."""
        self.retries.append(why)
        names = {
            "#why": f"{self.prefix}launch_retry_reasons",
            "#count": f"{self.prefix}launch_retries",
        }
        values: dict[str, Any] = {
            ":none": {"L": []},
            ":why": {"L": [{"S": why[:500]}]},
            ":one": {"N": "1"},
        }
        expression = "SET #why = list_append(if_not_exists(#why, :none), :why) ADD #count :one"
        if refused_subnet:
            names["#refused"] = f"{self.prefix}launch_refused_subnets"
            values[":subnet"] = {"SS": [refused_subnet]}
            expression += ", #refused :subnet"
        self.ddb.update_item(
            TableName=self.table,
            Key={k: {"S": v} for k, v in self.key.items()},
            UpdateExpression=expression,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def refused_subnets(self) -> set[str]:
        """Subnets an earlier invocation for this slot found without capacity."""
        item = self.ddb.get_item(
            TableName=self.table,
            Key={k: {"S": v} for k, v in self.key.items()},
            ProjectionExpression="#refused",
            ExpressionAttributeNames={"#refused": f"{self.prefix}launch_refused_subnets"},
            ConsistentRead=True,
        ).get("Item", {})
        return set(item.get(f"{self.prefix}launch_refused_subnets", {}).get("SS", []))

    def launched(self, attributes: dict[str, str]) -> None:
        set_attributes(
            self.ddb, self.table, self.key, {f"{self.prefix}{k}": v for k, v in attributes.items()}
        )


def run_instance(
    ec2: Any,
    args: dict[str, Any],
    *,
    token: Callable[[str], str],
    subnets: list[tuple[str, str]],
    record: LaunchRecord,
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """RunInstances in the first subnet that has capacity, retrying throttling and EC2's
    transient failures in place.

    `subnets`: (subnet id, AZ name or "") in the order to try. Raises LaunchThrottled,
    LaunchUnavailable or InsufficientCapacity (their messages name every answer) when the
    launch cannot be done; any other error as it came.
    """
    rng = rng or random.SystemRandom()
    refused: list[str] = []
    for subnet_id, zone in subnets:
        where = f"{subnet_id} ({zone})" if zone else subnet_id
        for attempt in range(backoff.attempts):
            try:
                out: dict[str, Any] = ec2.run_instances(
                    **args, SubnetId=subnet_id, ClientToken=token(subnet_id)
                )
                return out
            except Exception as exc:
                code = _error_code(exc)
                throttled = code in THROTTLED
                if throttled or _unavailable(exc, code):
                    record.retry(f"{code} in {where}")
                    if attempt + 1 == backoff.attempts:
                        what = "throttled" if throttled else "failing"
                        error = LaunchThrottled if throttled else LaunchUnavailable
                        raise error(
                            f"RunInstances still {what} ({code}) after {backoff.attempts} "
                            f"calls in {where}; {_retried(record)}"
                        ) from exc
                    sleep(backoff.delay(attempt, rng))
                    continue
                if code in NO_CAPACITY:
                    message = (getattr(exc, "response", {}).get("Error") or {}).get("Message", "")
                    refused.append(f"{where}: {code}: {message}".rstrip(": "))
                    record.retry(f"{code} in {where}", refused_subnet=subnet_id)
                    break
                raise
    raise InsufficientCapacity(
        f"no subnet had capacity for {args.get('InstanceType')}: {'; '.join(refused)}; "
        f"{_retried(record)}"
    )


def _retried(record: LaunchRecord) -> str:
    counts: dict[str, int] = {}
    for why in record.retries:
        code = why.split(" ", 1)[0]
        counts[code] = counts.get(code, 0) + 1
    detail = ", ".join(f"{n} {code}" for code, n in sorted(counts.items()))
    return f"launch retries: {len(record.retries)} ({detail})"


def subnet_order(
    env: LaunchEnv, index: int, refused: Collection[str] = ()
) -> list[tuple[str, str]]:
    """The stack's subnets starting at the slot's own (slots spread over AZs), then the rest;
    subnets an earlier invocation found without capacity go last. That way a retried
    invocation asks first where the earlier one may have launched, with the same
    ClientToken, and gets that instance back instead of launching a second one elsewhere."""
    zones = env.subnet_zones if len(env.subnet_zones) == len(env.subnet_ids) else ()
    pairs = [(s, zones[i] if zones else "") for i, s in enumerate(env.subnet_ids)]
    start = index % len(pairs)
    rotated = pairs[start:] + pairs[:start]
    return [p for p in rotated if p[0] not in refused] + [p for p in rotated if p[0] in refused]


def launch(
    event: dict[str, Any],
    *,
    s3: Any,
    ec2: Any,
    ssm: Any,
    ddb: Any,
    env: LaunchEnv,
    backoff: Backoff | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> dict[str, Any]:
    run_id, cell_id = event["run_id"], event["cell_id"]
    manifest = load_manifest(s3, env.bucket, run_id)
    cell = find_cell(manifest, cell_id)
    populate = event.get("mode") == "populate"
    name = "populate" if populate else keys.slot_name(int(event["slot_index"]))
    if not env.instance_role_id:
        raise ValueError("INSTANCE_ROLE_ID is not set: the launcher cannot key the payload")
    doc = instance_payload(event, manifest, cell, env)

    instance_type = cell["instance_type"]
    host = HostPlan.from_dict(cell.get("host"))  # the release the plan chose for the presets
    parameter = ec2_spec.ami_parameter(instance_type, host.release)
    image_id = manifest.get("ami_id") or ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    time_limit = slot_time_limit(manifest)
    user_data = render_user_data(
        UserDataParams(
            region=env.region,
            bucket=env.bucket,
            payload_key=keys.payload_dir(run_id, cell_id, name),
            agent_bucket=env.agent_bucket,
            agent_key=env.agent_key,
            time_limit_s=time_limit,
            host=host,
            lustre_client=cell["storage"].get("type") == "fsx-lustre",
            mount_s3=s3mount.is_mountpoint(cell["storage"]),
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
    # a directory bucket pins the cell to its zone: only the subnets PrepareCell chose there
    zone_subnets = (event.get("storage") or {}).get("subnet_ids")
    record = (
        LaunchRecord(ddb, env.table, keys.cell_item_key(run_id, cell_id), prefix="populate_")
        if populate
        else LaunchRecord(ddb, env.table, keys.slot_item_key(run_id, cell_id, index))
    )
    out = run_instance(
        ec2,
        {
            "LaunchTemplate": {"LaunchTemplateId": env.launch_template_id, "Version": "$Latest"},
            "ImageId": image_id,
            "InstanceType": instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": user_data,
            "BlockDeviceMappings": ec2_spec.block_device_mappings(cell["storage"]),
            "InstanceInitiatedShutdownBehavior": "terminate",
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tags},
                {"ResourceType": "volume", "Tags": tags},
            ],
        },
        token=lambda subnet_id: client_token(run_id, cell_id, name, subnet_id),
        subnets=[
            pair
            for pair in subnet_order(env, index, record.refused_subnets())
            if not zone_subnets or pair[0] in zone_subnets
        ],
        record=record,
        backoff=backoff or Backoff(),
        sleep=sleep,
        rng=rng,
    )
    instance = out["Instances"][0]
    instance_id = instance["InstanceId"]
    # Only now is the instance known, and with it the key its role may read
    # (`control/*/${aws:userid}.json`); the instance waits for it after its bootstrap.
    payload_key = keys.payload_key(
        run_id, cell_id, name, keys.owner_of(env.instance_role_id, instance_id)
    )
    placed = {
        "instance_id": instance_id,
        "payload_key": payload_key,
        "subnet_id": str(instance.get("SubnetId") or ""),
        "availability_zone": str((instance.get("Placement") or {}).get("AvailabilityZone") or ""),
    }
    # the slot item names its instance before the instance can read its payload and upload:
    # ingest accepts a slot's raw objects only from that instance (iofleet/aws/curate.py)
    record.launched({**placed, "status": "LAUNCHED"} if not populate else placed)
    s3.put_object(
        Bucket=env.bucket,
        Key=payload_key,
        Body=json.dumps(doc).encode(),
        ContentType="application/json",
    )
    return {**placed, "launch_retries": len(record.retries)}
