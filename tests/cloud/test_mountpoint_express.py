"""Mountpoint for S3 on S3 Express One Zone directory buckets, through the deployed state machine.

Real: the state machine, PrepareCell / Launch / Cleanup / janitor Lambdas from their asset
zips with their unchanged boto3 code (botocore's own S3 Express endpoint rules and
CreateSession credentials), moto's EC2 placing each instance in its subnet's zone, the
agents running real fio, ingest, Trino reading the warehouse.

Stand-ins, each because moto 5.2.5 has no directory buckets (no CreateBucket with a
Directory configuration, no ListDirectoryBuckets, no CreateSession, no zonal endpoint):
tests/cloud/localcloud/s3express.py serves those in the moto server process, keeping each
directory bucket's objects in a plain moto bucket of another moto account, and checks the
directory-bucket rules AWS documents (name, zone, DataRedundancy, empty before delete,
a session per bucket). The instance's `mount-s3` is hooks.MOUNT_S3_SHIM (no Mountpoint
here): it opens a session on the bucket, checks it exists, leaves a marker object and
bind-mounts an empty directory. Only AWS shows the real mount and Express's latency.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from trino_client import TrinoClient

from iofleet.aws import keys, s3mount
from tests.cloud.localcloud import s3express
from tests.cloud.localcloud.fixtures import LocalStack, poll

STACK = "IofleetStack"
FIO = {
    "fio": "mountpoint-seq-write-read-1m",
    "params": {"SIZE": "4m", "NUM_JOBS": 2, "DIRECT": 0},
}
DIRECTORY = {"Type": "Directory", "DataRedundancy": "SingleAvailabilityZone"}


def _zone_config(az_id: str) -> dict[str, Any]:
    return {"Location": {"Type": "AvailabilityZone", "Name": az_id}, "Bucket": DIRECTORY}


def _stack_zones(stack: LocalStack) -> list[tuple[str, str]]:
    """(subnet id, AZ ID) of the stack's subnets, in the template's order."""
    ids = [stack.d.resolve.ref(k) for k in stack.d.resources("AWS::EC2::Subnet")]
    found = stack.client("ec2").describe_subnets(SubnetIds=ids)["Subnets"]
    zone = {s["SubnetId"]: s["AvailabilityZoneId"] for s in found}
    return [(i, zone[i]) for i in ids]


def _directory_buckets(stack: LocalStack) -> set[str]:
    """What the stand-in lists (ListDirectoryBuckets through the control endpoint)."""
    return {b["Name"] for b in stack.client("s3").list_directory_buckets()["Buckets"]}


def _backing_buckets(stack: LocalStack) -> set[str]:
    """The moto buckets holding directory buckets' objects (the stand-in's own account)."""
    s3 = boto3.client(
        "s3", endpoint_url=stack.d.client("s3").meta.endpoint_url, region_name="us-east-1"
    )

    def to_backing_account(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = s3express.BACKING_ACCOUNT

    s3.meta.events.register("before-sign.s3.ListBuckets", to_backing_account)
    return {b["Name"] for b in s3.list_buckets()["Buckets"]}


def _log(stack: LocalStack) -> list[dict[str, Any]]:
    path = stack.state_dir / s3express.LOG
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _zone_ids(stack: LocalStack) -> dict[str, str]:
    zones = stack.client("ec2").describe_availability_zones()["AvailabilityZones"]
    return {z["ZoneName"]: z["ZoneId"] for z in zones}


def _instances(stack: LocalStack, run_id: str) -> list[dict[str, Any]]:
    out = stack.client("ec2").describe_instances(
        Filters=[{"Name": f"tag:{keys.TAG_RUN}", "Values": [run_id]}]
    )
    return [i for r in out["Reservations"] for i in r["Instances"]]


def _tag(instance: dict[str, Any], key: str) -> str:
    return next(t["Value"] for t in instance.get("Tags", []) if t["Key"] == key)


def _mount_argv(stack: LocalStack, instance_id: str) -> list[str] | None:
    path = stack.state_dir / "instances" / instance_id / "mount-s3.json"
    return json.loads(path.read_text()) if path.exists() else None


def _matrix(stack: LocalStack, name: str, storage: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "instance_types": ["m6i.large"],
        "ami_id": stack.ami,
        "storage": storage,
        "workloads": [FIO],
        "parallelism": [2],
        "slot_timeout_s": 600,
    }


def _run_id(stack: LocalStack, arn: str) -> str | None:
    try:
        return stack.run_id_of(arn)
    except Exception:  # noqa: BLE001 - not written yet
        return None


def test_each_express_cell_gets_a_directory_bucket_in_its_zone_and_its_slots_run_there(
    local_stack: LocalStack, trino_server: Any
) -> None:
    # given: two Express storages, one in the first subnet's zone (the default), one in
    # another zone of the stack, each with a fleet of 2
    zones = _stack_zones(local_stack)
    first = zones[0][1]
    other = next(z for _, z in zones if z != first)
    storage = [
        {"type": "s3express-mountpoint", "label": "sx-first"},
        {"type": "s3express-mountpoint", "label": "sx-other", "az_id": other},
    ]
    log_before = len(_log(local_stack))
    # when: the execution runs to its end and ingest has drained
    arn = local_stack.start(_matrix(local_stack, "express", storage))
    desc = local_stack.wait(arn, timeout_s=600)
    run_id = local_stack.run_id_of(arn)
    local_stack.esm.wait_drained()
    cells = {c["sk"]: c for c in local_stack.items(run_id, "cell#")}
    failures = [e for e in local_stack.history(arn) if "Failed" in e["type"]]
    assert {c.get("status") for c in cells.values()} == {"SUCCEEDED"}, (cells, failures)
    # then: each cell had its own directory bucket of this stack, named for its zone
    bucket_of = {c["sk"].split("#", 1)[1]: c["storage_bucket"] for c in cells.values()}
    assert len(set(bucket_of.values())) == 2
    assert sorted(b.rsplit("--", 2)[1] for b in bucket_of.values()) == sorted([first, other])
    assert all(s3mount.is_ours(b, STACK) for b in bucket_of.values())
    # and: the stand-in created them from PrepareCell's request, and the instances opened
    # sessions on them and wrote to them (the mount's marker) with the instance role
    calls = _log(local_stack)[log_before:]
    for bucket in bucket_of.values():
        mine = [c for c in calls if c["bucket"] == bucket]
        assert {"op": "CreateBucket", "status": 200} in [
            {"op": c["op"], "status": c["status"]} for c in mine
        ]
        writers = {c["caller"] for c in mine if c["op"] == "PutObject" and c["status"] == 200}
        assert writers and "testing" not in writers, mine  # the Lambdas sign as "testing"
        assert all(c["session"] for c in mine if c["op"] == "PutObject")
    # and: every slot ran in its cell's zone and mounted its cell's directory bucket
    zone_id = _zone_ids(local_stack)
    instances = [
        i for i in _instances(local_stack, run_id) if _mount_argv(local_stack, i["InstanceId"])
    ]
    assert len(instances) == 4
    for inst in instances:
        bucket = bucket_of[_tag(inst, keys.TAG_CELL)]
        assert zone_id[inst["Placement"]["AvailabilityZone"]] == bucket.rsplit("--", 2)[1]
        argv = _mount_argv(local_stack, inst["InstanceId"])
        assert argv is not None and argv[-2:] == [bucket, "/mnt/iofleet"], argv
    # and: every slot measured and its rows are in the warehouse (fio wrote then read 8 MiB)
    trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
    slots = trino.execute(
        f"SELECT cell_id, slot_index, storage_type, status FROM slots WHERE run_id = '{run_id}'"
    ).rows
    assert sorted(tuple(r) for r in slots) == sorted(
        (cell, i, "s3express-mountpoint", "SUCCEEDED") for cell in bucket_of for i in (0, 1)
    )
    io = trino.execute(
        "SELECT cell_id, slot_index, direction, sum(io_bytes) FROM fio_results "
        f"WHERE run_id = '{run_id}' GROUP BY 1, 2, 3"
    ).rows
    assert sorted(tuple(r) for r in io) == sorted(
        (cell, i, d, 2 * 4 * 1024 * 1024)
        for cell in bucket_of
        for i in (0, 1)
        for d in ("read", "write")
    )
    # and: after cleanup the directory buckets and their objects are gone
    assert not set(bucket_of.values()) & _directory_buckets(local_stack)
    backing = {s3express.backing_name(b) for b in bucket_of.values()}
    assert not backing & _backing_buckets(local_stack)
    deletes = [c for c in _log(local_stack)[log_before:] if c["op"] == "DeleteBucket"]
    assert sorted(c["bucket"] for c in deletes if c["status"] == 204) == sorted(bucket_of.values())
    assert local_stack.live_instances(run_id) == []
    assert desc["status"] == "SUCCEEDED", json.dumps(failures, default=str)[:3000]


def test_aborted_express_run_empties_and_deletes_its_directory_bucket(
    local_stack: LocalStack,
) -> None:
    # given: a fleet of 2 whose slot 1 never runs its agent, slot 0 mounts (leaves a marker)
    local_stack.set_faults(
        [{"payload_key_prefix": "control/express-abort-", "slot": 1, "kind": "hang"}]
    )
    try:
        storage = [{"type": "s3express-mountpoint", "label": "sx"}]
        arn = local_stack.start(_matrix(local_stack, "express-abort", storage))
        run_id = poll(lambda: _run_id(local_stack, arn), timeout_s=120, what="plan written")
        poll(
            lambda: [i for i in local_stack.all_instances(run_id) if _mount_argv(local_stack, i)],
            timeout_s=300,
            what="slot 0 mounted",
        )
        (cell,) = local_stack.items(run_id, "cell#")
        bucket = cell["storage_bucket"]
        s3 = local_stack.client("s3")
        assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] >= 1
        # when: the execution is stopped and EventBridge delivers the status change
        local_stack.client("stepfunctions").stop_execution(executionArn=arn, cause="test")
        assert local_stack.wait(arn)["status"] == "ABORTED"
        ((result, error),) = local_stack.d.deliver_event(
            local_stack.d.execution_status_event(arn, "ABORTED", "test")
        )
    finally:
        local_stack.set_faults([])
    # then: the abort rule's cleanup emptied and deleted the directory bucket
    assert error is None and result["buckets"] == {bucket: "deleted"}, result
    assert bucket not in _directory_buckets(local_stack)
    assert s3express.backing_name(bucket) not in _backing_buckets(local_stack)


def test_janitor_deletes_this_stacks_expired_directory_bucket_and_keeps_the_fresh_one(
    local_stack: LocalStack,
) -> None:
    s3 = local_stack.client("s3")
    zone = _stack_zones(local_stack)[0][1]
    now = datetime.now(UTC)
    stamp = lambda when: when.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    names = [
        s3mount.directory_bucket_name(
            s3mount.base_name("janitor-x", cell, stamp(when), stack=STACK), zone
        )
        for cell, when in (("c0", now - timedelta(hours=1)), ("c1", now + timedelta(hours=1)))
    ]
    expired, fresh = names
    for name in names:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration=_zone_config(zone))
        s3.put_object(Bucket=name, Key="iofleet-x/c/slot-0000/data.0.0", Body=b"x")
    try:
        out, error = local_stack.d.invoke("janitor", {})
        assert error is None and out["buckets"] == {expired: "deleted"}, out
        assert expired not in _directory_buckets(local_stack)
        assert fresh in _directory_buckets(local_stack)
        assert s3.list_objects_v2(Bucket=fresh)["KeyCount"] == 1
    finally:
        s3mount_delete(s3, fresh)


def s3mount_delete(s3: Any, name: str) -> None:
    for obj in s3.list_objects_v2(Bucket=name).get("Contents", []):
        s3.delete_object(Bucket=name, Key=obj["Key"])
    s3.delete_bucket(Bucket=name)


# --------------------------------------------------------------------------- the stand-in's rules

GOOD = "ifl-probe-{n}--{az}--x-s3"


@pytest.fixture
def zone(local_stack: LocalStack) -> Iterator[str]:
    yield _stack_zones(local_stack)[0][1]


PROBES = Path(__file__).resolve().parents[1] / "data" / "probes" / "s3express"
BAD_CREATES = json.loads((PROBES / "create_bucket.json").read_text())["probes"]


@pytest.mark.parametrize("probe", BAD_CREATES, ids=[p["why"] for p in BAD_CREATES])
def test_a_bad_directory_bucket_request_fails_as_on_aws_and_creates_nothing(
    local_stack: LocalStack, zone: str, probe: dict[str, Any]
) -> None:
    s3 = local_stack.client("s3")
    bucket = probe["name"].format(az=zone, n=re.sub("[^a-z0-9]+", "-", probe["why"]))
    config = probe["config"]
    args: dict[str, Any] = {"Bucket": bucket}
    if config == "another zone":
        config = {
            "Location": {"Name": next(z for z in s3express.region_zones("us-east-1") if z != zone)}
        }
    if config != "none":
        good = _zone_config(zone)
        for part, overrides in (config or {}).items():
            merged = {**good[part], **overrides}
            good[part] = {k: v for k, v in merged.items() if v is not None}
        args["CreateBucketConfiguration"] = good
    with pytest.raises(s3.exceptions.ClientError) as caught:
        s3.create_bucket(**args)
    assert caught.value.response["Error"]["Code"] == probe["code"], caught.value
    assert bucket not in _directory_buckets(local_stack)
    assert s3express.backing_name(bucket) not in _backing_buckets(local_stack)


def test_the_zonal_endpoint_needs_the_buckets_own_session_and_zone(
    local_stack: LocalStack, zone: str
) -> None:
    s3 = local_stack.client("s3")
    bucket, other = (GOOD.format(n=f"zonal{i}", az=zone) for i in (1, 2))
    for name in (bucket, other):
        s3.create_bucket(Bucket=name, CreateBucketConfiguration=_zone_config(zone))
    try:
        s3.put_object(Bucket=bucket, Key="k", Body=b"payload")
        # a second identical create, and a delete of a non-empty bucket, refused
        with pytest.raises(s3.exceptions.ClientError) as again:
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=_zone_config(zone))
        assert again.value.response["Error"]["Code"] == "BucketAlreadyOwnedByYou"
        with pytest.raises(s3.exceptions.ClientError) as full:
            s3.delete_bucket(Bucket=bucket)
        assert full.value.response["Error"]["Code"] == "BucketNotEmpty"
        endpoint = s3.meta.endpoint_url
        token = s3.create_session(Bucket=bucket)["Credentials"]["SessionToken"]
        other_token = s3.create_session(Bucket=other)["Credentials"]["SessionToken"]
        host = f"{bucket}.s3express-{zone}.us-east-1.amazonaws.com"
        # the zonal endpoint (virtual-host style) with the bucket's session reads the object
        got = requests.get(
            f"{endpoint}/k", headers={"Host": host, "x-amz-s3session-token": token}, timeout=30
        )
        assert (got.status_code, got.content) == (200, b"payload")
        # no session, another bucket's session, another zone's endpoint: refused
        bare = requests.get(f"{endpoint}/{bucket}/k", timeout=30)
        assert bare.status_code == 403 and b"AccessDenied" in bare.content
        wrong = requests.get(
            f"{endpoint}/{bucket}/k", headers={"x-amz-s3session-token": other_token}, timeout=30
        )
        assert wrong.status_code == 403 and b"AccessDenied" in wrong.content
        # a ReadOnly session reads but does not write
        reader = s3.create_session(Bucket=bucket, SessionMode="ReadOnly")["Credentials"]
        headers = {"Host": host, "x-amz-s3session-token": reader["SessionToken"]}
        assert requests.get(f"{endpoint}/k", headers=headers, timeout=30).status_code == 200
        put = requests.put(f"{endpoint}/k2", data=b"x", headers=headers, timeout=30)
        assert put.status_code == 403 and b"AccessDenied" in put.content
        another = next(z for z in s3express.region_zones("us-east-1") if z != zone)
        elsewhere = host.replace(f"s3express-{zone}", f"s3express-{another}")
        lost = requests.get(
            f"{endpoint}/k", headers={"Host": elsewhere, "x-amz-s3session-token": token}, timeout=30
        )
        assert lost.status_code == 404 and b"NoSuchBucket" in lost.content
        # and: a directory bucket never shows in the account's ListBuckets
        names = {b["Name"] for b in s3.list_buckets()["Buckets"]}
        assert not {bucket, other, s3express.backing_name(bucket)} & names
    finally:
        s3.delete_object(Bucket=bucket, Key="k")
        for name in (bucket, other):
            s3.delete_bucket(Bucket=name)
    assert not {bucket, other} & _directory_buckets(local_stack)
