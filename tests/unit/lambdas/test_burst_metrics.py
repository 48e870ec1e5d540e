"""Burst metrics at summarize time, against moto server's CloudWatch, S3 and DynamoDB.

The run is planned by the Plan handler, the slots are recorded by the ingest
logic from manifest.json / slot.json (as on AWS), and the metrics are put into
moto's CloudWatch inside the slots' window; then the Summarize step reads them.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.config import Config

from iofleet.aws import keys
from iofleet.aws.burst import burst_metrics_key, collect_burst_metrics
from iofleet.aws.curate import ingest_object
from iofleet.aws.summarize import summarize as summarize_logic
from lambdas.plan import handler as plan
from lambdas.summarize import handler as summarize
from tests.unit.lambdas.conftest import REGION, Cloud, FakeLambdaContext, _free_port

# moto keeps metrics for a while only: the run happened half an hour ago
T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)


def _hex(n: int) -> str:
    return uuid.uuid4().hex[:n]


@pytest.fixture
def run(cloud: Cloud, context: FakeLambdaContext) -> dict[str, Any]:
    """A planned run: cells on gp2, gp3 and a bursting EFS created for the run."""
    matrix = {
        "name": f"burst-{_hex(8)}",
        "instance_types": ["m5.large"],
        "storage": [
            {"type": "ebs", "label": "gp2-8g", "volume_type": "gp2", "size_gib": 8},
            {"type": "ebs", "label": "gp3-100g", "volume_type": "gp3", "size_gib": 100},
            {"type": "efs", "label": "efs-bursting", "throughput_mode": "bursting"},
        ],
        # 16 jobs x 256 MiB: their files fit the 8 GiB gp2 (the default 1 GiB each would not)
        "workloads": [
            {"fio": "randread-16k-psync-16jobs", "params": {"RUNTIME": 60, "SIZE": "256m"}}
        ],
        "parallelism": [1],
    }
    out = plan.handler({"matrix": matrix, "started_at": "2026-11-21T05:12:00Z"}, context)
    assert out["valid"], out
    # the plan's raw run.json, ingested as the ingest Lambda does (Summarize's compaction
    # waits for every raw object of the run to be ingested)
    _ingest(cloud, keys.raw_key(f"{out['run_id']}/run.json"))
    return out


def _ingest(cloud: Cloud, key: str) -> None:
    ingest_object(
        key,
        s3=cloud.client("s3"),
        ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket,
        table=cloud.table,
    )


def _cell_id(run: dict[str, Any], label: str) -> str:
    (cell_id,) = [c["cell_id"] for c in run["cells"] if label in c["cell_id"]]
    return str(cell_id)


def _ran_slot(
    cloud: Cloud, run_id: str, cell_id: str, *, instance_id: str, volume_id: str | None
) -> None:
    """The slot's manifest.json and slot.json, ingested as the ingest Lambda does."""
    base = f"{run_id}/{cell_id}/slot-0000"
    manifest: dict[str, Any] = {
        "run_id": run_id,
        "slot_index": 0,
        "cell": {"cell_id": cell_id},
        "platform": "aws",
        "started_at": T0.isoformat().replace("+00:00", "Z"),
        "target_kind": "block" if volume_id else "directory",
        "target_volume_id": volume_id,
        "instance_id": instance_id,
    }
    final = {"status": "SUCCEEDED", "exit_code": 0, "started_at": manifest["started_at"],
             "finished_at": (T0 + timedelta(minutes=3)).isoformat()}  # fmt: skip
    for name, doc in (("manifest.json", manifest), ("slot.json", final)):
        key = keys.raw_key(f"{base}/{name}")
        cloud.client("s3").put_object(Bucket=cloud.bucket, Key=key, Body=json.dumps(doc).encode())
        _ingest(cloud, key)


def _put(
    cloud: Cloud,
    namespace: str,
    metric: str,
    dimension: str,
    resource: str,
    values: list[float],
    unit: str,
) -> None:
    cloud.client("cloudwatch").put_metric_data(
        Namespace=namespace,
        MetricData=[
            {
                "MetricName": metric,
                "Dimensions": [{"Name": dimension, "Value": resource}],
                "Timestamp": T0 + timedelta(minutes=minute, seconds=5),
                "Value": value,
                "Unit": unit,
            }
            for minute, value in enumerate(values)
        ],
    )


def _curated(cloud: Cloud, run_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cloud.text(burst_metrics_key(run_id)).splitlines()]


