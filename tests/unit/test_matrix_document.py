"""The document under a matrix: what Python's json lets through is refused at its path.

The Plan Lambda gets the matrix already parsed (the Lambda runtime's json takes NaN and
Infinity and huge integers), so validate_matrix_dict checks the objects themselves;
`iofleet plan` parses the bytes with the same rules first.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from iofleet.errors import ValidationFailed
from iofleet.plan.matrix import (
    MAX_MATRIX_BYTES,
    build_plan,
    load_matrix_bytes,
    load_matrix_file,
    plan_size,
    validate_matrix_dict,
)

MATRIX: dict[str, Any] = {
    "name": "doc",
    "instance_types": ["m6i.large"],
    "storage": [{"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100}],
    "workloads": [{"fio": "seq-read-1m-qd32", "params": {"RUNTIME": 60}}],
    "parallelism": [1],
}


def lines_for(doc: object) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        validate_matrix_dict(doc)
    return caught.value.lines()


def nested(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("slot_timeout_s",), float("nan"), "slot_timeout_s: NaN is not a finite number"),
        (("limits",), {"budget_usd": float("inf")}, "limits.budget_usd: Infinity is not a finite"),
        (("repeats",), 10**400, "repeats: integer out of range (beyond 64 bits)"),
        (("storage", 0, "size_gib"), 2**63, "storage[0].size_gib: integer out of range"),
        (("description",), "\ud800", "description: not valid Unicode (lone surrogate"),
        (("description",), "a\x00b", "description: contains a NUL character"),
        (("description",), nested(10_000), "description[0]"),
        (("limits",), {1: 2}, "limits: keys must be strings, got int"),
        (("workloads", 0, "params"), {"RUNTIME": b"60"}, "workloads[0].params.RUNTIME: not a JSON"),
    ],
    ids=["nan", "inf", "huge", "int64", "surrogate", "nul", "deep", "int-key", "bytes"],
)
def test_values_json_cannot_carry_are_refused_at_their_path(
    path: tuple[Any, ...], value: object, expected: str
) -> None:
    doc = copy.deepcopy(MATRIX)
    cur: Any = doc
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    lines = lines_for(doc)
    assert len(lines) == 1 and lines[0].startswith(expected), lines


def test_deep_nesting_is_refused_without_recursion() -> None:
    lines = lines_for(dict(MATRIX, description=nested(100_000)))
    assert lines == ["description" + "[0]" * 15 + ": nested deeper than 16 levels"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\xef\xbb\xbf{}", "the matrix starts with a byte order mark"),
        (b"\xff\xfe{\x00}\x00", "the matrix is UTF-16 text (save it as UTF-8)"),
        (b'{"name": "\xc3"}', "line 1: not UTF-8 (byte 0xc3 at offset 10)"),
        (b'{"a": 1, "a": 2}', "a: duplicate key (each key at most once)"),
        (b'{"repeats": NaN}', "repeats: NaN is not a JSON number"),
        (b'{"repeats": -Infinity}', "repeats: -Infinity is not a JSON number"),
        (b'{"repeats": 1e400}', "repeats: 1e400 is out of range of a finite number"),
        (b'{"repeats": ' + b"9" * 5000 + b"}", "repeats: a 5000-digit integer is out of range"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 16 levels"),
        (b"{}" + b" " * MAX_MATRIX_BYTES, f"the matrix is over the {MAX_MATRIX_BYTES} byte limit"),
    ],
    ids=["bom", "utf16", "bad-utf8", "duplicate", "nan", "-inf", "1e400", "digits", "deep", "size"],
)
def test_bytes_that_are_no_matrix_get_one_line(data: bytes, expected: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        load_matrix_bytes(data)
    assert len(caught.value.lines()) == 1
    assert caught.value.lines()[0].startswith(expected)


@pytest.mark.parametrize(
    ("key", "items"),
    [
        ("parallelism", [5] * 150),
        ("instance_types", ["m6i.large"] * 150),
        ("storage", [{**MATRIX["storage"][0], "iops": 50000}] * 150),
        ("workloads", [{"fio": "seq-read-1m-qd32", "params": {"RUNTIME": "0"}}] * 150),
    ],
)
def test_a_list_over_its_limit_is_one_line_not_one_per_item(key: str, items: list[Any]) -> None:
    # each item was also checked: a duplicate or bad item beyond the limit was a line of
    # its own (a 1 MiB matrix made tens of thousands of lines)
    assert lines_for({**MATRIX, key: items}) == [f"{key}: at most 100 items, got 150"]


def test_an_empty_path_is_no_matrix_file_not_the_working_directory() -> None:
    # Path("") is "."; an unset $MATRIX was refused as "is a directory" (the fuzzer's find)
    with pytest.raises(ValidationFailed) as caught:
        load_matrix_file("")
    assert caught.value.lines() == [": no such matrix file (the path is empty)"]


def test_a_file_over_the_limit_is_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as handle:
        handle.write(json.dumps(MATRIX).encode())
        handle.truncate(64 * MAX_MATRIX_BYTES)  # sparse: 64 MiB
    with pytest.raises(ValidationFailed, match="over the 1048576 byte limit"):
        load_matrix_file(path)


def test_plan_size_is_counted_not_expanded() -> None:
    matrix = validate_matrix_dict(
        dict(
            MATRIX,
            instance_types=["m6i.large", "c6a.xlarge"],
            parallelism=[1, 10, 50],
            repeats=3,
            limits={"max_instances": 1000},
        )
    )
    assert plan_size(matrix, "aws") == (2 * 3 * 3, 2 * 61 * 3)
    assert plan_size(matrix, "local") == (3 * 3, 61 * 3)
    plan = build_plan(matrix, "aws", max_instances=1000)
    assert (len(plan.cells), plan.total_instances) == plan_size(matrix, "aws")


def test_deployment_cap_is_checked_with_the_counts() -> None:
    matrix = validate_matrix_dict(dict(MATRIX, parallelism=[10, 20]))
    with pytest.raises(ValidationFailed) as caught:
        build_plan(matrix, "aws", max_instances=25)
    assert caught.value.lines() == [
        "limits.max_instances: plan needs 30 instances, over this deployment's "
        "max_instances_per_run of 25"
    ]


def test_the_largest_allowed_matrix_is_refused_quickly_by_arithmetic() -> None:
    # 100 instance types x 100 storage x 100 fleet sizes x 1000 repeats = 1e9 cells
    matrix = validate_matrix_dict(
        dict(
            MATRIX,
            instance_types=[f"m{i}i.large" for i in range(1, 101)],
            storage=[dict(MATRIX["storage"][0], label=f"s{i}") for i in range(100)],
            parallelism=list(range(1, 101)),
            repeats=1000,
            limits={"max_instances": 100_000},
        )
    )
    with pytest.raises(ValidationFailed) as caught:
        build_plan(matrix, "aws")
    assert caught.value.lines()[1] == (
        "plan has 1000000000 cells (instance types x storage x parallelism x repeats), "
        "over the limit of 500 cells per run"
    )
