"""Ingest handler against moto server: SQS batch of S3 notifications -> curated objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iofleet.results import schema
from lambdas.ingest import handler as ingest
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUN = "demo-20261121t051200z"
SLOT = f"{RUN}/c000-gp3-m6i.large-x1-r1/slot-0000"


def _record(key: str, message_id: str) -> dict[str, Any]:
    body = {
        "Records": [
            {
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "b"}, "object": {"key": key}},
            }
        ]
    }
    return {
        "messageId": message_id,
        "receiptHandle": "rh",
        "body": json.dumps(body),
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1795239247403",
            "SenderId": "s3",
            "ApproximateFirstReceiveTimestamp": "1795239247403",
        },
        "messageAttributes": {},
        "md5OfBody": "x",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:raw",
        "awsRegion": "us-east-1",
    }


def _put_raw(cloud: Cloud, relpath: str, body: bytes) -> str:
    key = f"raw/{relpath}"
    cloud.client("s3").put_object(Bucket=cloud.bucket, Key=key, Body=body)
    return key


def _fio(cloud: Cloud) -> str:
    return _put_raw(
        cloud,
        f"{SLOT}/w00-fio-randread.json",
        (FIXTURES / "fio" / "jsonplus-two-jobs.json").read_bytes(),
    )


def test_fio_artifact_becomes_curated_rows_under_the_run_date(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    key = _fio(cloud)
    out = ingest.handler({"Records": [_record(key, "m1")]}, context)
    assert out == {"batchItemFailures": []}
    curated = cloud.keys("curated/")
    assert f"curated/fio_results/dt=2026-11-21/{SLOT}/w00-fio-randread.jsonl" in curated
    assert f"curated/fio_latency_histograms/dt=2026-11-21/{SLOT}/w00-fio-randread.jsonl" in curated
    rows = [
        json.loads(line)
        for line in cloud.text(
            f"curated/fio_results/dt=2026-11-21/{SLOT}/w00-fio-randread.jsonl"
        ).splitlines()
    ]
    assert (
        rows
        and {r["run_id"] for r in rows} == {RUN}
        and {r["workload"] for r in rows} == {"randread"}
    )


def test_the_same_raw_object_twice_yields_the_same_rows_once(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    key = _fio(cloud)
    ingest.handler({"Records": [_record(key, "m1")]}, context)
    first = {k: cloud.text(k) for k in cloud.keys("curated/")}
    ingest.handler({"Records": [_record(key, "m2"), _record(key, "m3")]}, context)
    assert {k: cloud.text(k) for k in cloud.keys("curated/")} == first


def test_malformed_object_is_an_ingest_error_and_the_batch_goes_on(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    bad = _put_raw(
        cloud, f"{SLOT}/w01-fio-broken.json", (FIXTURES / "fio" / "truncated.json").read_bytes()
    )
    good = _fio(cloud)
    out = ingest.handler({"Records": [_record(bad, "bad"), _record(good, "good")]}, context)
    assert out == {"batchItemFailures": []}
    (err_key,) = cloud.keys("curated/ingest_errors/")
    (row,) = [json.loads(line) for line in cloud.text(err_key).splitlines()]
    assert row["object_key"] == f"{SLOT}/w01-fio-broken.json" and row["reason"]
    assert any(k.startswith("curated/fio_results/") for k in cloud.keys("curated/"))
    assert cloud.keys("raw/") == sorted([bad, good])  # raw is never touched


def test_undecodable_message_is_reported_as_a_partial_failure(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    good = _fio(cloud)
    broken = _record(good, "broken")
    broken["body"] = "not json"
    out = ingest.handler({"Records": [broken, _record(good, "good")]}, context)
    assert out == {"batchItemFailures": [{"itemIdentifier": "broken"}]}


def test_slot_json_and_manifest_merge_into_one_slot_row_and_summary(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    manifest = {
        "version": 1,
        "run_id": RUN,
        "slot_index": 0,
        "cell": {
            "cell_id": "c000-gp3-m6i.large-x1-r1",
            "cell_index": 0,
            "instance_type": "m6i.large",
            "storage_label": "gp3",
            "storage_type": "ebs",
            "storage_detail": "gp3",
            "fleet_size": 1,
            "repeat": 1,
        },
        "platform": "aws",
        "started_at": "2026-11-21T05:13:00Z",
        "hostname": "ip-10-0-0-1",
    }
    slot = {
        "run_id": RUN,
        "slot_index": 0,
        "status": "SUCCEEDED",
        "exit_code": 0,
        "finished_at": "2026-11-21T05:20:00Z",
    }
    k1 = _put_raw(cloud, f"{SLOT}/manifest.json", json.dumps(manifest).encode())
    k2 = _put_raw(cloud, f"{SLOT}/slot.json", json.dumps(slot).encode())
    ingest.handler({"Records": [_record(k1, "a"), _record(k2, "b")]}, context)
    (slots_key,) = cloud.keys("curated/slots/")
    (row,) = [json.loads(line) for line in cloud.text(slots_key).splitlines()]
    assert row["hostname"] == "ip-10-0-0-1" and row["status"] == "SUCCEEDED"
    assert row["finished_at"] == "2026-11-21 05:20:00.000"
    item = cloud.item(f"run#{RUN}", "slot#c000-gp3-m6i.large-x1-r1#0000")
    assert (
        item is not None
        and item["agent_status"]["S"] == "SUCCEEDED"
        and item["ingested"]["BOOL"] is True
    )


def test_slot_summary_keeps_the_volume_id_for_burst_metrics(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    # given a manifest of a block target (the volume is deleted with the instance)
    manifest = {
        "run_id": RUN,
        "slot_index": 0,
        "cell": {"cell_id": "c000-gp3-m6i.large-x1-r1", "storage_type": "ebs"},
        "started_at": "2026-11-21T05:13:00Z",
        "target_kind": "block",
        "target_volume_id": "vol-0123456789abcdef0",
        "instance_id": "i-0123456789abcdef0",
    }
    key = _put_raw(cloud, f"{SLOT}/manifest.json", json.dumps(manifest).encode())
    # when
    ingest.handler({"Records": [_record(key, "a")]}, context)
    # then the curated row and the DynamoDB slot item both carry it
    (slots_key,) = cloud.keys("curated/slots/")
    (row,) = [json.loads(line) for line in cloud.text(slots_key).splitlines()]
    assert row["volume_id"] == "vol-0123456789abcdef0"
    item = cloud.item(f"run#{RUN}", "slot#c000-gp3-m6i.large-x1-r1#0000")
    assert item is not None
    assert (item["agent_volume_id"]["S"], item["agent_instance_id"]["S"]) == (
        "vol-0123456789abcdef0",
        "i-0123456789abcdef0",
    )


def _curated_rows(cloud: Cloud) -> dict[str, list[dict[str, Any]]]:
    """Every curated row by table, read as Athena's JSON SerDe would: strict UTF-8 JSON."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for key in cloud.keys("curated/"):
        table = key.split("/")[1]
        body = cloud.client("s3").get_object(Bucket=cloud.bucket, Key=key)["Body"].read()
        text = body.decode("utf-8")  # strict: no lone surrogates, no invalid bytes
        rows.setdefault(table, []).extend(
            json.loads(line, parse_constant=_no_constant) for line in text.splitlines()
        )
    return rows


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} is not JSON Athena can read")