def test_gp2_slot_records_volume_and_instance_balances(cloud: Cloud, run: dict[str, Any]) -> None:
    # given a gp2 slot whose BurstBalance fell while its instance's balance stayed full
    run_id, cell_id = run["run_id"], _cell_id(run, "gp2-8g")
    vol, inst = f"vol-{_hex(17)}", f"i-{_hex(17)}"
    _ran_slot(cloud, run_id, cell_id, instance_id=inst, volume_id=vol)
    _put(cloud, "AWS/EBS", "BurstBalance", "VolumeId", vol, [100.0, 60.0, 20.0], "Percent")
    _put(cloud, "AWS/EC2", "EBSIOBalance%", "InstanceId", inst, [100.0, 100.0, 100.0], "Percent")
    # when
    got = collect_burst_metrics(
        run_id, cloudwatch=cloud.client("cloudwatch"), s3=cloud.client("s3"), ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket, table=cloud.table,
    )  # fmt: skip
    # then the curated object has both, keyed by the slot, in Athena's timestamp format
    rows = _curated(cloud, run_id)
    assert got.key == f"curated/burst_metrics/dt=2026-11-21/{run_id}/burst_metrics.jsonl"
    burst = [r for r in rows if r["metric"] == "BurstBalance"]
    assert [r["value"] for r in burst] == [100.0, 60.0, 20.0]
    assert {(r["cell_id"], r["slot_index"], r["resource_id"], r["namespace"]) for r in burst} == {
        (cell_id, 0, vol, "AWS/EBS")
    }
    assert burst[0]["ts"] == (T0.strftime("%Y-%m-%d %H:%M:%S") + ".000")
    assert {r["metric"] for r in rows if r["resource_id"] == inst} == {"EBSIOBalance%"}


def test_gp2_slot_that_spent_credits_is_reported_in_burst(
    cloud: Cloud, run: dict[str, Any]
) -> None:
    run_id, cell_id = run["run_id"], _cell_id(run, "gp2-8g")
    vol, inst = f"vol-{_hex(17)}", f"i-{_hex(17)}"
    _ran_slot(cloud, run_id, cell_id, instance_id=inst, volume_id=vol)
    _put(cloud, "AWS/EBS", "BurstBalance", "VolumeId", vol, [100.0, 60.0, 20.0], "Percent")

    report = collect_burst_metrics(
        run_id, cloudwatch=cloud.client("cloudwatch"), s3=cloud.client("s3"), ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket, table=cloud.table,
    ).report()  # fmt: skip

    (slot,) = report["slots"]
    assert (slot["cell_id"], slot["in_burst"], slot["emptied"]) == (cell_id, True, False)
    assert [(b["metric"], b["first"], b["min"]) for b in slot["balances"]] == [
        ("BurstBalance", 100.0, 20.0)
    ]


def test_gp3_slot_without_a_volume_id_gets_only_instance_metrics(
    cloud: Cloud, run: dict[str, Any]
) -> None:
    # given a gp3 slot (no burst bucket) whose manifest has no volume id
    run_id, cell_id = run["run_id"], _cell_id(run, "gp3-100g")
    inst = f"i-{_hex(17)}"
    _ran_slot(cloud, run_id, cell_id, instance_id=inst, volume_id=None)
    _put(cloud, "AWS/EC2", "EBSIOBalance%", "InstanceId", inst, [100.0, 40.0, 0.0], "Percent")
    _put(cloud, "AWS/EC2", "EBSByteBalance%", "InstanceId", inst, [100.0, 90.0], "Percent")
    # when
    got = collect_burst_metrics(
        run_id, cloudwatch=cloud.client("cloudwatch"), s3=cloud.client("s3"), ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket, table=cloud.table,
    )  # fmt: skip
    # then
    rows = _curated(cloud, run_id)
    assert {(r["namespace"], r["metric"], r["resource_id"]) for r in rows} == {
        ("AWS/EC2", "EBSIOBalance%", inst),
        ("AWS/EC2", "EBSByteBalance%", inst),
    }
    (slot,) = got.report()["slots"]
    assert (slot["in_burst"], slot["emptied"]) == (True, True)  # the instance's burst ran out


