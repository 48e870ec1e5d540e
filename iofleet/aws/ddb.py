"""DynamoDB access shared by the Lambdas: SET the given attributes (skip None), and
read the items of one partition page by page."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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


def query_items(
    ddb: Any, table: str, pk: str, sk_prefix: str = "", *, consistent: bool = False
) -> Iterator[dict[str, Any]]:
    """Every item of partition `pk` whose sort key starts with `sk_prefix` (all of them
    when empty), following LastEvaluatedKey; attribute values as DynamoDB returns them."""
    values: dict[str, Any] = {":pk": {"S": pk}}
    condition = "pk = :pk"
    if sk_prefix:
        condition += " AND begins_with(sk, :sk)"
        values[":sk"] = {"S": sk_prefix}
    args: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": values,
    }
    if consistent:
        args["ConsistentRead"] = True
    while True:
        page = ddb.query(**args)
        yield from page["Items"]
        if "LastEvaluatedKey" not in page:
            return
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]
