"""Mountpoint for S3 storage per cell: PrepareCell creates the bucket, cleanup (cell, run,
abort rule) and the janitor empty and delete it. Against a moto server; S3 Express One Zone
directory buckets through the local cloud's server-side stand-in
(tests/cloud/localcloud/s3express.py, installed in this process's moto server: moto has
none; it says what it cannot show), reached by the unchanged boto3 client."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from iofleet.aws import cell as cell_logic
from iofleet.aws import keys, s3mount
from iofleet.aws.launch import Backoff, LaunchEnv
from iofleet.aws.launch import launch as launch_logic
from lambdas.cleanup import handler as cleanup
from lambdas.janitor import handler as janitor
from lambdas.launch import handler as launch
from lambdas.prepare_cell import handler as prepare
from tests.cloud.localcloud import s3express
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext
from tests.unit.lambdas.test_fleet_handlers import ROLE_ID, TOKEN, _planned
from tests.unit.lambdas.test_fleet_handlers import network as network  # noqa: F401 - the fixture

EXPIRES = "2026-11-24T02:00:00Z"


@pytest.fixture(autouse=True)
def _directory_buckets(moto_endpoint: str) -> None:
    s3express.install()  # the server runs in this process


def _directory_zones(s3: Any) -> dict[str, str]:
    """Directory bucket -> its zone, as ListDirectoryBuckets and the stand-in know them."""
    names = {b["Name"] for b in s3.list_directory_buckets()["Buckets"]}
    return {n: s3express.STATE.buckets[n]["az_id"] for n in names}


def _matrix(storage: dict[str, Any], ami: str) -> dict[str, Any]:
    return {
        "name": f"mp-{uuid.uuid4().hex[:8]}",
        "instance_types": ["m6i.large"],
        "ami_id": ami,
        "storage": [storage],
        "workloads": [{"fio": "mountpoint-seq-write-read-1m", "params": {"SIZE": "64m"}}],
        "parallelism": [1, 2],
    }


def _bucket_exists(s3: Any, name: str) -> bool:
    return name in {b["Name"] for b in s3.list_buckets()["Buckets"]}


def _fill(s3: Any, name: str, n: int = 3) -> None:
    """What slots leave behind: objects under the slots' prefixes and an unfinished upload."""
    for i in range(n):
        s3.put_object(Bucket=name, Key=f"iofleet-run/c/slot-{i:04d}/data.{i}.0", Body=b"x" * 10)
    s3.create_multipart_upload(Bucket=name, Key="iofleet-run/c/slot-0000/unfinished")


def test_prepare_creates_a_tagged_bucket_per_cell_and_cleanup_empties_and_deletes_it(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    s3 = cloud.client("s3")
    run = _planned(context, _matrix({"type": "s3-mountpoint", "label": "s3"}, network["ami"]))
    cells = run["cells"]
    prepared = [
        prepare.handler({"action": "prepare", "run_id": run["run_id"], "cell": c}, context)
        for c in cells[:1]
    ]
    storage = prepared[0]["storage"]
    name = storage["bucket"]
    # the bucket: this stack's name prefix, its own per cell, tagged for cleanup and janitor
    assert name.startswith(s3mount.name_prefix()) and _bucket_exists(s3, name)
    tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=name)["TagSet"]}
    assert tags[keys.TAG_RUN] == run["run_id"] and tags[keys.TAG_CELL] == cells[0]["cell_id"]
    assert tags[keys.TAG_STACK] == keys.stack_name() and keys.TAG_EXPIRES in tags
    assert s3mount.base_name(run["run_id"], cells[1]["cell_id"], EXPIRES)[-10:] != name[-10:]
    item = cloud.item(f"run#{run['run_id']}", f"cell#{cells[0]['cell_id']}")
    assert item is not None and item["storage_bucket"]["S"] == name
    # the slot's instance mounts it: mount-s3 installed in user-data, the target says how
    out = launch.handler(
        {
            "mode": "slot",
            "run_id": run["run_id"],
            "cell_id": cells[0]["cell_id"],
            "slot_index": 0,
            "storage": storage,
            "task_token": TOKEN,
        },
        context,
    )
    user_data = base64.b64decode(
        cloud.client("ec2").describe_instance_attribute(
            InstanceId=out["instance_id"], Attribute="userData"
        )["UserData"]["Value"]
    ).decode()
    assert "mountpoint-s3-release/latest/$mount_s3_arch/mount-s3.deb" in user_data
    payload = json.loads(cloud.text(out["payload_key"]))
    assert payload["slot"]["target"]["mount"] == {
        "kind": "mountpoint-s3",
        "bucket": name,
        "region": "us-east-1",
    }
    # when: slots wrote objects, then the cell ends
    _fill(s3, name)
    done = cleanup.handler(
        {
            "scope": "cell",
            "outcome": "SUCCEEDED",
            "run_id": run["run_id"],
            "cell": cells[0],
            "prepared": {"result": prepared[0]},
        },
        context,
    )
    # then: the bucket and everything in it are gone
    assert done["file_system"] == "deleted"
    assert not _bucket_exists(s3, name)