def test_efs_created_for_the_run_is_found_through_its_cell_item(
    cloud: Cloud, run: dict[str, Any]
) -> None:
    # given an EFS file system recorded by PrepareCell (and deleted since)
    run_id, cell_id = run["run_id"], _cell_id(run, "efs-bursting")
    fs = f"fs-{_hex(17)}"
    cloud.client("dynamodb").put_item(
        TableName=cloud.table,
        Item={
            "pk": {"S": f"run#{run_id}"},
            "sk": {"S": f"cell#{cell_id}"},
            "file_system_id": {"S": fs},
        },
    )
    _ran_slot(cloud, run_id, cell_id, instance_id=f"i-{_hex(17)}", volume_id=None)
    _put(cloud, "AWS/EFS", "BurstCreditBalance", "FileSystemId", fs, [2.0e12, 1.9e12], "Bytes")
    _put(cloud, "AWS/EFS", "PercentIOLimit", "FileSystemId", fs, [35.0, 100.0], "Percent")
    # when
    got = collect_burst_metrics(
        run_id, cloudwatch=cloud.client("cloudwatch"), s3=cloud.client("s3"), ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket, table=cloud.table,
    )  # fmt: skip
    # then
    assert {(r["metric"], r["unit"]) for r in got.rows} == {
        ("BurstCreditBalance", "Bytes"),
        ("PercentIOLimit", "Percent"),
    }
    (slot,) = got.report()["slots"]
    assert (slot["in_burst"], slot["io_limited"]) == (True, True)


def test_run_without_burst_metrics_writes_no_object(cloud: Cloud, run: dict[str, Any]) -> None:
    # given a slot that never recorded an instance or volume id
    run_id, cell_id = run["run_id"], _cell_id(run, "gp3-100g")
    cloud.client("dynamodb").put_item(
        TableName=cloud.table,
        Item={"pk": {"S": f"run#{run_id}"}, "sk": {"S": f"slot#{cell_id}#0000"}},
    )
    # when
    got = collect_burst_metrics(
        run_id, cloudwatch=cloud.client("cloudwatch"), s3=cloud.client("s3"), ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket, table=cloud.table,
    )  # fmt: skip
    # then
    assert (got.rows, got.key) == ([], None)
    assert cloud.keys("curated/burst_metrics/") == []


def test_summarize_handler_puts_the_burst_summary_in_the_report(
    cloud: Cloud, run: dict[str, Any], workgroup: str, context: FakeLambdaContext
) -> None:
    # given
    run_id, cell_id = run["run_id"], _cell_id(run, "gp2-8g")
    vol, inst = f"vol-{_hex(17)}", f"i-{_hex(17)}"
    _ran_slot(cloud, run_id, cell_id, instance_id=inst, volume_id=vol)
    _put(cloud, "AWS/EBS", "BurstBalance", "VolumeId", vol, [100.0, 0.0], "Percent")
    # when
    out = summarize.handler({"run_id": run_id}, context)
    # then
    report = json.loads(cloud.text(out["report_json"]))
    # and: every raw object of the run was ingested, so Summarize did not wait out its
    # bounded wait for ingest (moto has no Glue database: compaction's own error is recorded)
    assert "not ingested yet" not in (report["compaction"]["error"] or "")
    section = report["burst_metrics"]
    assert (section["error"], section["rows"], section["object_key"]) == (
        None,
        2,
        burst_metrics_key(run_id),
    )
    (slot,) = section["slots"]
    assert (slot["cell_id"], slot["slot_index"], slot["in_burst"], slot["emptied"]) == (
        cell_id,
        0,
        True,
        True,
    )


def test_cloudwatch_failure_still_writes_the_summary_with_the_reason(
    cloud: Cloud, run: dict[str, Any], workgroup: str
) -> None:
    # given CloudWatch unreachable
    run_id, cell_id = run["run_id"], _cell_id(run, "gp2-8g")
    _ran_slot(cloud, run_id, cell_id, instance_id=f"i-{_hex(17)}", volume_id=f"vol-{_hex(17)}")
    dead = cloud.client("s3").meta.endpoint_url.rsplit(":", 1)[0] + f":{_free_port()}"
    cloudwatch = _boto_client("cloudwatch", dead)
    # when
    out = summarize_logic(
        {"run_id": run_id}, athena=cloud.client("athena"), s3=cloud.client("s3"), ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket, table=cloud.table, workgroup=workgroup, database="iofleet", cloudwatch=cloudwatch,
    )  # fmt: skip
    # then
    report = json.loads(cloud.text(out["report_json"]))
    assert report["status"] and report["burst_metrics"]["rows"] == 0
    assert "Could not connect" in report["burst_metrics"]["error"]
    assert cloud.keys("curated/burst_metrics/") == []


def _boto_client(name: str, endpoint: str) -> Any:
    import boto3

    config = Config(
        retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2, read_timeout=2
    )
    return boto3.client(name, endpoint_url=endpoint, region_name=REGION, config=config)
