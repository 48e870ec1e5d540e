"""The launch logic against the EC2 API's own failures: throttling and capacity, injected
into moto's RunInstances (tests/cloud/localcloud/ec2_faults.py, the same injection the
local cloud uses) on the in-process moto server. Proof is what lands in moto (the
instances, their subnet) and on the slot item in DynamoDB, not the function's answer."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.ec2.models.instances import InstanceBackend

from iofleet.aws import keys
from iofleet.aws import launch as launch_logic
from iofleet.aws.launch import (
    Backoff,
    InsufficientCapacity,
    LaunchEnv,
    LaunchThrottled,
    client_token,
    launch_schedule,
)
from lambdas.cleanup import handler as cleanup
from lambdas.launch import handler as launch_handler
from tests.cloud.localcloud import ec2_faults
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext
from tests.unit.lambdas.test_fleet_handlers import (
    ROLE_ID,
    TOKEN,
    _cleanup_failed_cell,
    _planned,
    _seed000,
)

ZONES = ("us-east-1a", "us-east-1b")


@pytest.fixture
def two_zones(
    cloud: Cloud, moto_images: list[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The stack's network: one subnet in each of two AZs (as the stack's VPC has)."""
    ec2 = cloud.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=zone)["Subnet"][
            "SubnetId"
        ]
        for i, zone in enumerate(ZONES)
    ]
    lt = ec2.create_launch_template(LaunchTemplateName=f"lt-{cloud.table}", LaunchTemplateData={})[
        "LaunchTemplate"
    ]["LaunchTemplateId"]
    env = {
        "LAUNCH_TEMPLATE_ID": lt,
        "SUBNET_IDS": ",".join(subnets),
        "SUBNET_ZONES": ",".join(ZONES),
        "AGENT_BUCKET": "cdk-assets",
        "AGENT_KEY": "agent.zip",
        "INSTANCE_ROLE_ID": ROLE_ID,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return {"subnets": subnets, "ami": moto_images[0], "launch_template": lt}


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Rules for moto's RunInstances (set `rules`), and the log of what it injected."""
    state: dict[str, Any] = {"rules": {}, "log": []}
    monkeypatch.setattr(
        InstanceBackend,
        "run_instances",
        ec2_faults.wrap(InstanceBackend.run_instances, lambda: state["rules"], state["log"].append),
    )
    yield state


class Slept:
    """Records the backoff the launcher asks for instead of sleeping it."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Highest(random.Random):
    """A random source at the top of every range: the backoff's upper bounds."""

    def uniform(self, a: float, b: float) -> float:
        return b


def _cell(context: FakeLambdaContext, ami: str) -> tuple[dict[str, Any], dict[str, Any]]:
    run = _planned(context, _seed000(ami))
    return run, run["cells"][0]


def _env(cloud: Cloud, net: dict[str, Any]) -> LaunchEnv:
    return LaunchEnv(
        bucket=cloud.bucket,
        table=cloud.table,
        region="us-east-1",
        launch_template_id=net["launch_template"],
        subnet_ids=tuple(net["subnets"]),
        agent_bucket="cdk-assets",
        agent_key="agent.zip",
        subnet_zones=ZONES,
        instance_role_id=ROLE_ID,
    )


def _launch(
    cloud: Cloud,
    net: dict[str, Any],
    run: dict[str, Any],
    cell: dict[str, Any],
    slot: int,
    slept: Slept,
    backoff: Backoff | None = None,
) -> dict[str, Any]:
    return launch_logic.launch(
        {
            "mode": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": slot,
            "storage": {},
            "task_token": TOKEN,
        },
        s3=cloud.client("s3"),
        # as the handler builds it: no botocore retries for EC2 (they would hide the faults)
        ec2=boto3.client(
            "ec2",
            endpoint_url=cloud.endpoint,
            region_name="us-east-1",
            config=launch_handler.NO_SDK_RETRIES,
        ),
        ssm=cloud.client("ssm"),
        ddb=cloud.client("dynamodb"),
        env=_env(cloud, net),
        backoff=backoff,
        sleep=slept,
        rng=Highest(),
    )


def _instances(cloud: Cloud, run_id: str) -> list[dict[str, Any]]:
    res = cloud.client("ec2").describe_instances(
        Filters=[{"Name": f"tag:{keys.TAG_RUN}", "Values": [run_id]}]
    )["Reservations"]
    return [i for r in res for i in r["Instances"]]


def _slot_item(cloud: Cloud, run_id: str, cell_id: str, index: int) -> dict[str, Any]:
    key = keys.slot_item_key(run_id, cell_id, index)
    item = cloud.item(key["pk"], key["sk"])
    assert item is not None
    return item


def _reasons(item: dict[str, Any]) -> list[str]:
    return [r["S"] for r in item.get("launch_retry_reasons", {}).get("L", [])]


def test_throttled_launch_backs_off_with_full_jitter_and_records_each_retry(
    cloud: Cloud, two_zones: dict[str, Any], faults: dict[str, Any], context: FakeLambdaContext
) -> None:
    # given: the first three RunInstances calls are throttled
    faults["rules"] = {"throttle_first": 3}
    run, cell = _cell(context, two_zones["ami"])
    slept = Slept()
    # when
    out = _launch(cloud, two_zones, run, cell, 0, slept)
    # then: one instance, in the slot's own subnet and AZ
    (instance,) = _instances(cloud, run["run_id"])
    assert instance["InstanceId"] == out["instance_id"]
    assert instance["SubnetId"] == two_zones["subnets"][0]
    # and: the backoff's bounds grow 1, 2, 4 s (full jitter draws in [0, bound]; the test's
    # random source returns the bound)
    assert slept.delays == [1.0, 2.0, 4.0]
    # and: the slot item holds every retry and where the slot runs
    item = _slot_item(cloud, run["run_id"], cell["cell_id"], 0)
    where = f"{two_zones['subnets'][0]} (us-east-1a)"
    assert item["launch_retries"] == {"N": "3"}
    assert _reasons(item) == [f"RequestLimitExceeded in {where}"] * 3
    assert [f["code"] for f in faults["log"]] == ["RequestLimitExceeded"] * 3
    assert (item["status"]["S"], item["instance_id"]["S"]) == ("LAUNCHED", out["instance_id"])
    assert (item["subnet_id"]["S"], item["availability_zone"]["S"]) == (
        two_zones["subnets"][0],
        "us-east-1a",
    )


@pytest.mark.parametrize("kind", ["no_capacity_zones", "unsupported_zones"])
def test_no_capacity_in_one_az_moves_the_slot_to_the_other(
    kind: str,
    cloud: Cloud,
    two_zones: dict[str, Any],
    faults: dict[str, Any],
    context: FakeLambdaContext,
) -> None:
    # given: us-east-1a cannot take the instance (out of capacity, or type not offered)
    faults["rules"] = {kind: ["us-east-1a"]}
    run, cell = _cell(context, two_zones["ami"])
    slept = Slept()
    # when: slot 0 (home subnet: us-east-1a) and slot 1 (home: us-east-1b) launch
    _launch(cloud, two_zones, run, cell, 0, slept)
    _launch(cloud, two_zones, run, cell, 1, slept)
    # then: both run in us-east-1b, none in us-east-1a, with no backoff for a move
    instances = _instances(cloud, run["run_id"])
    assert sorted(i["Placement"]["AvailabilityZone"] for i in instances) == ["us-east-1b"] * 2
    assert slept.delays == []
    code = "InsufficientInstanceCapacity" if kind == "no_capacity_zones" else "Unsupported"
    slot0 = _slot_item(cloud, run["run_id"], cell["cell_id"], 0)
    assert _reasons(slot0) == [f"{code} in {two_zones['subnets'][0]} (us-east-1a)"]
    assert slot0["availability_zone"]["S"] == "us-east-1b"
    slot1 = _slot_item(cloud, run["run_id"], cell["cell_id"], 1)
    assert "launch_retries" not in slot1 and slot1["availability_zone"]["S"] == "us-east-1b"


def test_retried_invocation_asks_first_where_the_earlier_one_launched(
    cloud: Cloud, two_zones: dict[str, Any], faults: dict[str, Any], context: FakeLambdaContext
) -> None:
    # given: us-east-1a had no capacity, so slot 0 launched in us-east-1b; then the
    # invocation is retried (say the Lambda died after RunInstances) and 1a has capacity now
    faults["rules"] = {"no_capacity_zones": ["us-east-1a"]}
    run, cell = _cell(context, two_zones["ami"])
    first = _launch(cloud, two_zones, run, cell, 0, Slept())
    faults["rules"] = {}
    # when
    again = _launch(cloud, two_zones, run, cell, 0, Slept())
    # then: the same instance (same subnet, same ClientToken), not a second one in 1a
    assert again["instance_id"] == first["instance_id"]
    (instance,) = _instances(cloud, run["run_id"])
    assert instance["Placement"]["AvailabilityZone"] == "us-east-1b"
    item = _slot_item(cloud, run["run_id"], cell["cell_id"], 0)
    assert item["launch_refused_subnets"] == {"SS": [two_zones["subnets"][0]]}


def test_no_capacity_anywhere_fails_with_every_subnets_answer(
    cloud: Cloud, two_zones: dict[str, Any], faults: dict[str, Any], context: FakeLambdaContext
) -> None:
    faults["rules"] = {"no_capacity_zones": list(ZONES)}
    run, cell = _cell(context, two_zones["ami"])
    with pytest.raises(InsufficientCapacity) as err:
        _launch(cloud, two_zones, run, cell, 1, Slept())
    a, b = two_zones["subnets"]
    message = str(err.value)
    assert message.startswith(f"no subnet had capacity for c6a.xlarge: {b} (us-east-1b): ")
    assert f"; {a} (us-east-1a): InsufficientInstanceCapacity: We currently" in message
    assert message.endswith("launch retries: 2 (2 InsufficientInstanceCapacity)")
    assert _instances(cloud, run["run_id"]) == []
    item = _slot_item(cloud, run["run_id"], cell["cell_id"], 1)
    assert item["launch_retries"] == {"N": "2"} and "instance_id" not in item


def test_throttled_past_the_budget_hands_over_to_the_state_machine_and_retries_add_up(
    cloud: Cloud, two_zones: dict[str, Any], faults: dict[str, Any], context: FakeLambdaContext
) -> None:
    # given: five throttled calls, a budget of three per invocation
    faults["rules"] = {"throttle_first": 5}
    run, cell = _cell(context, two_zones["ami"])
    budget = Backoff(base_s=1, cap_s=20, attempts=3)
    slept = Slept()
    # when: the first invocation runs out of budget
    with pytest.raises(LaunchThrottled) as err:
        _launch(cloud, two_zones, run, cell, 0, slept, budget)
    assert str(err.value).startswith(
        f"RunInstances still throttled (RequestLimitExceeded) after 3 calls in "
        f"{two_zones['subnets'][0]} (us-east-1a)"
    )
    assert _instances(cloud, run["run_id"]) == []
    # when: the state machine's retry invokes it again
    _launch(cloud, two_zones, run, cell, 0, slept, budget)
    # then: one instance; the slot item counts the retries of both invocations
    assert len(_instances(cloud, run["run_id"])) == 1
    item = _slot_item(cloud, run["run_id"], cell["cell_id"], 0)
    assert item["launch_retries"] == {"N": "5"}
    assert len(_reasons(item)) == 5 == len(faults["log"])
    assert slept.delays == [1.0, 2.0, 1.0, 2.0]  # no sleep after the budget's last call


def test_other_errors_are_not_retried(
    cloud: Cloud, two_zones: dict[str, Any], context: FakeLambdaContext
) -> None:
    run, cell = _cell(context, two_zones["ami"])
    net = {**two_zones, "launch_template": "lt-0000000000doesnotexist"}
    slept = Slept()
    with pytest.raises(Exception) as err:
        _launch(cloud, net, run, cell, 0, slept)
    assert not isinstance(err.value, LaunchThrottled | InsufficientCapacity)
    assert slept.delays == []
    item = cloud.item(**keys.slot_item_key(run["run_id"], cell["cell_id"], 0))
    assert item is None  # nothing to record: no retry happened


def test_handler_leaves_every_ec2_retry_to_the_launcher(
    cloud: Cloud, two_zones: dict[str, Any], faults: dict[str, Any], context: FakeLambdaContext
) -> None:
    # given: one throttled call; botocore's own retries would hide it from the slot item
    faults["rules"] = {"throttle_first": 1}
    run, cell = _cell(context, two_zones["ami"])
    # when
    out = launch_handler.handler(
        {
            "mode": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": 1,
            "storage": {},
            "task_token": TOKEN,
        },
        context,
    )
    # then: the one injected fault is the one recorded retry; the slot ran in us-east-1b
    assert len(faults["log"]) == 1 and out["launch_retries"] == 1
    item = _slot_item(cloud, run["run_id"], cell["cell_id"], 1)
    assert _reasons(item) == [f"RequestLimitExceeded in {two_zones['subnets'][1]} (us-east-1b)"]
    assert item["availability_zone"]["S"] == "us-east-1b"


def test_client_token_is_one_per_slot_and_subnet() -> None:
    a = client_token("r", "c", "slot-0000", "subnet-a")
    assert a == client_token("r", "c", "slot-0000", "subnet-a")
    assert a != client_token("r", "c", "slot-0000", "subnet-b")
    assert a != client_token("r", "c", "slot-0001", "subnet-a")
    assert len(a) <= 64


def test_launch_schedule_is_twenty_slots_every_ten_seconds() -> None:
    waves = launch_schedule(45)
    assert [w["slot_index"] for w in waves] == list(range(45))
    assert {w["launch_after_s"] for w in waves[:20]} == {0}
    assert {w["launch_after_s"] for w in waves[20:40]} == {10}
    assert {w["launch_after_s"] for w in waves[40:]} == {20}
    assert launch_schedule(0) == []


def test_barrier_waits_for_the_last_wave(
    cloud: Cloud, two_zones: dict[str, Any], context: FakeLambdaContext
) -> None:
    matrix = _seed000(two_zones["ami"])
    matrix["parallelism"] = [45]
    run = _planned(context, matrix)
    cell = run["cells"][0]
    _launch(cloud, two_zones, run, cell, 44, Slept())
    item = cloud.item(f"run#{run['run_id']}", f"slot#{cell['cell_id']}#0044")
    payload = cloud.text(item["payload_key"]["S"])  # type: ignore[index]
    barrier = json.loads(payload)["slot"]["barrier"]
    assert (barrier["parties"], barrier["timeout_s"]) == (45, 900 + 20)


def test_a_slot_failing_after_launch_retries_names_them_in_the_cell_reason(
    cloud: Cloud, two_zones: dict[str, Any], faults: dict[str, Any], context: FakeLambdaContext
) -> None:
    # given: slot 1 launched after two throttled calls, then its agent failed
    faults["rules"] = {"throttle_first": 2}
    run, cell = _cell(context, two_zones["ami"])
    _launch(cloud, two_zones, run, cell, 1, Slept())
    caught = {"Error": "AgentFailed", "Cause": "agent exited with status 1"}
    cleanup.handler(
        {
            "scope": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": 1,
            "error": caught,
        },
        context,
    )
    # when: the fleet's Map fails and the cell's cleanup runs
    _cleanup_failed_cell(
        context,
        run,
        cell,
        {
            "Error": "States.ExceedToleratedFailureThreshold",
            "Cause": "The specified tolerated failure threshold was exceeded",
        },
    )
    # then: the cell's reason names the slot, its error and its launch retries
    item = cloud.item(f"run#{run['run_id']}", f"cell#{cell['cell_id']}")
    assert item is not None
    assert item["error"]["S"] == (
        "1 of 2 slots failed: slot-0001: AgentFailed: agent exited with status 1"
        " (after 2 launch retries) (States.ExceedToleratedFailureThreshold)"
    )
    # and: the instance is gone with the cell
    states = {i["State"]["Name"] for i in _instances(cloud, run["run_id"])}
    assert states == {"terminated"}


PROBES = json.loads(
    (Path(__file__).resolve().parents[2] / "data/probes/ec2/run_instances_answers.json").read_text()
)["probes"]


@pytest.mark.parametrize("probe", PROBES, ids=[p["code"] for p in PROBES])
def test_every_run_instances_answer_gets_its_handling(
    probe: dict[str, str],
    cloud: Cloud,
    two_zones: dict[str, Any],
    faults: dict[str, Any],
    context: FakeLambdaContext,
) -> None:
    # given: the first RunInstances call answers this code (slot 0: home subnet in us-east-1a)
    code = probe["code"]
    faults["rules"] = {"answers": [code]}
    run, cell = _cell(context, two_zones["ami"])
    slept = Slept()
    a, b = two_zones["subnets"]
    if probe["expect"] == "raise":
        # then: EC2's own error, at once, with nothing launched and no retry recorded
        with pytest.raises(ClientError) as err:
            _launch(cloud, two_zones, run, cell, 0, slept)
        assert err.value.response["Error"]["Code"] == code
        assert _instances(cloud, run["run_id"]) == [] and slept.delays == []
        assert cloud.item(**keys.slot_item_key(run["run_id"], cell["cell_id"], 0)) is None
        return
    _launch(cloud, two_zones, run, cell, 0, slept)
    (instance,) = _instances(cloud, run["run_id"])
    item = _slot_item(cloud, run["run_id"], cell["cell_id"], 0)
    assert _reasons(item) == [f"{code} in {a} (us-east-1a)"]
    if probe["expect"] == "retry-in-place":
        assert (instance["SubnetId"], slept.delays) == (a, [1.0])
    else:
        assert (instance["SubnetId"], slept.delays) == (b, [])
