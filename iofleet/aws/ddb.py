"""DynamoDB item updates shared by the Lambdas: SET the given attributes, skip None."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def attribute_value(value: object) -> dict[str, Any]:
    """A DynamoDB attribute value: bool -> BOOL, int/float -> N, anything else -> S."""
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": str(value)}
    return {"S": str(value)}


def set_attributes(
    ddb: Any, table: str, key: Mapping[str, str], values: Mapping[str, object]
) -> None:
    """SET every attribute of `values` whose value is not None on the item at `key`."""
    present = [(name, value) for name, value in values.items() if value is not None]
    if not present:
        return
    ddb.update_item(
        TableName=table,
        Key={k: {"S": v} for k, v in key.items()},
        UpdateExpression="SET " + ", ".join(f"#n{i} = :v{i}" for i in range(len(present))),
        ExpressionAttributeNames={f"#n{i}": name for i, (name, _) in enumerate(present)},
        ExpressionAttributeValues={
            f":v{i}": attribute_value(v) for i, (_, v) in enumerate(present)
        },
    )
