"""burst_policy in a real slot: refill waits and fio drain phases on a loop device.

The payload carries the computed seconds (here tiny); the agent acts only on
block targets (EBS volumes on AWS, loop devices here) and records what it did
in slot.json. Needs root and loop devices, like the device guard tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from iofleet.agent.slot import run_slot
from iofleet.results.warehouse import Warehouse
from tests.integration.test_device_guard import _REASON, EBS_LINK, VOLUME_ID, Loops

RUN_ID = "burst-20261121t000000z"
CELL_ID = "c000-loop-x1-r1"
FIO = {"kind": "fio", "name": "latency-4k-qd1-randwrite", "params": {"RUNTIME": "1", "SIZE": "4m"}}


def _drain(seconds: float = 1.0, **extra: object) -> dict:
    action = {"workload_index": 0, "action": "drain", "seconds": seconds, "size": "8m", **extra}
    return {"policy": "drain", "actions": [action]}


def _payload(tmp_path: Path, target: dict, burst: dict, **changes: object) -> dict:
    doc = {
        "version": 1,
        "run_id": RUN_ID,
        "cell": {"cell_id": CELL_ID, "cell_index": 0, "fleet_size": 1, "repeat": 1},
        "slot_index": 0,
        "target": target,
        "workloads": [FIO],
        "results": {"kind": "directory", "root": str(tmp_path / "raw")},
        "time_limit_s": 120,
        "burst": burst,
    }
    doc.update(changes)
    return doc


def _slot_dir(tmp_path: Path) -> Path:
    return tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000"


def _slot_json(tmp_path: Path) -> dict:
    return json.loads((_slot_dir(tmp_path) / "slot.json").read_text())


def _directory_target(tmp_path: Path) -> dict:
    (tmp_path / "target").mkdir(exist_ok=True)
    return {"kind": "directory", "path": str(tmp_path / "target")}


# -- directory targets: a no-op with a note -----------------------------------------


def test_drain_on_a_directory_target_is_a_noop_with_a_note(tmp_path: Path) -> None:
    code = run_slot(_payload(tmp_path, _directory_target(tmp_path), _drain()))

    assert code == 0
    burst = _slot_json(tmp_path)["burst"]
    assert (burst["policy"], burst["applied"], burst["phases"]) == ("drain", False, [])
    assert "no-op on a directory target" in burst["note"]
    assert not (_slot_dir(tmp_path) / "w00-drain.json").exists()


def test_slot_without_burst_records_as_is(tmp_path: Path) -> None:
    doc = _payload(tmp_path, _directory_target(tmp_path), {})
    del doc["burst"]

    assert run_slot(doc) == 0
    assert _slot_json(tmp_path)["burst"] == {
        "policy": "as-is",
        "applied": False,
        "note": None,
        "phases": [],
    }


# -- block targets (loop devices) ---------------------------------------------------


@pytest.fixture
def device(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A blank loop device and a by-id folder that names it as the EBS volume."""
    if _REASON:
        pytest.skip(_REASON)
    kit = Loops(tmp_path)
    try:
        dev = kit.device()
        by_id = tmp_path / "by-id"
        by_id.mkdir()
        (by_id / EBS_LINK).symlink_to(dev)
        yield dev, by_id
    finally:
        kit.release()


def _block(by_id: Path, **target: object) -> dict:
    return {"kind": "block", "volume_id": VOLUME_ID, "by_id_dir": str(by_id), **target}


@pytest.fixture(scope="module")
def raw_drain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, int]]:
    """One slot with a 1 s drain on a raw loop device (its directory, the device, the
    slot's exit code): the two tests below read the same run."""
    if _REASON:
        pytest.skip(_REASON)
    tmp_path = tmp_path_factory.mktemp("raw-drain")
    kit = Loops(tmp_path)
    try:
        dev = kit.device()
        by_id = tmp_path / "by-id"
        by_id.mkdir()
        (by_id / EBS_LINK).symlink_to(dev)
        code = run_slot(_payload(tmp_path, _block(by_id, filesystem="raw"), _drain(1.0)))
        yield tmp_path, dev, code
    finally:
        kit.release()


