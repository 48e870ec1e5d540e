"""iofleet.aws.ddb: attribute typing for the shared SET helper (pure)."""

from __future__ import annotations

from typing import Any

from iofleet.aws.ddb import attribute_value, set_attributes


class _RecordingClient:
    """Records update_item calls: the request shape is what is under test here;
    the handler tests run the same helper against moto's DynamoDB."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def update_item(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)


def test_attribute_values_are_typed() -> None:
    assert attribute_value(True) == {"BOOL": True}
    assert attribute_value(3) == {"N": "3"}
    assert attribute_value(2.5) == {"N": "2.5"}
    assert attribute_value("x") == {"S": "x"}


def test_none_values_are_not_set() -> None:
    ddb = _RecordingClient()
    set_attributes(ddb, "t", {"pk": "a", "sk": "b"}, {"status": "DONE", "error": None, "n": 1})
    (call,) = ddb.calls
    assert call["UpdateExpression"] == "SET #n0 = :v0, #n1 = :v1"
    assert call["ExpressionAttributeNames"] == {"#n0": "status", "#n1": "n"}
    assert call["ExpressionAttributeValues"] == {":v0": {"S": "DONE"}, ":v1": {"N": "1"}}
    assert call["Key"] == {"pk": {"S": "a"}, "sk": {"S": "b"}}


def test_nothing_to_set_makes_no_call() -> None:
    ddb = _RecordingClient()
    set_attributes(ddb, "t", {"pk": "a"}, {"error": None})
    assert ddb.calls == []
