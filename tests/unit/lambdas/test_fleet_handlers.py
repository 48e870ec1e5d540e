"""prepare_cell, launch, cleanup and janitor handlers against moto server (EC2, EFS, S3, DynamoDB)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from iofleet.agent.barrier import BarrierError
from iofleet.aws import barrier, keys
from iofleet.aws.userdata import parse_agent_command
from lambdas.cleanup import handler as cleanup
from lambdas.janitor import handler as janitor
from lambdas.launch import handler as launch
from lambdas.plan import handler as plan
from lambdas.prepare_cell import handler as prepare
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext, example

TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAf-test-token"
ROLE_ID = "AROAEXAMPLEINSTANCE1"  # the instance role's RoleId (INSTANCE_ROLE_ID)


@pytest.fixture
def network(
    cloud: Cloud, moto_images: list[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    ec2 = cloud.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(GroupName=f"sg-{cloud.table}", Description="t", VpcId=vpc)[
        "GroupId"
    ]
    lt = ec2.create_launch_template(
        LaunchTemplateName=f"lt-{cloud.table}",
        LaunchTemplateData={
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1}
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    ami = moto_images[0]
    monkeypatch.setenv("LAUNCH_TEMPLATE_ID", lt)
    monkeypatch.setenv("SUBNET_IDS", subnet)
    monkeypatch.setenv("STORAGE_SECURITY_GROUP", sg)
    monkeypatch.setenv("AGENT_BUCKET", "cdk-assets")
    monkeypatch.setenv("AGENT_KEY", "agent.zip")
    monkeypatch.setenv("INSTANCE_ROLE_ID", ROLE_ID)
    return {"vpc": vpc, "subnet": subnet, "sg": sg, "ami": ami}


def _planned(context: FakeLambdaContext, matrix: dict[str, Any]) -> dict[str, Any]:
    out = plan.handler(
        {
            "matrix": matrix,
            "execution_arn": f"arn:aws:states:us-east-1:123456789012:execution:sm:{matrix['name']}",
            "started_at": "2026-11-21T05:12:00Z",
        },
        context,
    )
    assert out["valid"], out
    return out


def _seed000(ami: str) -> dict[str, Any]:
    matrix = example("seed000-ebs-optimized-ceiling.json")
    matrix["name"] = f"seed000-{uuid.uuid4().hex[:8]}"  # one run id per test: EC2 in moto is shared
    matrix["instance_types"] = ["c6a.xlarge"]
    matrix["parallelism"] = [2]
    matrix["ami_id"] = ami
    # moto 5.2.5 drops Iops from RunInstances block-device mappings, so io1/io2
    # cannot launch there; the io2 mapping itself is checked in tests/unit/test_aws_ec2.py
    matrix["storage"] = [
        {
            "type": "ebs",
            "label": "gp3-16k",
            "volume_type": "gp3",
            "size_gib": 100,
            "iops": 16000,
            "throughput_mibps": 1000,
        }
    ]
    return matrix


def _instances(
    cloud: Cloud, run_id: str, states: tuple[str, ...] = ("pending", "running")
) -> list[dict[str, Any]]:
    res = cloud.client("ec2").describe_instances(
        Filters=[
            {"Name": f"tag:{keys.TAG_RUN}", "Values": [run_id]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]
    )["Reservations"]
    return [i for r in res for i in r["Instances"]]


def _launch_slot(
    context: FakeLambdaContext, run: dict[str, Any], cell: dict[str, Any], slot: int
) -> dict[str, Any]:
    """The RunSlot task's launch for one slot of a cell, no storage to mount."""
    out: dict[str, Any] = launch.handler(
        {
            "mode": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": slot,
            "storage": {},
            "task_token": TOKEN,
        },
        context,
    )
    return out


def _cleanup_failed_cell(
    context: FakeLambdaContext, run: dict[str, Any], cell: dict[str, Any], error: dict[str, str]
) -> dict[str, Any]:
    """CleanupFailedCell with the error its catch received."""
    out: dict[str, Any] = cleanup.handler(
        {
            "scope": "cell",
            "outcome": "FAILED",
            "run_id": run["run_id"],
            "cell": cell,
            "prepared": {},
            "error": error,
        },
        context,
    )
    return out