def test_poisoned_objects_become_ingest_errors_and_every_curated_row_fits_its_column(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    # given good objects and objects holding values no Athena column can hold
    fio = json.loads((FIXTURES / "fio" / "jsonplus-two-jobs.json").read_text())
    fio["jobs"][0]["jobname"] = "steady\ud800write"  # a lone surrogate
    manifest = {"run_id": RUN, "cell": {"cell_id": "c000-gp3-m6i.large-x1-r1"}, "cpus": 2**40}
    slot = {"status": "SUCCEEDED", "exit_code": 2**64, "finished_at": "2026-11-21T05:20:00Z"}
    run = {"run_id": RUN, "description": "a \udfff run", "started_at": "2026-11-21T05:12:00Z"}
    bad = {
        _put_raw(cloud, f"{SLOT}/w01-fio-poisoned.json", json.dumps(fio).encode()): "job",
        _put_raw(cloud, f"{SLOT}/manifest.json", json.dumps(manifest).encode()): "slots.cpus",
        _put_raw(cloud, f"{SLOT}/slot.json", json.dumps(slot).encode()): "slots.exit_code",
        _put_raw(cloud, f"{RUN}/run.json", json.dumps(run).encode()): "runs.description",
    }
    wild = _put_raw(
        cloud,
        f"{RUN}/c000-gp3-m6i.large-x1-r1/slot-99999999999/slot.json",
        json.dumps({"status": "FAILED"}).encode(),
    )
    bad[wild] = "slot_index"
    good = _fio(cloud)
    records = [_record(key, f"m{i}") for i, key in enumerate([*bad, good])]
    for _ in range(2):  # a redelivered batch gives the same outcome
        # when
        out = ingest.handler({"Records": records}, context)
        # then no message fails, each poisoned object is one error row naming its field
        assert out == {"batchItemFailures": []}
        rows = _curated_rows(cloud)
        reasons = {r["object_key"]: r["reason"] for r in rows["ingest_errors"]}
        assert sorted(reasons) == sorted(k.removeprefix("raw/") for k in bad)
        for key, field in bad.items():
            assert field in reasons[key.removeprefix("raw/")]
        # and the good object's rows are curated
        assert {r["workload"] for r in rows["fio_results"]} == {"randread"}
        assert rows["fio_latency_histograms"]
        assert "slots" not in rows and "runs" not in rows
        # and every curated value fits its Glue column's type
        for table, table_rows in rows.items():
            for row in table_rows:
                assert tuple(row) == schema.BY_NAME[table].column_names
                assert schema.BY_NAME[table].row_problem(row) is None, (table, row)


def test_objects_with_a_byte_order_mark_are_read_as_import_reads_them(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    # given ioping output saved by Windows PowerShell (UTF-16 LE with its BOM) and a fio
    # output with a UTF-8 BOM: `iofleet import` reads both; once the ioping one was
    # refused here (its BOM decoded as text before the JSON)
    probes = FIXTURES.parent / "data" / "probes" / "artifacts"
    keys = [
        _put_raw(cloud, f"{SLOT}/w01-ioping.json", (probes / "ioping-utf16-bom.json").read_bytes()),
        _put_raw(cloud, f"{SLOT}/w00-fio-bom.json", (probes / "fio-utf8-bom.json").read_bytes()),
    ]
    # when
    out = ingest.handler({"Records": [_record(k, f"m{i}") for i, k in enumerate(keys)]}, context)
    # then both are curated, with no error row
    assert out == {"batchItemFailures": []}
    rows = _curated_rows(cloud)
    assert "ingest_errors" not in rows
    requests = json.loads((FIXTURES / "ioping" / "read-c21.json").read_text())
    timed = [e["io"]["time"] for e in requests if "io" in e and not e["io"]["ignored"]]
    assert [r["time_ns"] for r in rows["ioping_requests"]] == timed
    assert rows["fio_results"]
