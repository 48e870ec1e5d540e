"""Start barrier across the slots of a cell, on one DynamoDB item.

Stdlib only; boto3 is imported lazily (python3-boto3 on the instance).
The cell's prepare step creates the item `{pk: barrier#RUN#CELL, sk: barrier,
parties: N}`. Each slot adds its index to the number set `arrived` (idempotent:
a retried slot is counted once). The first slot to see `parties` members
(normally the last to arrive, from its own update's answer) sets `release_us`,
the agreed start instant in microseconds since the epoch, with a conditional
update (`attribute_not_exists(release_us)`): exactly one instant is ever set.
The others read the item with strongly consistent reads at a fixed interval
(the agent's `Barrier.wait`) and sleep until that instant.

Read rate: the item lives on one partition, which serves at most 3,000 read
units a second, and a strongly consistent read costs one unit per 4 KB of the
item (about 3 bytes per slot number in `arrived` plus under 512 bytes of the
rest: one unit up to 1,194 slots). Waiting parties together spend at most
READ_UNITS_PER_S = 1,000 units a second: the interval is max(0.1 s, parties x
units per read / 1,000 s), so 1 s for 1,000 parties (a margin of 2.25 s before
the start), 0.1 s for up to 100. A barrier wait lasts as long as the fleet
takes to boot (about a minute to a few minutes), so a 1,000-slot cell reads
about 60,000 to 300,000 units: 0.01 to 0.04 USD on demand at 0.125 USD per
million read units.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iofleet.agent.barrier import Barrier, BarrierError, BarrierState, register_barrier
from iofleet.aws.keys import barrier_item_key

READ_UNITS_PER_S = 1000  # all waiting parties together; a third of a partition's limit
MIN_POLL_S = 0.1
SLACK_S = 0.25  # one GetItem with an SDK retry, on top of the poll interval


def read_units(parties: int) -> int:
    """Read units of one strongly consistent GetItem of a full barrier item (4 KB each),
    rounded up: a slot number below 10,000 takes at most 3 bytes in a number set and the
    rest of the item under 512 (DynamoDB Local charges 2 units from about 1,400 slots)."""
    return -(-(512 + 3 * parties) // 4096)


def poll_interval(parties: int) -> float:
    """The fixed poll interval for `parties` waiting slots (see the module doc)."""
    return max(MIN_POLL_S, parties * read_units(parties) / READ_UNITS_PER_S)


def create_barrier(ddb: Any, table: str, run_id: str, cell_id: str, parties: int) -> None:
    """(Re)create the barrier item for a cell with nobody arrived."""
    ddb.put_item(
        TableName=table,
        Item={
            **{k: {"S": v} for k, v in barrier_item_key(run_id, cell_id).items()},
            "parties": {"N": str(parties)},
        },
    )


def _key(run_id: str, cell_id: str) -> dict[str, dict[str, str]]:
    return {k: {"S": v} for k, v in barrier_item_key(run_id, cell_id).items()}


def arrive(ddb: Any, table: str, run_id: str, cell_id: str, slot_index: int) -> tuple[int, int]:
    """Record this slot's arrival; returns (arrived, parties)."""
    item = _arrive(ddb, table, run_id, cell_id, slot_index)
    return _counts(item)


def _arrive(ddb: Any, table: str, run_id: str, cell_id: str, slot_index: int) -> dict[str, Any]:
    out = ddb.update_item(
        TableName=table,
        Key=_key(run_id, cell_id),
        UpdateExpression="ADD arrived :me",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeValues={":me": {"NS": [str(slot_index)]}},
        ReturnValues="ALL_NEW",
    )
    return dict(out["Attributes"])


def _counts(item: Mapping[str, Any]) -> tuple[int, int]:
    arrived = len(item.get("arrived", {}).get("NS", []))
    return arrived, int(item["parties"]["N"])


def _state(item: Mapping[str, Any] | None) -> BarrierState:
    if not item:
        return BarrierState(0, None)
    release = item.get("release_us", {}).get("N")
    return BarrierState(_counts(item)[0], int(release) if release is not None else None)


def count(ddb: Any, table: str, run_id: str, cell_id: str) -> int:
    return _read(ddb, table, run_id, cell_id).arrived


def _read(ddb: Any, table: str, run_id: str, cell_id: str) -> BarrierState:
    out = ddb.get_item(TableName=table, Key=_key(run_id, cell_id), ConsistentRead=True)
    return _state(out.get("Item"))


def set_release(ddb: Any, table: str, run_id: str, cell_id: str, at_us: int) -> int:
    """Set the release instant unless one is set (and only once every party arrived);
    returns the instant in force."""
    try:
        ddb.update_item(
            TableName=table,
            Key=_key(run_id, cell_id),
            UpdateExpression="SET release_us = :at",
            ConditionExpression=(
                "attribute_exists(pk) AND attribute_not_exists(release_us) "
                "AND size(arrived) >= parties"
            ),
            ExpressionAttributeValues={":at": {"N": str(at_us)}},
        )
        return at_us
    except Exception as exc:
        if _error_code(exc) != "ConditionalCheckFailedException":
            raise
    state = _read(ddb, table, run_id, cell_id)
    if state.release_us is None:
        raise BarrierError(
            f"barrier {run_id}/{cell_id}: the release instant cannot be set "
            f"({state.arrived} parties arrived)"
        )
    return state.release_us


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


class DynamoBarrier(Barrier):
    """The agent's Barrier on the cell's DynamoDB item (kind `dynamodb` in a slot payload)."""

    def __init__(self, ddb: Any, config: Mapping[str, object]) -> None:
        self.ddb = ddb
        self.table = str(config["table"])
        self.run_id = str(config["run_id"])
        self.cell_id = str(config["cell_id"])
        self.parties = int(config["parties"])  # type: ignore[call-overload]
        self.timeout_s = float(config.get("timeout_s", 900))  # type: ignore[arg-type]
        self.poll_s = poll_interval(self.parties)
        self.slack_s = SLACK_S

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(self.ddb, self.table, self.run_id, self.cell_id, *args)
        except BarrierError:
            raise
        except Exception as exc:  # noqa: BLE001 - botocore's errors: one line for slot.json
            raise BarrierError(
                f"barrier {self.run_id}/{self.cell_id}: {what}: {type(exc).__name__}: {exc}"
            ) from None

    def announce(self, party: int) -> BarrierState:
        return _state(self._call("arrive", _arrive, party))

    def state(self) -> BarrierState:
        return self._call("read", _read)  # type: ignore[no-any-return]

    def propose_release(self, at_us: int) -> int:
        return self._call("set the release", set_release, at_us)  # type: ignore[no-any-return]


def register(ddb: Any) -> None:
    """Make `{"kind": "dynamodb", ...}` usable as a slot payload barrier."""
    register_barrier("dynamodb", lambda config: DynamoBarrier(ddb, config))