def test_abort_rule_deletes_the_buckets_of_the_run_even_when_prepare_did_not_return(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    s3 = cloud.client("s3")
    matrix = _matrix({"type": "s3-mountpoint", "label": "s3"}, network["ami"])
    run = _planned(context, matrix)
    names = [
        prepare.handler({"action": "prepare", "run_id": run["run_id"], "cell": c}, context)[
            "storage"
        ]["bucket"]
        for c in run["cells"]
    ]
    for name in names:
        _fill(s3, name)
    # a bucket of another stack, holding the same run's name in its tags: not ours
    foreign = f"{s3mount.name_prefix('SomeoneElsesStack')}202601010000-0123456789"
    s3.create_bucket(Bucket=foreign)
    event = {
        "source": "aws.states",
        "detail": {
            "status": "ABORTED",
            "executionArn": f"arn:aws:states:us-east-1:123456789012:execution:sm:{matrix['name']}",
        },
    }
    out = cleanup.handler(event, context)
    assert out["status"] == "ABORTED"
    assert out["buckets"] == {n: "deleted" for n in names}
    assert not any(_bucket_exists(s3, n) for n in names)
    assert _bucket_exists(s3, foreign)


def test_janitor_deletes_only_this_stacks_expired_buckets(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    s3 = cloud.client("s3")
    now = datetime.now(UTC)
    stamp = lambda when: when.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    suffix = uuid.uuid4().hex[:6]
    expired = s3mount.base_name(f"r-{suffix}", "c0", stamp(now - timedelta(hours=1)))
    fresh = s3mount.base_name(f"r-{suffix}", "c1", stamp(now + timedelta(hours=1)))
    theirs = s3mount.base_name(
        f"r-{suffix}", "c2", stamp(now - timedelta(hours=1)), stack="SomeoneElsesStack"
    )
    unrelated = f"someone-{suffix}"
    for name in (expired, fresh, theirs, unrelated):
        s3.create_bucket(Bucket=name)
        _fill(s3, name, 2)
    out = janitor.handler({}, context)
    assert out["buckets"] == {expired: "deleted"}
    assert not _bucket_exists(s3, expired)
    assert all(_bucket_exists(s3, n) for n in (fresh, theirs, unrelated))
    for name in (fresh, theirs, unrelated):  # tidy the shared moto server
        s3mount.empty_bucket(s3, name)
        s3.delete_bucket(Bucket=name)


def _two_zones(cloud: Cloud) -> tuple[list[str], dict[str, str]]:
    ec2 = cloud.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    zones = ec2.describe_availability_zones()["AvailabilityZones"][:2]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.1.{i}.0/24", AvailabilityZone=z["ZoneName"])[
            "Subnet"
        ]
        for i, z in enumerate(zones)
    ]
    return [s["SubnetId"] for s in subnets], {
        s["SubnetId"]: s["AvailabilityZoneId"] for s in subnets
    }


