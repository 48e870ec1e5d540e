"""The EC2 API's own failures at fleet scale, on the local cloud (issue 11, part 4).

The real state machine definition runs a cell of 50 slots while moto's RunInstances
answers as EC2 does under load (tests/cloud/localcloud/ec2_faults.py, configured through
the hooks): 30% of calls throttled with RequestLimitExceeded, and one AZ's subnet out of
capacity. Every slot must launch (in the other AZ) and finish, or the cell must fail with
the exact reason; no instance is left; nothing uploaded is lost; each slot item says where
the slot ran and every retry it took, matched one for one with the faults moto injected.
Same substitutes as tests/cloud/test_faults.py (see tests/cloud/localcloud/__init__.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from iofleet.aws import keys
from iofleet.aws.launch import LAUNCH_WAVE_INTERVAL_S, LAUNCH_WAVE_SIZE
from tests.cloud.localcloud.fixtures import LocalStack
from tests.cloud.test_faults import _no_instance_left, _nothing_lost, _one_cell

# the cheapest workload the agent runs for real: ioping's warm-up request and one timed
# request on the shared mount (with count 1 ioping times nothing: the only request is the
# warm-up, and the artifact yields no row)
IOPING_ONCE = {"ioping": {"count": 2, "interval_ms": 0}}
FLEET = 50


@pytest.fixture
def subnets(local_stack: LocalStack) -> Iterator[list[tuple[str, str]]]:
    """The stack's (subnet, AZ) pairs as the launch function knows them; faults off after."""
    env = local_stack.client("lambda").get_function_configuration(
        FunctionName=local_stack.d.functions["launch"]
    )["Environment"]["Variables"]
    pairs = list(zip(env["SUBNET_IDS"].split(","), env["SUBNET_ZONES"].split(","), strict=True))
    assert len({z for _, z in pairs}) == 2, pairs
    try:
        yield pairs
    finally:
        local_stack.set_ec2_faults({})


def _run(
    stack: LocalStack, doc: dict[str, Any], timeout_s: float = 420
) -> tuple[str, str, dict[str, Any]]:
    arn = stack.start(doc)
    desc = stack.wait(arn, timeout_s=timeout_s)
    run_id = stack.run_id_of(arn)
    stack.esm.wait_drained()
    return arn, run_id, desc


def _slots(stack: LocalStack, run_id: str) -> list[dict[str, Any]]:
    return sorted(stack.items(run_id, "slot#"), key=lambda s: s["sk"])


def _reasons(slot: dict[str, Any]) -> list[str]:
    return [r["S"] for r in slot.get("launch_retry_reasons", [])]


