"""Mountpoint for S3 cells through the deployed state machine on the local cloud.

Real: the state machine, PrepareCell / Launch / Cleanup / janitor Lambdas from their asset
zips, moto's S3 for the general purpose bucket of each cell, the agents running real fio,
ingest. Stand-in (tests/cloud/localcloud/hooks.py, MOUNT_S3_SHIM): there is no mount-s3
here, so the instance's `mount-s3` checks the bucket exists, leaves a marker object in it
and bind-mounts an empty directory; fio's calls are checked against Mountpoint's rules in
tests/integration/test_mountpoint_semantics.py. Only AWS shows the real mount and its
throughput. S3 Express One Zone directory buckets: tests/cloud/test_mountpoint_express.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from iofleet.aws import s3mount
from tests.cloud.localcloud.fixtures import LocalStack, poll

STACK = "IofleetStack"
FIO = {
    "fio": "mountpoint-seq-write-read-1m",
    "params": {"SIZE": "4m", "NUM_JOBS": 2, "DIRECT": 0},
}


def _matrix(stack: LocalStack, name: str, parallelism: list[int]) -> dict[str, Any]:
    return {
        "name": name,
        "instance_types": ["m6i.large"],
        "ami_id": stack.ami,
        "storage": [{"type": "s3-mountpoint", "label": "s3"}],
        "workloads": [FIO],
        "parallelism": parallelism,
        "slot_timeout_s": 600,
    }


def _buckets(stack: LocalStack) -> set[str]:
    return {b["Name"] for b in stack.client("s3").list_buckets()["Buckets"]}


def _cell_buckets(stack: LocalStack, run_id: str) -> list[str]:
    return sorted(c["storage_bucket"] for c in stack.items(run_id, "cell#"))


def _mount_records(stack: LocalStack, run_id: str) -> list[list[str]]:
    homes = [stack.state_dir / "instances" / i for i in stack.all_instances(run_id)]
    return [
        json.loads((h / "mount-s3.json").read_text())
        for h in homes
        if (h / "mount-s3.json").exists()
    ]


def test_each_cell_mounts_its_own_bucket_measures_and_the_bucket_is_gone_after(
    local_stack: LocalStack,
) -> None:
    # given: one Mountpoint storage, fleets of 1 and 2
    arn = local_stack.start(_matrix(local_stack, "mountpoint", [1, 2]))
    # when: the execution runs to its end
    desc = local_stack.wait(arn)
    run_id = local_stack.run_id_of(arn)
    local_stack.esm.wait_drained()
    failures = [
        {k: v for k, v in e.items() if k.endswith("EventDetails") or k == "type"}
        for e in local_stack.history(arn)
        if "Failed" in e["type"] or "TimedOut" in e["type"]
    ]
    cells = {c["sk"]: (c.get("status"), c.get("error")) for c in local_stack.items(run_id, "cell#")}
    assert {s for s, _ in cells.values()} == {"SUCCEEDED"}, (cells, failures)
    # then: two cells, two buckets of this stack's prefix, each mounted by its own slots
    buckets = _cell_buckets(local_stack, run_id)
    assert len(set(buckets)) == 2
    assert all(b.startswith(s3mount.name_prefix(STACK)) for b in buckets)
    mounts = _mount_records(local_stack, run_id)
    assert len(mounts) == 3
    assert sorted({m[-2] for m in mounts}) == buckets
    assert all(m[:2] == ["--allow-delete", "--region"] and m[-1] == "/mnt/iofleet" for m in mounts)
    # and: every slot measured and was ingested (fio wrote, then read its files)
    slots = local_stack.items(run_id, "slot#")
    assert {(s["agent_status"], s.get("ingested")) for s in slots} == {("SUCCEEDED", True)}
    fio_keys = [
        key
        for rel, key in local_stack.raw_objects(run_id).items()
        if rel.endswith("-fio-mountpoint-seq-write-read-1m.json")
    ]
    assert len(fio_keys) == 3
    body = local_stack.client("s3").get_object(Bucket=local_stack.d.bucket, Key=fio_keys[0])["Body"]
    doc = json.loads(body.read())
    written = sum(j["write"]["io_bytes"] for j in doc["jobs"])
    read = sum(j["read"]["io_bytes"] for j in doc["jobs"])
    assert written == read == 2 * 4 * 1024 * 1024
    # and: the buckets (with the objects the mounts left) are gone
    assert not set(buckets) & _buckets(local_stack)
    assert local_stack.live_instances(run_id) == []
    # and: the run as a whole (Summarize queries Trino: the last step)
    assert desc["status"] == "SUCCEEDED", json.dumps(failures, default=str)[:3000]


def test_aborted_run_empties_and_deletes_its_buckets(local_stack: LocalStack) -> None:
    # given: a fleet of 2 whose slot 1 never runs its agent (hangs), slot 0 mounts and ends
    local_stack.set_faults(
        [{"payload_key_prefix": "control/mountpoint-abort-", "slot": 1, "kind": "hang"}]
    )
    try:
        arn = local_stack.start(_matrix(local_stack, "mountpoint-abort", [2]))
        run_id = poll(lambda: _run_id(local_stack, arn), timeout_s=120, what="plan written")
        poll(lambda: _mount_records(local_stack, run_id), timeout_s=300, what="slot 0 mounted")
        (bucket,) = _cell_buckets(local_stack, run_id)
        assert local_stack.client("s3").list_objects_v2(Bucket=bucket)["KeyCount"] >= 1
        # when: the execution is stopped and EventBridge delivers the status change
        local_stack.client("stepfunctions").stop_execution(executionArn=arn, cause="test")
        assert local_stack.wait(arn)["status"] == "ABORTED"
        ((result, error),) = local_stack.d.deliver_event(
            local_stack.d.execution_status_event(arn, "ABORTED", "test")
        )
    finally:
        local_stack.set_faults([])
    # then: the abort rule's cleanup emptied and deleted the bucket
    assert error is None and result["buckets"] == {bucket: "deleted"}, result
    assert bucket not in _buckets(local_stack)


def _run_id(stack: LocalStack, arn: str) -> str | None:
    try:
        return stack.run_id_of(arn)
    except Exception:  # noqa: BLE001 - not written yet
        return None


def test_janitor_deletes_this_stacks_expired_bucket_and_keeps_the_rest(
    local_stack: LocalStack,
) -> None:
    s3 = local_stack.client("s3")
    now = datetime.now(UTC)
    stamp = lambda when: when.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    expired = s3mount.base_name("janitor-run", "c0", stamp(now - timedelta(hours=1)), stack=STACK)
    fresh = s3mount.base_name("janitor-run", "c1", stamp(now + timedelta(hours=1)), stack=STACK)
    for name in (expired, fresh):
        s3.create_bucket(Bucket=name)
        s3.put_object(Bucket=name, Key="iofleet-x/c/slot-0000/data.0.0", Body=b"x")
    out, error = local_stack.d.invoke("janitor", {})
    assert error is None and out["buckets"] == {expired: "deleted"}, out
    assert expired not in _buckets(local_stack) and fresh in _buckets(local_stack)
    s3.delete_object(Bucket=fresh, Key="iofleet-x/c/slot-0000/data.0.0")
    s3.delete_bucket(Bucket=fresh)


__all__ = ["Path"]