def test_express_bucket_is_a_directory_bucket_in_the_fleets_zone_and_the_fleet_stays_there(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    s3 = cloud.client("s3")
    before = _directory_zones(s3)
    ec2 = cloud.client("ec2")
    subnets, zone_of = _two_zones(cloud)
    second_zone = zone_of[subnets[1]]
    matrix = _matrix(
        {"type": "s3express-mountpoint", "label": "s3x", "az_id": second_zone}, network["ami"]
    )
    run = _planned(context, matrix)
    cell = run["cells"][0]
    prepared = cell_logic.prepare(
        {"run_id": run["run_id"], "cell": cell},
        s3=s3,
        ddb=cloud.client("dynamodb"),
        efs=None,
        fsx=None,
        ec2=ec2,
        subnet_ids=subnets,
        bucket=cloud.bucket,
        table=cloud.table,
        region="us-east-1",
        expires_at=EXPIRES,
    )
    storage = prepared["storage"]
    name = storage["bucket"]
    # the name S3 requires, in the zone asked for; only that zone's subnet for the fleet
    assert name == s3mount.directory_bucket_name(
        s3mount.base_name(run["run_id"], cell["cell_id"], EXPIRES), second_zone
    )
    assert name.endswith(f"--{second_zone}--x-s3") and len(name) <= 63
    assert {k: v for k, v in _directory_zones(s3).items() if k not in before} == {name: second_zone}
    assert storage["subnet_ids"] == [subnets[1]] and storage["az_id"] == second_zone
    # when: slot 0 launches (its rotation starts at the first subnet, the other zone)
    env = LaunchEnv(
        bucket=cloud.bucket,
        table=cloud.table,
        region="us-east-1",
        launch_template_id=network_template(cloud),
        subnet_ids=tuple(subnets),
        agent_bucket="a",
        agent_key="k",
        instance_role_id=ROLE_ID,
    )
    out = launch_logic(
        {
            "mode": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": 0,
            "storage": storage,
            "task_token": TOKEN,
        },
        s3=cloud.client("s3"),
        ec2=ec2,
        ssm=None,
        ddb=cloud.client("dynamodb"),
        env=env,
        backoff=Backoff(attempts=1),
    )
    # then: it runs in the bucket's zone
    assert out["subnet_id"] == subnets[1]
    # and the cell's cleanup empties and deletes the directory bucket
    _fill(s3, name)
    cleaned = cell_logic_cleanup(cloud, run, cell, prepared, s3)
    assert cleaned["file_system"] == "deleted" and name not in _directory_zones(s3)
    # and the moto bucket that held its objects (the stand-in's account) is gone too
    from moto.s3.models import s3_backends

    assert s3express.backing_name(name) not in s3_backends[s3express.BACKING_ACCOUNT]["aws"].buckets


def network_template(cloud: Cloud) -> str:
    import os

    return os.environ["LAUNCH_TEMPLATE_ID"]


def cell_logic_cleanup(
    cloud: Cloud, run: dict[str, Any], cell: dict[str, Any], prepared: dict[str, Any], s3: Any
) -> dict[str, Any]:
    from iofleet.aws.cleanup import cleanup_cell

    return cleanup_cell(
        {"run_id": run["run_id"], "cell": cell, "prepared": {"result": prepared}},
        ec2=cloud.client("ec2"),
        efs=None,
        ddb=cloud.client("dynamodb"),
        table=cloud.table,
        s3=s3,
    )


def test_express_in_a_zone_without_a_subnet_of_the_stack_creates_nothing(
    cloud: Cloud,
    network: dict[str, str],
    context: FakeLambdaContext,
) -> None:
    s3 = cloud.client("s3")
    before = _directory_zones(s3)
    subnets, zone_of = _two_zones(cloud)
    run = _planned(
        context,
        _matrix(
            {"type": "s3express-mountpoint", "label": "s3x", "az_id": "zzz9-az9"}, network["ami"]
        ),
    )
    with pytest.raises(ValueError, match="no subnet of this stack is in 'zzz9-az9'"):
        cell_logic.prepare(
            {"run_id": run["run_id"], "cell": run["cells"][0]},
            s3=s3,
            ddb=cloud.client("dynamodb"),
            efs=None,
            fsx=None,
            ec2=cloud.client("ec2"),
            subnet_ids=subnets,
            bucket=cloud.bucket,
            table=cloud.table,
            region="us-east-1",
            expires_at=EXPIRES,
        )
    assert _directory_zones(s3) == before


def test_mount_argv_and_names() -> None:
    mount = {"kind": "mountpoint-s3", "bucket": "ifl-x", "region": "eu-central-1", "prefix": "p"}
    assert s3mount.mount_argv(mount, "/mnt/iofleet") == [
        "mount-s3",
        "--allow-delete",
        "--region",
        "eu-central-1",
        "--prefix",
        "p/",
        "ifl-x",
        "/mnt/iofleet",
    ]
    name = s3mount.base_name("run", "cell", "2026-11-24T02:00:59Z")
    assert s3mount.name_expiry(name) == datetime(2026, 11, 24, 2, 0, tzinfo=UTC)
    assert s3mount.name_expiry(s3mount.directory_bucket_name(name, "euc1-az2")) is not None
    assert s3mount.name_expiry("ifl-notours") is None
    with pytest.raises(ValueError, match="is not a bucket of stack"):
        s3mount.delete_bucket(None, "someone-elses-bucket")


def test_user_data_installs_mount_s3_before_the_agent_only_for_mountpoint_cells(
    tmp_path: Any,
) -> None:
    import shutil
    import subprocess

    from iofleet.aws.userdata import AGENT_MARKER, UserDataParams, render_user_data

    params = dict(
        region="us-east-1",
        bucket="b",
        payload_key="control/r/c/slot-0000.json",
        agent_bucket="a",
        agent_key="k.zip",
        time_limit_s=60,
    )
    with_mount = render_user_data(UserDataParams(**params, mount_s3=True))  # type: ignore[arg-type]
    without = render_user_data(UserDataParams(**params))  # type: ignore[arg-type]
    assert "mount-s3" not in without
    install = with_mount.index('apt-get install -y -q "$AGENT_DIR/pkg/mount-s3.deb"')
    assert install < with_mount.index(AGENT_MARKER)  # untimed bootstrap, before the barrier
    assert (
        "amd64) mount_s3_arch=x86_64" in with_mount and "arm64) mount_s3_arch=arm64" in with_mount
    )
    script = tmp_path / "user-data.sh"
    script.write_text(with_mount)
    subprocess.run(["bash", "-n", str(script)], check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", str(script)], check=True)
