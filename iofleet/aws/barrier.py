"""Start barrier across the slots of a cell, on one DynamoDB item.

Stdlib only; boto3 is imported lazily (python3-boto3 on the instance).
The cell's prepare step creates the item `{pk: barrier#RUN#CELL, sk: barrier,
parties: N}`. Each slot adds its index to the number set `arrived` (idempotent:
a retried slot is counted once) and polls until the set holds `parties` members.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from iofleet.aws.keys import barrier_item_key


class BarrierTimeout(Exception):
    """Not every slot arrived in time; the message is one line."""


def create_barrier(ddb: Any, table: str, run_id: str, cell_id: str, parties: int) -> None:
    """(Re)create the barrier item for a cell with nobody arrived."""
    ddb.put_item(
        TableName=table,
        Item={
            **{k: {"S": v} for k, v in barrier_item_key(run_id, cell_id).items()},
            "parties": {"N": str(parties)},
        },
    )


def arrive(ddb: Any, table: str, run_id: str, cell_id: str, slot_index: int) -> tuple[int, int]:
    """Record this slot's arrival; returns (arrived, parties)."""
    key = {k: {"S": v} for k, v in barrier_item_key(run_id, cell_id).items()}
    out = ddb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="ADD arrived :me",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeValues={":me": {"NS": [str(slot_index)]}},
        ReturnValues="ALL_NEW",
    )
    return _counts(out["Attributes"])


def _counts(item: dict[str, Any]) -> tuple[int, int]:
    arrived = len(item.get("arrived", {}).get("NS", []))
    return arrived, int(item["parties"]["N"])


def wait(
    ddb: Any,
    table: str,
    run_id: str,
    cell_id: str,
    slot_index: int,
    timeout_s: float,
    poll_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Arrive, then block until every party has arrived. Returns the party count."""
    arrived, parties = arrive(ddb, table, run_id, cell_id, slot_index)
    deadline = clock() + timeout_s
    key = {k: {"S": v} for k, v in barrier_item_key(run_id, cell_id).items()}
    while arrived < parties:
        if clock() >= deadline:
            raise BarrierTimeout(
                f"start barrier for {cell_id}: {arrived} of {parties} slots arrived within {timeout_s:g}s"
            )
        sleep(poll_s)
        item = ddb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
        arrived, parties = _counts(item)
    return parties
