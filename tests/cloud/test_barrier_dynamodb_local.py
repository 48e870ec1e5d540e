"""The DynamoDB start barrier on DynamoDB Local (AWS's own emulator): the conditional
updates that set the release instant once, and only when everyone arrived."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from iofleet.agent.barrier import BarrierError, BarrierResult
from iofleet.aws import barrier, keys


@pytest.fixture
def state_table(aws_client: Callable[[str], Any], unique: str) -> str:
    name = f"iofleet-state-{unique}"
    aws_client("dynamodb").create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def test_release_is_refused_before_everyone_arrived_and_set_once_after(
    aws_client: Callable[[str], Any], state_table: str
) -> None:
    ddb = aws_client("dynamodb")
    barrier.create_barrier(ddb, state_table, "r1", "c1", 2)
    barrier.arrive(ddb, state_table, "r1", "c1", 0)
    with pytest.raises(BarrierError, match="cannot be set"):
        barrier.set_release(ddb, state_table, "r1", "c1", 1_000_000)
    barrier.arrive(ddb, state_table, "r1", "c1", 1)
    assert barrier.set_release(ddb, state_table, "r1", "c1", 1_000_000) == 1_000_000
    assert barrier.set_release(ddb, state_table, "r1", "c1", 2_000_000) == 1_000_000


def test_every_party_passes_at_the_one_instant_on_dynamodb_local(
    aws_client: Callable[[str], Any], state_table: str
) -> None:
    # given three slots (threads, each with its own client) at one barrier
    parties = 3
    barrier.create_barrier(aws_client("dynamodb"), state_table, "r1", "c1", parties)
    config = {"table": state_table, "run_id": "r1", "cell_id": "c1", "parties": parties}
    results: list[BarrierResult] = []

    def party(index: int) -> None:
        results.append(barrier.DynamoBarrier(aws_client("dynamodb"), config).wait(index))

    threads = [threading.Thread(target=party, args=(i,)) for i in range(parties)]
    # when
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    # then
    assert len(results) == parties and all(r.passed for r in results)
    (released,) = {r.released_us for r in results}
    assert released is not None
    assert all(r.passed_us is not None and r.passed_us >= released for r in results)


@pytest.mark.parametrize("parties", [1000, 1194, 1195, 3000, 5000])
def test_a_consistent_read_of_a_full_barrier_costs_no_more_than_the_poll_assumes(
    aws_client: Callable[[str], Any], state_table: str, parties: int
) -> None:
    # given a barrier item with every slot arrived and the release set (long ids)
    ddb = aws_client("dynamodb")
    run_id, cell_id = "seed004-app-build-fleet-20261123t150000z-a1b2c3", "c017-efs-x1200-r3"
    key = {k: {"S": v} for k, v in keys.barrier_item_key(run_id, cell_id).items()}
    barrier.create_barrier(ddb, state_table, run_id, cell_id, parties)
    for start in range(0, parties, 500):
        numbers = [str(i) for i in range(start, min(start + 500, parties))]
        ddb.update_item(
            TableName=state_table,
            Key=key,
            UpdateExpression="ADD arrived :s SET release_us = :r",
            ExpressionAttributeValues={":s": {"NS": numbers}, ":r": {"N": "1795446029000000"}},
        )
    # when read as the agent reads it
    out = ddb.get_item(
        TableName=state_table, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL"
    )
    # then DynamoDB charges at most what poll_interval assumes, and not much less
    charged = out["ConsumedCapacity"]["CapacityUnits"]
    assert barrier.read_units(parties) - 1 <= charged <= barrier.read_units(parties)