def _when(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def test_fifty_slots_launch_through_throttling_and_a_zone_out_of_capacity(
    local_stack: LocalStack, subnets: list[tuple[str, str]]
) -> None:
    # given: 30% of RunInstances calls throttled, the first subnet's AZ out of capacity
    (full_subnet, full_zone), (open_subnet, open_zone) = subnets
    local_stack.set_ec2_faults(
        {"throttle_fraction": 0.3, "seed": 4, "no_capacity_zones": [full_zone]}
    )
    before = len(local_stack.injected_ec2_faults())
    # when: one cell of 50 slots runs through the state machine
    arn, run_id, desc = _run(
        local_stack, _one_cell(local_stack, "ec2-scale", FLEET, [IOPING_ONCE]), timeout_s=900
    )
    injected = local_stack.injected_ec2_faults()[before:]
    # then: the execution, the cell and the run succeeded
    assert desc["status"] == "SUCCEEDED", local_stack.history(arn)[-3:]
    (cell,) = local_stack.items(run_id, "cell#")
    assert (cell["status"], cell.get("error")) == ("SUCCEEDED", None)
    assert local_stack.run_item(run_id)["status"] == "SUCCEEDED"
    # and: every slot launched, ran its agent and was ingested, all in the open AZ
    slots = _slots(local_stack, run_id)
    assert len(slots) == FLEET
    assert {(s["status"], s["agent_status"], s.get("ingested")) for s in slots} == {
        ("LAUNCHED", "SUCCEEDED", True)
    }
    assert {(s["subnet_id"], s["availability_zone"]) for s in slots} == {(open_subnet, open_zone)}
    ec2 = local_stack.client("ec2")
    instances = [
        i
        for r in ec2.describe_instances(
            Filters=[{"Name": f"tag:{keys.TAG_RUN}", "Values": [run_id]}]
        )["Reservations"]
        for i in r["Instances"]
    ]
    assert len(instances) == FLEET  # one per slot: no retry launched a second instance
    assert {i["Placement"]["AvailabilityZone"] for i in instances} == {open_zone}
    assert {i["InstanceId"] for i in instances} == {s["instance_id"] for s in slots}
    # and: every fault moto injected is a retry recorded on its slot, and nothing else is
    recorded = Counter(r for s in slots for r in _reasons(s))
    assert recorded == Counter(f"{f['code']} in {f['subnet_id']} ({f['zone']})" for f in injected)
    assert sum(int(s.get("launch_retries", 0)) for s in slots) == len(injected)
    assert Counter(f["code"] for f in injected)["RequestLimitExceeded"] > 0
    # the slots whose own subnet is the full one (even indexes) met it, the others never
    full = f"InsufficientInstanceCapacity in {full_subnet} ({full_zone})"
    assert [full in _reasons(s) for s in slots] == [i % 2 == 0 for i in range(FLEET)]
    # and: the fleet launched in waves: no slot of wave k before k x 10 s after the Fleet map
    # started (a lower bound the Wait guarantees; moto's LaunchTime has 1 s resolution)
    fleet_started = min(
        _when(e["timestamp"])
        for e in local_stack.history(arn)
        if e["type"] == "MapStateEntered" and e["stateEnteredEventDetails"]["name"] == "Fleet"
    )
    by_slot = {s["instance_id"]: int(s["sk"].rsplit("#", 1)[1]) for s in slots}
    for i in instances:
        wave = by_slot[i["InstanceId"]] // LAUNCH_WAVE_SIZE
        waited = (_when(i["LaunchTime"]) - fleet_started).total_seconds()
        assert waited >= wave * LAUNCH_WAVE_INTERVAL_S - 1, (i["InstanceId"], wave, waited)
    # and: nothing left running, nothing lost
    _nothing_lost(local_stack, run_id)
    _no_instance_left(local_stack, run_id)


def test_no_capacity_in_any_zone_fails_the_cell_with_each_zones_answer(
    local_stack: LocalStack, subnets: list[tuple[str, str]]
) -> None:
    # given: both AZs out of capacity
    local_stack.set_ec2_faults({"no_capacity_zones": [z for _, z in subnets]})
    # when: a fleet of one runs
    arn, run_id, desc = _run(local_stack, _one_cell(local_stack, "ec2-nocap", 1, [IOPING_ONCE]))
    # then: the run goes to its end; the cell and the run say exactly why
    assert desc["status"] == "SUCCEEDED"
    (cell,) = local_stack.items(run_id, "cell#")
    answers = "; ".join(
        f"{s} ({z}): InsufficientInstanceCapacity: We currently do not have sufficient "
        f"m6i.large capacity in the Availability Zone you requested ({z}). Our system will be "
        "working on provisioning additional capacity."
        for s, z in subnets
    )
    assert cell["status"] == "FAILED"
    assert cell["error"] == (
        "1 of 1 slots failed: slot-0000: InsufficientCapacity: no subnet had capacity for "
        f"m6i.large: {answers}; launch retries: 2 (2 InsufficientInstanceCapacity) "
        "(States.ExceedToleratedFailureThreshold)"
    )
    run = local_stack.run_item(run_id)
    assert (run["status"], run["error"]) == (
        "FAILED",
        f"1 of 1 cells failed: {cell['sk'][len('cell#') :]}: {cell['error']}",
    )
    (slot,) = _slots(local_stack, run_id)
    assert int(slot["launch_retries"]) == 2 and "instance_id" not in slot
    # and: nothing was launched, so nothing is left; the run's own record is kept
    assert local_stack.all_instances(run_id) == []
    assert list(local_stack.raw_objects(run_id)) == [f"{run_id}/run.json"]


def test_throttled_past_the_lambdas_budget_is_retried_by_the_state_machine(
    local_stack: LocalStack, subnets: list[tuple[str, str]]
) -> None:
    # given: the first 6 RunInstances calls throttled: the whole budget of one launch
    # invocation (iofleet.aws.launch.Backoff.attempts), so it raises LaunchThrottled
    local_stack.set_ec2_faults({"throttle_first": 6})
    # when: a fleet of one runs
    arn, run_id, desc = _run(local_stack, _one_cell(local_stack, "ec2-budget", 1, [IOPING_ONCE]))
    # then: RunSlot's Retry invoked the launch again and the slot ran; its item counts the
    # first invocation's six refused calls, all in its own subnet
    assert desc["status"] == "SUCCEEDED"
    (cell,) = local_stack.items(run_id, "cell#")
    assert (cell["status"], cell.get("error")) == ("SUCCEEDED", None)
    (slot,) = _slots(local_stack, run_id)
    (home_subnet, home_zone) = subnets[0]
    assert _reasons(slot) == [f"RequestLimitExceeded in {home_subnet} ({home_zone})"] * 6
    assert (slot["status"], slot["agent_status"], slot["subnet_id"]) == (
        "LAUNCHED",
        "SUCCEEDED",
        home_subnet,
    )
    assert len(local_stack.all_instances(run_id)) == 1
    _nothing_lost(local_stack, run_id)
    _no_instance_left(local_stack, run_id)
