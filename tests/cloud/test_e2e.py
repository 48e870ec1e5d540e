"""End to end on the local cloud: the deployed state machine runs a small matrix for real.

Substitutes (see tests/cloud/localcloud/__init__.py): CloudFormation is played
by the deployer, Lambda invokes run the real handlers from their asset zips in
warm worker processes, RunInstances starts the real agent command from the
user-data as a local process (EFS mounts become bind mounts of temp dirs in a
private mount namespace), Athena is a thin API over Trino, the SQS event
source mapping is a poller thread invoking the ingest function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trino_client import TrinoClient

from iofleet.aws import keys
from iofleet.results.warehouse import Warehouse
from tests.cloud.localcloud.fixtures import LocalStack, poll

FIO = {
    "fio": "randread-16k-psync-16jobs",
    "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 2, "DIRECT": 0},
}
IOPING = {"ioping": {"count": 5, "interval_ms": 0}}
APP = {"app": {"name": "small-files", "run": "for i in 1 2 3 4 5; do echo $i > f$i; done; sync"}}


def matrix(stack: LocalStack, name: str, **extra: Any) -> dict[str, Any]:
    fs_a, fs_b = sorted(stack.file_systems)
    doc: dict[str, Any] = {
        "name": name,
        "instance_types": ["m6i.large"],
        "ami_id": stack.ami,
        "storage": [
            {"type": "efs", "label": "efs-a", "file_system_id": fs_a},
            {"type": "efs", "label": "efs-b", "file_system_id": fs_b},
        ],
        "workloads": [FIO, IOPING, APP],
        "parallelism": [1, 3],
        "slot_timeout_s": 600,
    }
    doc.update(extra)
    return doc


@pytest.fixture(scope="module")
def e2e_run(local_stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # given: a matrix of 2 EFS labels x fleets of 1 and 3 with fio, ioping and an app
    arn = local_stack.start(matrix(local_stack, "e2e"))
    # when: the execution runs to its end and ingest has drained the queue
    desc = local_stack.wait(arn)
    run_id = local_stack.run_id_of(arn)
    local_stack.esm.wait_drained()
    raw = local_stack.download(f"raw/{run_id}/", tmp_path_factory.mktemp("e2e-raw"))
    return {"arn": arn, "desc": desc, "run_id": run_id, "raw": raw}


def test_execution_succeeds(e2e_run: dict[str, Any], local_stack: LocalStack) -> None:
    assert e2e_run["desc"]["status"] == "SUCCEEDED", local_stack.history(e2e_run["arn"])[-3:]


def test_run_item_says_succeeded(e2e_run: dict[str, Any], local_stack: LocalStack) -> None:
    item = local_stack.run_item(e2e_run["run_id"])
    assert item["status"] == "SUCCEEDED"
    assert int(item["summary_rows"]) > 0


def test_every_slot_uploaded_its_raw_objects(e2e_run: dict[str, Any]) -> None:
    raw: Path = e2e_run["raw"] / e2e_run["run_id"]
    slots = sorted(p.parent.relative_to(raw).as_posix() for p in raw.glob("*/slot-*/slot.json"))
    cells = sorted(p.name for p in raw.iterdir() if p.is_dir())
    assert len(cells) == 4
    assert len(slots) == 1 + 3 + 1 + 3
    for slot in slots:
        names = sorted(p.name for p in (raw / slot).iterdir())
        assert names == [
            "manifest.json",
            "slot.json",
            "w00-fio-randread-16k-psync-16jobs.json",
            "w01-ioping.json",
            "w02-app-small-files.json",
        ]


def test_every_slot_is_ingested_into_dynamodb(
    e2e_run: dict[str, Any], local_stack: LocalStack
) -> None:
    slots = local_stack.items(e2e_run["run_id"], "slot#")
    assert len(slots) == 8
    assert {(s["status"], s["agent_status"], s.get("ingested")) for s in slots} == {
        ("LAUNCHED", "SUCCEEDED", True)
    }


def test_each_slot_wrote_under_its_own_instance_session_and_read_its_own_payload(
    e2e_run: dict[str, Any], local_stack: LocalStack
) -> None:
    # every instance signs with its role session (hooks.py: named by the instance id, as on
    # EC2); its raw objects are under raw/<role id>:<its instance id>/ (the only prefix its
    # role may write) and its payload was control/.../slot-N/<role id>:<instance id>.json
    run_id = e2e_run["run_id"]
    launched = {tuple(s["sk"].split("#")[1:]): s for s in local_stack.items(run_id, "slot#")}
    objects = local_stack.raw_objects(run_id)
    slot_objects = {r: k for r, k in objects.items() if "/slot-" in r}
    assert len(slot_objects) == 8 * 5
    for relpath, key in slot_objects.items():
        owner, _ = keys.split_raw_key(key)
        _, cell_id, slot_dir, _ = relpath.split("/")
        slot = launched[(cell_id, slot_dir.removeprefix("slot-"))]
        assert owner is not None and keys.owner_instance(owner) == slot["instance_id"], key
        assert slot["payload_key"].endswith(f"/{owner}.json")
    assert objects[f"{run_id}/run.json"] == f"raw/{run_id}/run.json"  # the plan Lambda's


def test_no_instance_left_running(e2e_run: dict[str, Any], local_stack: LocalStack) -> None:
    assert len(local_stack.all_instances(e2e_run["run_id"])) == 8
    assert local_stack.live_instances(e2e_run["run_id"]) == []


def _rounded(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    cols = [
        "cell_id",
        "metric_source",
        "workload_index",
        "workload",
        "job",
        "direction",
        "metric",
        "slots",
        "p0",
        "p50",
        "p75",
        "p90",
        "p98",
        "p100",
    ]
    out = []
    for r in rows:
        out.append(
            tuple(
                round(float(r[c]), 6) if c.startswith("p") and r[c] is not None else r[c]
                for c in cols
            )
        )
    return sorted(out, key=repr)


def test_trino_views_equal_the_local_duckdb_warehouse(
    e2e_run: dict[str, Any], trino_server: Any
) -> None:
    # when: the views are queried through Trino (Athena's engine) over the curated objects
    trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
    cloud = trino.execute(
        f"SELECT * FROM cell_percentiles WHERE run_id = '{e2e_run['run_id']}'"
    ).dicts()
    # and: `iofleet local`'s warehouse ingests the same raw files
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(e2e_run["raw"])
        local = wh.cell_percentiles(e2e_run["run_id"])
    # then: the same P0..P100 table
    assert {r["metric_source"] for r in cloud} == {"fio", "ioping", "app"}
    assert len(cloud) == len(local)
    assert _rounded(cloud) == _rounded(local)


def test_summarize_report_holds_the_percentiles(
    e2e_run: dict[str, Any], local_stack: LocalStack
) -> None:
    import json

    body = local_stack.client("s3").get_object(
        Bucket=local_stack.d.bucket, Key=f"reports/{e2e_run['run_id']}/report.json"
    )["Body"]
    report = json.loads(body.read())
    assert report["status"] == "SUCCEEDED"
    assert {r["metric_source"] for r in report["cell_percentiles"]} >= {"fio", "app"}


__all__ = ["matrix", "poll"]