@pytest.mark.device
def test_drain_on_a_raw_device_runs_fio_for_the_computed_seconds(
    raw_drain: tuple[Path, Path, int],
) -> None:
    tmp_path, dev, code = raw_drain

    assert code == 0
    [phase] = _slot_json(tmp_path)["burst"]["phases"]
    assert (phase["action"], phase["status"], phase["planned_s"]) == ("drain", "SUCCEEDED", 1.0)
    assert phase["artifact"].endswith("slot-0000/w00-drain.json")
    drain = json.loads((_slot_dir(tmp_path) / "w00-drain.json").read_text())
    job = drain["jobs"][0]
    assert (job["job options"]["runtime"], job["job options"]["filename"]) == ("1000ms", str(dev))
    assert job["write"]["io_bytes"] > 0


@pytest.mark.device
def test_drain_output_is_not_counted_in_results(raw_drain: tuple[Path, Path, int]) -> None:
    tmp_path, _, _ = raw_drain

    with Warehouse(":memory:") as wh:
        stats = wh.ingest_dir(tmp_path / "raw")
        workloads = wh.query("SELECT DISTINCT workload FROM fio_results")

    assert stats.errors == 0
    assert workloads == [{"workload": "latency-4k-qd1-randwrite"}]


@pytest.mark.device
def test_drain_on_a_filesystem_uses_a_scratch_file_and_removes_it(
    tmp_path: Path, device: tuple[Path, Path]
) -> None:
    _, by_id = device
    mount_point = tmp_path / "mnt"
    target = _block(by_id, filesystem="ext4", mount_point=str(mount_point), created_by_run=True)
    app = {"kind": "app", "name": "ls", "run": "ls -a"}
    burst = {
        "policy": "drain",
        "actions": [{"workload_index": 0, "seconds": 1.0, "size": "8m", "rw": "write", "bs": "1m"}],
    }
    doc = _payload(tmp_path, target, burst, workloads=[FIO, app])

    code = run_slot(doc)

    assert code == 0
    drain = json.loads((_slot_dir(tmp_path) / "w00-drain.json").read_text())
    assert drain["jobs"][0]["job options"]["rw"] == "write"
    listing = json.loads((_slot_dir(tmp_path) / "w01-app-ls.json").read_text())["stdout_tail"]
    assert "iofleet-drain.dat" not in listing


@pytest.mark.device
def test_refill_waits_the_computed_seconds_and_records_them(
    tmp_path: Path, device: tuple[Path, Path]
) -> None:
    _, by_id = device
    burst = {"policy": "refill", "actions": [{"workload_index": 0, "seconds": 0.2}]}

    code = run_slot(_payload(tmp_path, _block(by_id, filesystem="raw"), burst))

    assert code == 0
    [phase] = _slot_json(tmp_path)["burst"]["phases"]
    assert (phase["action"], phase["status"], phase["seconds"]) == ("refill", "SUCCEEDED", 0.2)
    assert phase["artifact"] is None


@pytest.mark.device
def test_refill_longer_than_the_time_limit_is_cut_short_and_fails_the_slot(
    tmp_path: Path, device: tuple[Path, Path]
) -> None:
    _, by_id = device
    burst = {"policy": "refill", "actions": [{"workload_index": 0, "seconds": 3600}]}

    code = run_slot(_payload(tmp_path, _block(by_id, filesystem="raw"), burst, time_limit_s=1))

    assert code == 1
    record = _slot_json(tmp_path)
    [phase] = record["burst"]["phases"]
    assert phase["status"] == "TIMED_OUT"
    assert phase["seconds"] < 3600
    assert record["workloads"][0]["status"] in ("SKIPPED", "TIMED_OUT")
