"""Slot payload validation: clear one-line errors, defaults, unknown keys ignored."""

from __future__ import annotations

import copy

import pytest

from iofleet.agent.payload import PayloadError, parse_payload
from iofleet.errors import UsageError

PAYLOAD: dict = {
    "version": 1,
    "run_id": "demo-20261121t051200z",
    "cell": {"cell_id": "c000-local-fast-x2-r1", "cell_index": 0, "fleet_size": 2},
    "slot_index": 1,
    "target": {"kind": "directory", "path": "/tmp/target"},
    "workloads": [
        {"kind": "fio", "name": "latency-4k-qd1-randread", "params": {"RUNTIME": 1}},
        {"kind": "ioping", "count": 5, "interval_ms": 0, "write": True},
        {"kind": "app", "name": "c-build", "run": "make", "populate": None},
    ],
    "barrier": {"kind": "file", "dir": "/tmp/barrier", "parties": 2, "timeout_s": 60},
    "results": {"kind": "directory", "root": "/tmp/raw"},
    "time_limit_s": 600,
}


def _payload(**changes: object) -> dict:
    doc = copy.deepcopy(PAYLOAD)
    doc.update(changes)
    return doc


def test_valid_payload_is_parsed() -> None:
    spec = parse_payload(_payload())

    assert spec.slot_prefix == "demo-20261121t051200z/c000-local-fast-x2-r1/slot-0001"
    assert [w.kind for w in spec.workloads] == ["fio", "ioping", "app"]
    assert spec.fleet_size == 2


def test_fio_params_become_strings() -> None:
    assert parse_payload(_payload()).workloads[0].params == {"RUNTIME": "1"}


def test_optional_keys_default() -> None:
    doc = _payload()
    del doc["time_limit_s"], doc["barrier"]

    spec = parse_payload(doc)

    assert spec.time_limit_s == 3600.0
    assert spec.barrier is None
    assert spec.platform == "local"


def test_unknown_workload_keys_are_ignored() -> None:
    doc = _payload()
    doc["workloads"][1]["comment"] = "for people"

    assert parse_payload(doc).workloads[1].count == 5


def test_every_problem_is_reported_on_one_line() -> None:
    doc = _payload(slot_index=-1, time_limit_s=0)
    doc["workloads"][1]["count"] = 0

    with pytest.raises(PayloadError) as caught:
        parse_payload(doc)

    message = str(caught.value)
    assert "\n" not in message
    assert "slot_index: must be an integer >= 0" in message
    assert "workloads[1].count: must be an integer >= 1" in message
    assert "time_limit_s: must be a positive number" in message


def test_unknown_workload_kind_is_rejected() -> None:
    doc = _payload()
    doc["workloads"][0]["kind"] = "dd"

    with pytest.raises(
        PayloadError, match=r"workloads\[0\]\.kind: must be one of fio, ioping, app"
    ):
        parse_payload(doc)


def test_cell_id_with_a_slash_is_rejected() -> None:
    doc = _payload()
    doc["cell"]["cell_id"] = "../etc"

    with pytest.raises(PayloadError, match=r"cell\.cell_id: letters, digits"):
        parse_payload(doc)


def test_relative_target_path_is_rejected() -> None:
    with pytest.raises(PayloadError, match="target.path: must be an absolute path"):
        parse_payload(_payload(target={"kind": "directory", "path": "data"}))


def test_block_target_needs_a_mount_point_unless_raw() -> None:
    target = {"kind": "block", "volume_id": "vol-0123456789abcdef0", "filesystem": "xfs"}

    with pytest.raises(PayloadError, match="target.mount_point: required"):
        parse_payload(_payload(target=target))


def test_raw_block_target_needs_no_mount_point() -> None:
    target = {"kind": "block", "volume_id": "vol-0123456789abcdef0", "filesystem": "raw"}

    spec = parse_payload(_payload(target=target))

    assert spec.target.mount_point is None
    assert spec.target.created_by_run is False


def test_payload_error_is_a_usage_error() -> None:
    # the CLI prints UsageError as one line and exits 2
    with pytest.raises(UsageError):
        parse_payload([])