def test_prepare_ebs_cell_is_ready_with_barrier_and_slots(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    run = _planned(context, _seed000(network["ami"]))
    cell = run["cells"][0]
    out = prepare.handler({"action": "prepare", "run_id": run["run_id"], "cell": cell}, context)
    assert out == {
        "storage": {"ready": True, "kind": "ebs", "created": False},
        "slots": [{"slot_index": 0, "launch_after_s": 0}, {"slot_index": 1, "launch_after_s": 0}],
    }
    item = cloud.item(f"barrier#{run['run_id']}#{cell['cell_id']}", "barrier")
    assert item is not None and item["parties"]["N"] == "2"
    assert cloud.item(f"run#{run['run_id']}", f"cell#{cell['cell_id']}")["status"]["S"] == "RUNNING"  # type: ignore[index]


def test_prepare_creates_an_ephemeral_efs_and_waits_for_mount_targets(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    matrix = _seed000(network["ami"])
    matrix["storage"] = [{"type": "efs", "label": "efs-elastic", "throughput_mode": "elastic"}]
    matrix["workloads"] = [{"fio": "randread-16k-psync-16jobs", "params": {"RUNTIME": 5}}]
    run = _planned(context, matrix)
    cell = run["cells"][0]
    prepared = prepare.handler(
        {"action": "prepare", "run_id": run["run_id"], "cell": cell}, context
    )
    storage = prepared["storage"]
    assert storage["created"] is True and storage["kind"] == "efs"
    fs = cloud.client("efs").describe_file_systems(FileSystemId=storage["file_system_id"])[
        "FileSystems"
    ][0]
    assert {t["Key"]: t["Value"] for t in fs["Tags"]}[keys.TAG_RUN] == run["run_id"]
    cell_item = cloud.item(f"run#{run['run_id']}", f"cell#{cell['cell_id']}")
    assert (
        cell_item is not None and cell_item["file_system_id"]["S"] == storage["file_system_id"]
    )  # for burst metrics
    # when polled, the mount target for the fleet subnet gets created
    polled = prepare.handler(
        {"action": "status", "run_id": run["run_id"], "cell": cell, "prepared": prepared}, context
    )
    targets = cloud.client("efs").describe_mount_targets(FileSystemId=storage["file_system_id"])[
        "MountTargets"
    ]
    assert [t["SubnetId"] for t in targets] == [network["subnet"]]
    assert [s["slot_index"] for s in polled["slots"]] == [0, 1] and polled["storage"]["ready"] in (
        True,
        False,
    )


def test_launch_starts_a_tagged_instance_with_the_volume_under_test(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    run = _planned(context, _seed000(network["ami"]))
    cell = run["cells"][0]
    out = launch.handler(
        {
            "mode": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": 1,
            "storage": {"ready": True, "kind": "ebs"},
            "heartbeat_s": 45,
            "task_token": TOKEN,
        },
        context,
    )
    (inst,) = _instances(cloud, run["run_id"])
    assert inst["InstanceId"] == out["instance_id"]
    assert inst["InstanceType"] == "c6a.xlarge" and inst["ImageId"] == network["ami"]
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags[keys.TAG_CELL] == cell["cell_id"] and tags[keys.TAG_SLOT] == "slot-0001"
    assert datetime.fromisoformat(tags[keys.TAG_EXPIRES].replace("Z", "+00:00")) > datetime.now(UTC)
    # the payload in S3 carries the token and the agent's slot payload with a DynamoDB barrier
    doc = json.loads(cloud.text(out["payload_key"]))
    assert doc["task_token"] == TOKEN and doc["slot"]["slot_index"] == 1
    assert doc["heartbeat_s"] == 45  # the task's heartbeat: the instance beats every third of it
    assert doc["slot"]["barrier"]["kind"] == "dynamodb" and doc["slot"]["barrier"]["parties"] == 2
    assert (
        doc["slot"]["target"]["kind"] == "block"
        and doc["slot"]["target"]["device_name"] == "/dev/sdf"
    )
    # the user-data runs exactly that payload
    user_data = cloud.client("ec2").describe_instance_attribute(
        InstanceId=inst["InstanceId"], Attribute="userData"
    )
    script = base64.b64decode(user_data["UserData"]["Value"]).decode()
    # the user-data names the payload's folder; the payload itself is keyed by the instance's
    # aws:userid (role id:instance id), the only one its role may read
    argv = parse_agent_command(script)
    folder = argv[argv.index("--key") + 1]
    assert folder == f"control/{run['run_id']}/{cell['cell_id']}/slot-0001/"
    assert out["payload_key"] == f"{folder}{ROLE_ID}:{inst['InstanceId']}.json"
    assert (
        cloud.item(f"run#{run['run_id']}", f"slot#{cell['cell_id']}#0001")["instance_id"]["S"]
        == inst["InstanceId"]
    )  # type: ignore[index]


def test_launch_maps_the_volume_under_test_encrypted(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    run = _planned(context, _seed000(network["ami"]))
    cell = run["cells"][0]
    _launch_slot(context, run, cell, 0)
    (inst,) = _instances(cloud, run["run_id"])
    devices = {m["DeviceName"]: m["Ebs"]["VolumeId"] for m in inst["BlockDeviceMappings"]}
    vol = cloud.client("ec2").describe_volumes(VolumeIds=[devices["/dev/sdf"]])["Volumes"][0]
    assert (vol["VolumeType"], vol["Size"], vol["Encrypted"]) == ("gp3", 100, True)
    assert {m["Ebs"]["DeleteOnTermination"] for m in inst["BlockDeviceMappings"]} == {True}


def test_cleanup_cell_terminates_its_instances_and_records_the_reason(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    run = _planned(context, _seed000(network["ami"]))
    cell = run["cells"][0]
    prepare.handler({"action": "prepare", "run_id": run["run_id"], "cell": cell}, context)
    for slot in (0, 1):
        _launch_slot(context, run, cell, slot)
    error = {"Error": "States.HeartbeatTimeout", "Cause": "no heartbeat from slot-0001"}
    out = _cleanup_failed_cell(context, run, cell, error)
    assert out["terminated"] == 2
    assert _instances(cloud, run["run_id"]) == []
    item = cloud.item(f"run#{run['run_id']}", f"cell#{cell['cell_id']}")
    assert item is not None and item["status"]["S"] == "FAILED"
    assert item["error"]["S"] == "States.HeartbeatTimeout: no heartbeat from slot-0001"


def test_failed_run_without_an_error_records_its_failed_cells(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    # given: one cell of the run failed with a reason (the summary then says FAILED, without an error)
    run = _planned(context, _seed000(network["ami"]))
    cell = run["cells"][0]
    prepare.handler({"action": "prepare", "run_id": run["run_id"], "cell": cell}, context)
    error = {
        "Error": "States.ExceedToleratedFailureThreshold",
        "Cause": "The specified tolerated failure threshold was exceeded",
    }
    _cleanup_failed_cell(context, run, cell, error)
    # when
    out = cleanup.handler({"scope": "run", "outcome": "FAILED", "run_id": run["run_id"]}, context)
    # then: the run item says which cell failed and why
    item = cloud.item(f"run#{run['run_id']}", "run")
    assert item is not None and item["status"]["S"] == "FAILED"
    assert item["error"]["S"] == out["error"]
    assert out["error"].startswith(
        f"1 of {len(run['cells'])} cells failed: {cell['cell_id']}: States.ExceedToleratedFailureThreshold"
    )


def test_failed_slot_keeps_its_reason_and_the_cell_names_it(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    # given: a fleet of 2 whose slot 1 task timed out on its heartbeat (the slot's catch)
    run = _planned(context, _seed000(network["ami"]))
    cell = run["cells"][0]
    prepare.handler({"action": "prepare", "run_id": run["run_id"], "cell": cell}, context)
    caught = {"Error": "States.HeartbeatTimeout", "Cause": "no heartbeat for 20 s"}
    # when: RecordSlotFailure runs
    out = cleanup.handler(
        {
            "scope": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": 1,
            "error": caught,
        },
        context,
    )
    # then: the slot's Fail state gets the same error back; the slot item keeps it
    assert out == caught
    slot = cloud.item(f"run#{run['run_id']}", f"slot#{cell['cell_id']}#0001")
    assert slot is not None
    assert slot["task_error"]["S"] == "States.HeartbeatTimeout: no heartbeat for 20 s"
    # when: the fleet's Map then fails its threshold and the cell's cleanup runs
    _cleanup_failed_cell(
        context,
        run,
        cell,
        {
            "Error": "States.ExceedToleratedFailureThreshold",
            "Cause": "The specified tolerated failure threshold was exceeded",
        },
    )
    # then: the cell's reason names the slot and its own error
    item = cloud.item(f"run#{run['run_id']}", f"cell#{cell['cell_id']}")
    assert item is not None
    assert item["error"]["S"] == (
        "1 of 2 slots failed: slot-0001: States.HeartbeatTimeout: no heartbeat for 20 s"
        " (States.ExceedToleratedFailureThreshold)"
    )


def test_failed_slot_without_a_cause_still_fails_with_an_error_and_a_cause(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    run = _planned(context, _seed000(network["ami"]))
    cell = run["cells"][0]
    event = {"scope": "slot", "run_id": run["run_id"], "cell_id": cell["cell_id"], "slot_index": 0}
    assert cleanup.handler({**event, "error": {"Error": "States.Timeout"}}, context) == {
        "Error": "States.Timeout",
        "Cause": "",
    }
    assert cleanup.handler(event, context) == {"Error": "SlotFailed", "Cause": ""}
    slot = cloud.item(f"run#{run['run_id']}", f"slot#{cell['cell_id']}#0000")
    assert slot is not None and slot["task_error"]["S"] == "SlotFailed"


def test_abort_event_terminates_the_run_and_marks_it_aborted(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    matrix = _seed000(network["ami"])
    run = _planned(context, matrix)
    cell = run["cells"][0]
    _launch_slot(context, run, cell, 0)
    event = {
        "source": "aws.states",
        "detail-type": "Step Functions Execution Status Change",
        "detail": {
            "status": "ABORTED",
            "executionArn": f"arn:aws:states:us-east-1:123456789012:execution:sm:{matrix['name']}",
        },
    }
    out = cleanup.handler(event, context)
    assert out["status"] == "ABORTED" and out["terminated"] == 1
    assert _instances(cloud, run["run_id"]) == []
    assert cloud.item(f"run#{run['run_id']}", "run")["status"]["S"] == "ABORTED"  # type: ignore[index]


def test_run_cleanup_leaves_another_stacks_instance_with_the_same_run_id(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    matrix = _seed000(network["ami"])
    run = _planned(context, matrix)
    _launch_slot(context, run, run["cells"][0], 0)
    ec2 = cloud.client("ec2")
    # given: a second deployment's instance that happens to carry the same run id
    other_tags = [
        {"Key": keys.TAG_RUN, "Value": run["run_id"]},
        {"Key": keys.TAG_STACK, "Value": "SomeoneElsesStack"},
    ]
    other = ec2.run_instances(
        ImageId=network["ami"],
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": other_tags}],
    )["Instances"][0]["InstanceId"]
    # when
    out = cleanup.handler({"scope": "run", "run_id": run["run_id"], "outcome": "ABORTED"}, context)
    # then: ours is gone, theirs still runs
    assert out["terminated"] == 1
    left = _instances(cloud, run["run_id"])
    assert [i["InstanceId"] for i in left] == [other]


def test_abort_of_an_execution_that_failed_in_plan_is_a_no_op(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    event = {
        "source": "aws.states",
        "detail": {
            "status": "FAILED",
            "executionArn": "arn:aws:states:us-east-1:1:execution:sm:never",
        },
    }
    assert "skipped" in cleanup.handler(event, context)


def test_janitor_terminates_only_this_stacks_expired_instances(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    ec2 = cloud.client("ec2")
    now = datetime.now(UTC)

    def start(expiry: str, stack: str = keys.stack_name()) -> str:
        tags = [
            {"Key": keys.TAG_RUN, "Value": f"janitor-{cloud.table}"},
            {"Key": keys.TAG_EXPIRES, "Value": expiry},
            {"Key": keys.TAG_STACK, "Value": stack},
        ]
        out = ec2.run_instances(
            ImageId=network["ami"],
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        return str(out["Instances"][0]["InstanceId"])

    def stamp(when: datetime) -> str:
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")

    # given: one expired instance of ours, and four that are not ours to delete
    old = start(stamp(now - timedelta(hours=1)))
    fresh = start(stamp(now + timedelta(hours=1)))
    unreadable = start("next tuesday")
    other_stack = start(stamp(now - timedelta(hours=1)), stack="SomeoneElsesStack")
    # when
    out = janitor.handler({}, context)
    # then: only ours, expired, is terminated; the others still run
    assert out["terminated"] == [old]
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(InstanceIds=[old, fresh, unreadable, other_stack])[
            "Reservations"
        ]
        for i in r["Instances"]
    }
    assert states[old] in ("shutting-down", "terminated")
    assert {states[i] for i in (fresh, unreadable, other_stack)} == {"running"}


def test_barrier_counts_each_slot_once(cloud: Cloud) -> None:
    ddb = cloud.client("dynamodb")
    barrier.create_barrier(ddb, cloud.table, "r1", "c1", 2)
    assert barrier.arrive(ddb, cloud.table, "r1", "c1", 0) == (1, 2)
    assert barrier.arrive(ddb, cloud.table, "r1", "c1", 0) == (1, 2)  # a retried slot
    b = barrier.DynamoBarrier(
        ddb, {"table": cloud.table, "run_id": "r1", "cell_id": "c1", "parties": 2, "timeout_s": 0}
    )
    assert b.wait(1, timeout_s=5).passed is True


# One slot's agent at the DynamoDB barrier, in its own process (boto3 on the moto server
# named by AWS_ENDPOINT_URL, as the instance's clients would be on AWS). The barrier's
# calls are wrapped to print, one JSON line each as they happen, what the party did and
# saw: its announce (the wall clock before and after it), each release it proposed (the
# instant it decided at, what it proposed, what is in force) and each state it read;
# then the wait's result.
DDB_PARTY = """
import json, sys
import boto3
from iofleet.agent.barrier import now_us
from iofleet.aws.barrier import DynamoBarrier

def say(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)

class Observed(DynamoBarrier):
    def announce(self, party):
        before = now_us()
        state = super().announce(party)
        say("announced", before_us=before, after_us=now_us(), arrived=state.arrived)
        return state

    def propose_release(self, at_us):
        decided = now_us()
        in_force = super().propose_release(at_us)
        say("proposed", decided_us=decided, at_us=at_us, in_force_us=in_force)
        return in_force

    def state(self):
        state = super().state()
        say("read", arrived=state.arrived, release_us=state.release_us)
        return state

table, parties, index = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
config = {"table": table, "run_id": "r1", "cell_id": "c1", "parties": parties, "timeout_s": 120}
say("result", **Observed(boto3.client("dynamodb"), config).wait(index).__dict__)
"""


@pytest.fixture
def one_request_at_a_time(moto_endpoint: str) -> Iterator[str]:
    """Another endpoint of the same moto backends (they live in this process), handling
    one request at a time. moto checks an update's condition and then writes, with no
    lock: on its threaded server two parties proposing the release at once can both
    pass `attribute_not_exists(release_us)`, and the later write replaces the instant
    the first was told is in force. DynamoDB applies an item's conditional writes one
    at a time; so does this endpoint."""
    import threading

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serial(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with lock:
            return list(app(environ, start_response))

    server = make_server("127.0.0.1", 0, serial, True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()


def _ddb_party(
    cloud: Cloud, parties: int, index: int, endpoint: str | None = None
) -> subprocess.Popen[str]:
    root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ, PYTHONPATH=root)
    if endpoint is not None:
        env["AWS_ENDPOINT_URL"] = endpoint
    return subprocess.Popen(
        [sys.executable, "-c", DDB_PARTY, cloud.table, str(parties), str(index)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _event(line: str) -> dict[str, Any]:
    event = json.loads(line)
    assert isinstance(event, dict)
    return event


def test_dynamodb_barrier_releases_every_process_at_the_instant_the_last_arrival_set(
    cloud: Cloud, one_request_at_a_time: str
) -> None:
    # Proven by the order of what each process did and saw, on the one wall clock they
    # share (CLOCK_REALTIME), with no allowance for how long anything took: under load
    # a party may see the record late, and still passes no sooner than the instant.
    # given a 4-slot barrier with 3 slots that have announced themselves (each process
    # says so on its stdout: the test reads that line, no polling)
    ddb = cloud.client("dynamodb")
    parties = 4
    barrier.create_barrier(ddb, cloud.table, "r1", "c1", parties)
    procs = [_ddb_party(cloud, parties, i, one_request_at_a_time) for i in range(parties - 1)]
    seen: list[list[dict[str, Any]]] = []
    for proc in procs:
        assert proc.stdout is not None
        first = _event(proc.stdout.readline() or "{}")
        assert first.get("event") == "announced", first
        seen.append([first])
    # when the last slot starts, and every process has ended
    procs.append(_ddb_party(cloud, parties, parties - 1, one_request_at_a_time))
    seen.append([])
    for proc, events in zip(procs, seen, strict=True):
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        events += [_event(line) for line in out.splitlines()]
    # then every process passed, at one instant, the one stored on the item
    results = [events[-1] for events in seen]
    assert [r["event"] for r in results] == ["result"] * parties
    assert [r["passed"] for r in results] == [True] * parties
    instants = {r["released_us"] for r in results}
    assert len(instants) == 1, seen
    (released,) = instants
    item = cloud.item("barrier#r1#c1", "barrier")
    assert item is not None and int(item["release_us"]["N"]) == released
    # and no process passed before that instant
    assert [r for r in results if r["passed_us"] < released] == []
    # and the instant is one proposed once the last slot had begun to announce itself
    # (no decision before the last announce's start), never with fewer parties arrived
    announced = [e for events in seen for e in events if e["event"] == "announced"]
    assert len(announced) == parties
    last_arrival = max(e["before_us"] for e in announced)
    proposals = [e for events in seen for e in events if e["event"] == "proposed"]
    assert proposals, "nobody proposed a release"
    assert released in {p["at_us"] for p in proposals}
    assert [p for p in proposals if p["decided_us"] < last_arrival] == []
    # and every proposal is its party's reading of the clock, taken once it had seen
    # every party arrived (so after the last announce began), plus the margin the other
    # parties need to read the record: arithmetic on recorded instants, not a timing
    margin_us = round((2 * barrier.poll_interval(parties) + barrier.SLACK_S) * 1e6)
    assert [p for p in proposals if p["at_us"] < last_arrival + margin_us] == []
    assert {p["in_force_us"] for p in proposals} == {released}
    # and every state read that showed the instant showed every party arrived
    reads = [e for events in seen for e in events if e["event"] == "read"]
    assert [e for e in reads if e["release_us"] is not None and e["arrived"] < parties] == []
    assert [e for e in reads if e["release_us"] not in (None, released)] == []


def test_dynamodb_release_is_set_once_and_only_when_everyone_arrived(cloud: Cloud) -> None:
    ddb = cloud.client("dynamodb")
    barrier.create_barrier(ddb, cloud.table, "r1", "c1", 2)
    barrier.arrive(ddb, cloud.table, "r1", "c1", 0)
    # one of two arrived: the conditional update refuses to set an instant
    with pytest.raises(BarrierError, match="cannot be set .1 parties arrived"):
        barrier.set_release(ddb, cloud.table, "r1", "c1", 1_000_000)
    barrier.arrive(ddb, cloud.table, "r1", "c1", 1)
    # both arrived: the first proposal is the instant, a later one adopts it
    assert barrier.set_release(ddb, cloud.table, "r1", "c1", 1_000_000) == 1_000_000
    assert barrier.set_release(ddb, cloud.table, "r1", "c1", 2_000_000) == 1_000_000
    item = cloud.item("barrier#r1#c1", "barrier")
    assert item is not None and item["release_us"] == {"N": "1000000"}


def test_dynamodb_poll_interval_keeps_a_cell_under_a_third_of_a_partitions_reads() -> None:
    # one partition serves 3,000 read units a second; a cell's waiting slots spend at most
    # 1,000 (the units one read costs are checked on DynamoDB Local, tests/cloud)
    for parties in (1, 2, 10, 100, 1000, 1194, 1195, 5000, 10_000):
        units_per_s = parties * barrier.read_units(parties) / barrier.poll_interval(parties)
        assert units_per_s <= 1000
    assert barrier.poll_interval(2) == 0.1 and barrier.poll_interval(1000) == 1.0
    assert barrier.read_units(1194) == 1 and barrier.read_units(1195) == 2
