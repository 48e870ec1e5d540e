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
    assert "slot_index: must be an integer from 0 to 99999" in message
    assert "workloads[1].count: must be an integer from 1 to 1000000" in message
    assert "time_limit_s: must be a positive number up to 604800" in message


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

    with pytest.raises(PayloadError, match=r"cell\.cell_id: 1-200 letters, digits"):
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


# --- values that would reach paths, command lines and timers --------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"run_id": "demo\n"}, "run_id: contains a control character"),
        ({"run_id": "r" * 201}, "run_id: 1-200 letters, digits and . _ - only"),
        ({"time_limit_s": float("nan")}, "time_limit_s: must be a positive number up to"),
        ({"time_limit_s": float("inf")}, "time_limit_s: must be a positive number up to"),
        ({"time_limit_s": 1e12}, "time_limit_s: must be a positive number up to"),
        ({"slot_index": 10**30}, "slot_index: must be an integer from 0 to 99999"),
        ({"target": {"kind": "directory", "path": "/tmp/t\nx"}}, "target.path: contains a"),
        (
            {"target": {"kind": "directory", "path": "/tmp/\ud800"}},
            "target.path: not valid Unicode",
        ),
        (
            {
                "target": {
                    "kind": "block",
                    "volume_id": "vol-0123456789abcdef0",
                    "filesystem": "xfs",
                    "mount_point": "/mnt/x",
                    "mount_options": "noatime -o x",
                }
            },
            "target.mount_options: mount options",
        ),
        (
            {
                "target": {
                    "kind": "block",
                    "volume_id": "vol-0123456789abcdef0",
                    "filesystem": "raw",
                    "attach_wait_s": float("nan"),
                }
            },
            "target.attach_wait_s: must be a number from 0 up to",
        ),
    ],
)
def test_values_that_cannot_run_are_refused(change: dict, expected: str) -> None:
    with pytest.raises(PayloadError) as caught:
        parse_payload(_payload(**change))
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"SIZE": "../../etc"}, "workloads[0].params.SIZE: '../../etc' is not a plain token"),
        ({"SIZE": "1g\n"}, "workloads[0].params.SIZE: '1g\\n' is not a plain token"),
        ({"RUNTIME": float("nan")}, "workloads[0].params.RUNTIME: must be a finite number"),
        ({"RUN TIME": 1}, "workloads[0].params: parameter name 'RUN TIME' must be a plain name"),
    ],
)
def test_fio_params_are_plain_tokens(params: dict, expected: str) -> None:
    doc = _payload()
    doc["workloads"][0]["params"] = params
    with pytest.raises(PayloadError) as caught:
        parse_payload(doc)
    assert expected in str(caught.value)


def test_app_run_may_span_lines_but_not_hold_nul() -> None:
    doc = _payload()
    doc["workloads"][2]["run"] = "make\nmake check"
    assert parse_payload(doc).workloads[2].run == "make\nmake check"
    doc["workloads"][2]["run"] = "make\x00"
    with pytest.raises(PayloadError, match=r"workloads\[2\]\.run: contains a control character"):
        parse_payload(doc)


def test_volume_id_rule_is_a_full_string_match() -> None:
    from iofleet.agent.devices import DeviceError, volume_serial

    assert volume_serial("vol-0123456789abcdef0") == "vol0123456789abcdef0"
    with pytest.raises(DeviceError, match="not an EBS volume id"):
        volume_serial("vol-0123456789abcdef0\n")
