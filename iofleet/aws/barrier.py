"""Start barrier across the slots of a cell, on one DynamoDB item.

Stdlib only; boto3 is imported lazily (python3-boto3 on the instance).
The cell's prepare step creates the item `{pk: barrier#RUN#CELL, sk: barrier,
parties: N}`. Each slot adds its index to the number set `arrived` (idempotent:
a retried slot is counted once) and polls (the agent's `Barrier.wait`) until the set holds `parties` members.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iofleet.agent.barrier import Barrier, register_barrier
from iofleet.aws.keys import barrier_item_key


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


def count(ddb: Any, table: str, run_id: str, cell_id: str) -> int:
    key = {k: {"S": v} for k, v in barrier_item_key(run_id, cell_id).items()}
    item = ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    return _counts(item)[0] if item else 0


class DynamoBarrier(Barrier):
    """The agent's Barrier on the cell's DynamoDB item (kind `dynamodb` in a slot payload)."""

    def __init__(self, ddb: Any, config: Mapping[str, object]) -> None:
        self.ddb = ddb
        self.table = str(config["table"])
        self.run_id = str(config["run_id"])
        self.cell_id = str(config["cell_id"])
        self.parties = int(config["parties"])  # type: ignore[call-overload]
        self.timeout_s = float(config.get("timeout_s", 900))  # type: ignore[arg-type]

    def announce(self, party: int) -> None:
        arrive(self.ddb, self.table, self.run_id, self.cell_id, party)

    def count(self) -> int:
        return count(self.ddb, self.table, self.run_id, self.cell_id)


def register(ddb: Any) -> None:
    """Make `{"kind": "dynamodb", ...}` usable as a slot payload barrier."""
    register_barrier("dynamodb", lambda config: DynamoBarrier(ddb, config))
