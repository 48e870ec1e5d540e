# ruff: noqa: F811 - the `network` fixture is imported from test_fleet_handlers
"""The CheckStorage/WaitForStorage loop is bounded: a file system the cell created that is
not ready by its `ready_by` fails the cell with the reason, through the same PrepareCell
handler the state machine calls (moto server; its FSx Lifecycle from
tests/cloud/localcloud/fsx_lifecycle.py, CREATING for the first two descriptions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from iofleet.aws import cell as cells
from lambdas.prepare_cell import handler as prepare
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext
from tests.unit.lambdas.test_fleet_handlers import network  # noqa: F401
from tests.unit.lambdas.test_fsx_handlers import _lifecycle, _run  # noqa: F401 - autouse fixture

ZFS = {
    "type": "fsx-openzfs",
    "label": "zfs",
    "storage_capacity_gib": 64,
    "throughput_capacity": 64,
}


def _poll(context: FakeLambdaContext, run: dict[str, Any], prepared: dict[str, Any]) -> Any:
    return prepare.handler(
        {
            "action": "status",
            "run_id": run["run_id"],
            "cell": run["cells"][0],
            "prepared": prepared,
        },
        context,
    )


def test_a_created_file_system_gets_its_deadline_and_fails_the_cell_past_it(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    run = _run(context, network["ami"], ZFS)
    before = datetime.now(UTC)
    prepared = prepare.handler(
        {"action": "prepare", "run_id": run["run_id"], "cell": run["cells"][0]}, context
    )
    storage = prepared["storage"]
    assert storage["ready"] is False and storage["created"] is True
    ready_by = datetime.fromisoformat(storage["ready_by"])
    limit = timedelta(seconds=cells.READY_LIMIT_S["fsx-openzfs"])
    assert before + limit <= ready_by <= datetime.now(UTC) + limit
    # the deadline passes while FSx still says CREATING (moved, not waited for)
    late = {
        **prepared,
        "storage": {**storage, "ready_by": (before - timedelta(seconds=1)).isoformat()},
    }
    with pytest.raises(cells.StorageNotReady) as failed:
        _poll(context, run, late)
    assert storage["file_system_id"] in str(failed.value)
    assert "CREATING" in str(failed.value)
    (fs,) = cloud.client("fsx").describe_file_systems(FileSystemIds=[storage["file_system_id"]])[
        "FileSystems"
    ]
    assert fs["Lifecycle"] == "AVAILABLE"  # the stand-in's third description: it became ready
    # ready on the poll after the deadline: the cell goes on, the deadline no longer matters
    done = _poll(context, run, late)
    assert done["storage"]["ready"] is True
    assert done["storage"]["mount"]["dns_name"] == fs["DNSName"]


def test_an_existing_file_system_has_no_deadline(
    cloud: Cloud, network: dict[str, str], context: FakeLambdaContext
) -> None:
    fs_id = cloud.client("fsx").create_file_system(
        FileSystemType="OPENZFS",
        StorageCapacity=64,
        SubnetIds=[network["subnet"]],
        OpenZFSConfiguration={"DeploymentType": "SINGLE_AZ_1", "ThroughputCapacity": 160},
    )["FileSystem"]["FileSystemId"]
    run = _run(
        context, network["ami"], {"type": "fsx-openzfs", "label": "x", "file_system_id": fs_id}
    )
    prepared = prepare.handler(
        {"action": "prepare", "run_id": run["run_id"], "cell": run["cells"][0]}, context
    )
    assert prepared["storage"]["created"] is False and "ready_by" not in prepared["storage"]


def test_an_unreadable_deadline_fails_the_cell_not_waits_forever() -> None:
    storage = {"ready": False, "created": True, "kind": "efs", "ready_by": "soon"}
    with pytest.raises(cells.StorageNotReady, match="unreadable ready_by"):
        cells._past_deadline(storage, datetime.now(UTC))
