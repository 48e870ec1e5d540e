"""Faults on the local cloud: each records its reason, keeps partial results,
leaves no instance running and loses nothing (issue 4, faults 1 to 8).

Same substitutes as tests/cloud/test_e2e.py (see tests/cloud/localcloud/__init__.py),
plus the moto fixes of tests/cloud/localcloud/sfn_patches.py (a Distributed Map
fails past its tolerated failure threshold, and StopExecution aborts at once
and for good, as in AWS).
Fault injection lives in two places only: the matrix (a workload that fails on
one slot: real agent behaviour) and the local instance runner (`faults` in the
hooks' config: an instance that never runs its agent). Raw-object faults are
plain S3 puts.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from trino_client import TrinoClient

from iofleet.aws import keys
from tests.cloud.localcloud.fixtures import LocalStack, poll
from tests.cloud.test_e2e import FIO, matrix

FAIL_ON_SLOT_1 = {"app": {"name": "fail-on-slot-1", "run": 'test "$IOFLEET_SLOT" != 1'}}


@pytest.fixture
def trino_db(trino_server: Any) -> TrinoClient:
    return TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")


def _one_cell(
    stack: LocalStack, name: str, fleet: int, workloads: list[dict[str, Any]]
) -> dict[str, Any]:
    doc = matrix(stack, name, parallelism=[fleet], workloads=workloads)
    doc["storage"] = doc["storage"][:1]
    return doc


def _run(stack: LocalStack, doc: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    arn = stack.start(doc)
    desc = stack.wait(arn)
    run_id = stack.run_id_of(arn)
    stack.esm.wait_drained()
    return arn, run_id, desc


def _no_instance_left(stack: LocalStack, run_id: str) -> None:
    assert stack.all_instances(run_id), "the run launched nothing"
    assert stack.live_instances(run_id) == []
    poll(
        lambda: not stack.agents_running(stack.all_instances(run_id)),
        timeout_s=60,
        what="local agents gone",
    )


def _curated_stem(relpath: str) -> str:
    """The curated object stem of a raw artifact (keys.curated_key; manifest + slot.json merge into `slot`)."""
    folder, name = relpath.rsplit("/", 1)
    return f"{folder}/slot" if name in ("manifest.json", "slot.json") else relpath[: -len(".json")]


def _nothing_lost(stack: LocalStack, run_id: str) -> list[str]:
    """Every raw object of the run has a curated object (rows, or an ingest_errors row); returns the raw keys."""
    stack.esm.wait_drained()
    raw = list(stack.raw_objects(run_id))
    curated = {
        k.split("/", 3)[3][: -len(".jsonl")]
        for k in stack.keys(keys.CURATED_PREFIX)
        if f"/{run_id}/" in k
    }
    assert raw, "no raw object uploaded"
    assert [r for r in raw if _curated_stem(r) not in curated] == []
    return raw


def _failed_cell(stack: LocalStack, run_id: str, slot_error: str) -> dict[str, Any]:
    """The one cell of the run, a fleet of 2 whose slot 1 failed: FAILED, and the cell
    and run items name the slot and its own error (`slot_error`, a prefix)."""
    (cell,) = stack.items(run_id, "cell#")
    assert cell["status"] == "FAILED"
    why = f"1 of 2 slots failed: slot-0001: {slot_error}"
    assert cell["error"].startswith(why), (cell["error"], stack.items(run_id, "slot#"))
    assert cell["error"].endswith("(States.ExceedToleratedFailureThreshold)")
    assert _slot(stack, run_id, cell, 1)["task_error"].startswith(slot_error)
    assert "task_error" not in _slot(stack, run_id, cell, 0)
    run = stack.run_item(run_id)
    assert run["status"] == "FAILED"
    assert run["error"] == f"1 of 1 cells failed: {cell['sk'][len('cell#') :]}: {cell['error']}"
    return cell


def _slot(stack: LocalStack, run_id: str, cell: dict[str, Any], index: int) -> dict[str, Any]:
    return stack.item(keys.slot_item_key(run_id, cell["sk"][len("cell#") :], index))


@pytest.fixture(scope="module")
def failing_slot_runs(local_stack: LocalStack) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """The two runs whose slot 1 fails in its agent, started together and both ended
    (and ingested) before any test of the module looks at either; the tests that follow
    (the bad matrix's instance count, the heartbeat's plan setting) see neither running.

    - "exit": slot 1 of a fleet of 2 runs an app that fails (the agent exits 1 and
      sends SendTaskFailure)
    - "fio": slot 1's shared file system mount is a 2 MiB tmpfs (fio lays out 4 MiB
      files), a fault of the local instance runner for that run's payloads only
    """
    docs = {
        "exit": _one_cell(local_stack, "fault-exit", 2, [FIO, FAIL_ON_SLOT_1]),
        "fio": _one_cell(local_stack, "fault-fio", 2, [FIO]),
    }
    local_stack.set_faults(
        [{"payload_key_prefix": "control/fault-fio-", "slot": 1, "kind": "tiny-disk", "size": "2m"}]
    )
    try:
        arns = {name: local_stack.start(doc) for name, doc in docs.items()}
        descs = {name: local_stack.wait(arn) for name, arn in arns.items()}
        run_ids = {name: local_stack.run_id_of(arn) for name, arn in arns.items()}
        local_stack.esm.wait_drained()
    finally:
        local_stack.set_faults([])
    return {name: (arns[name], run_ids[name], descs[name]) for name in docs}


def test_agent_exiting_non_zero_fails_its_cell_and_keeps_the_rest(
    local_stack: LocalStack, failing_slot_runs: dict[str, tuple[str, str, dict[str, Any]]]
) -> None:
    # given: slot 1 of a fleet of 2 runs an app that fails (the agent exits 1 and sends SendTaskFailure)
    # when (failing_slot_runs["exit"])
    arn, run_id, desc = failing_slot_runs["exit"]
    # then: the run goes on to its end; the cell and the run are FAILED with the reason
    assert desc["status"] == "SUCCEEDED"
    cell = _failed_cell(local_stack, run_id, "AgentFailed: agent exited with status 1")
    # and: the failed slot's own record says why (its slot.json, ingested)
    slot1 = _slot(local_stack, run_id, cell, 1)
    assert (slot1["agent_status"], slot1["agent_exit_code"], slot1["ingested"]) == (
        "FAILED",
        "1",
        True,
    )
    assert "fail-on-slot-1" in slot1["agent_error"]
    # and: partial results kept, nothing lost, nothing left running
    raw = _nothing_lost(local_stack, run_id)
    assert {
        r.split("/")[2] for r in raw if r.endswith("/w00-fio-randread-16k-psync-16jobs.json")
    } == {"slot-0000", "slot-0001"}
    _no_instance_left(local_stack, run_id)


def test_stopped_execution_is_cleaned_up_by_the_abort_rule(
    local_stack: LocalStack, tmp_path: Path
) -> None:
    # given: cell 0 (1 slot) is quick; cell 1's 2 slots run fio, then an app that says it
    # has started (a file per slot in tmp_path) and sleeps 300 s
    slow = {
        "app": {
            "name": "slow",
            "run": f'if [ "$IOFLEET_FLEET_SIZE" = 2 ]; then touch "{tmp_path}/$IOFLEET_SLOT"; '
            "sleep 300; fi",
        }
    }
    doc = _one_cell(local_stack, "fault-stop", 1, [FIO, slow])
    doc["parallelism"] = [1, 2]
    arn = local_stack.start(doc)
    run_id = poll(lambda: _run_id_or_none(local_stack, arn), timeout_s=120, what="plan written")
    poll(
        lambda: len(list(tmp_path.iterdir())) == 2,
        timeout_s=300,
        what="both slots of the fleet of 2 in their app",
    )
    # when: the execution is stopped mid-fleet and EventBridge delivers the status change
    local_stack.client("stepfunctions").stop_execution(
        executionArn=arn, cause="stopped by the test"
    )
    assert local_stack.wait(arn)["status"] == "ABORTED"
    delivered = local_stack.d.deliver_event(
        local_stack.d.execution_status_event(arn, "ABORTED", "stopped by the test")
    )
    # then: the abort rule's one target (the cleanup function) ran and recorded the reason
    ((result, function_error),) = delivered
    assert function_error is None and result["status"] == "ABORTED", result
    item = local_stack.run_item(run_id)
    assert (item["status"], item["error"]) == ("ABORTED", "execution aborted: stopped by the test")
    _no_instance_left(local_stack, run_id)
    # and: nothing uploaded is lost; the finished cell's slot is kept whole, and the stopped
    # slots (SIGTERM from their instances' shutdown) uploaded what they had measured
    raw = _nothing_lost(local_stack, run_id)
    assert [
        (s["agent_status"], s["ingested"]) for s in _slots_of_fleet(local_stack, run_id, 1)
    ] == [("SUCCEEDED", True)]
    stopped = _slots_of_fleet(local_stack, run_id, 2)
    assert [(s["agent_status"], s["agent_exit_code"], s["ingested"]) for s in stopped] == [
        ("FAILED", "130", True),
        ("FAILED", "130", True),
    ]
    assert all(s["agent_error"] == "slot interrupted by a signal" for s in stopped)
    fio = [r for r in raw if "-x2-" in r and r.endswith("/w00-fio-randread-16k-psync-16jobs.json")]
    assert {r.split("/")[2] for r in fio} == {"slot-0000", "slot-0001"}


def _run_id_or_none(stack: LocalStack, arn: str) -> str | None:
    try:
        return stack.run_id_of(arn)
    except KeyError:
        return None


def _slots_of_fleet(stack: LocalStack, run_id: str, fleet: int) -> list[dict[str, Any]]:
    return [s for s in stack.items(run_id, "slot#") if f"-x{fleet}-" in s["sk"]]


def test_agent_that_never_signals_times_out_on_heartbeat(local_stack: LocalStack) -> None:
    # given: short heartbeats (the plan function's HEARTBEAT_S) and slot 1 never running its agent
    lam = local_stack.client("lambda")
    plan_fn = local_stack.d.functions["plan"]
    env = lam.get_function_configuration(FunctionName=plan_fn)["Environment"]["Variables"]
    lam.update_function_configuration(
        FunctionName=plan_fn, Environment={"Variables": {**env, "HEARTBEAT_S": "20"}}
    )
    local_stack.set_faults(
        [{"payload_key_prefix": "control/fault-hang-", "slot": 1, "kind": "hang"}]
    )
    try:
        # when
        arn, run_id, desc = _run(local_stack, _one_cell(local_stack, "fault-hang", 2, [FIO]))
    finally:
        lam.update_function_configuration(FunctionName=plan_fn, Environment={"Variables": env})
        local_stack.set_faults([])
    # then
    assert desc["status"] == "SUCCEEDED"
    cell = _failed_cell(local_stack, run_id, "States.HeartbeatTimeout")
    assert "ingested" not in _slot(local_stack, run_id, cell, 1)  # it never ran
    _nothing_lost(local_stack, run_id)
    _no_instance_left(local_stack, run_id)


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dt%H%M%Sz")


def _app_artifact(i: int) -> bytes:
    now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
    doc = {
        "app": "tiny",
        "phase": "run",
        "exit_code": 0,
        "wall_seconds": 1.0 + i / 1000,
        "started_at": now,
        "finished_at": now,
        "stdout_tail": "",
        "stderr_tail": "",
    }
    return json.dumps(doc).encode()


def _put(stack: LocalStack, relpath: str, body: bytes) -> None:
    stack.client("s3").put_object(Bucket=stack.d.bucket, Key=keys.raw_key(relpath), Body=body)


def _count(trino_db: TrinoClient, table: str, run_id: str) -> int:
    return int(trino_db.execute(f"SELECT count(*) FROM {table} WHERE run_id = '{run_id}'").scalar())


def test_same_raw_object_delivered_twice_gives_rows_once(
    local_stack: LocalStack, trino_db: TrinoClient
) -> None:
    run_id = f"dup{uuid.uuid4().hex[:6]}-{_stamp()}"
    rel = f"{run_id}/c000-efs-a-m6i.large-x1-r1/slot-0000/w00-app-tiny.json"
    _put(local_stack, rel, _app_artifact(0))
    _put(local_stack, rel, _app_artifact(0))  # a second notification for the same key
    local_stack.esm.wait_drained()
    assert _count(trino_db, "app_runs", run_id) == 1


def test_malformed_raw_object_becomes_an_ingest_error(
    local_stack: LocalStack, trino_db: TrinoClient
) -> None:
    run_id = f"bad{uuid.uuid4().hex[:6]}-{_stamp()}"
    cell = f"{run_id}/c000-efs-a-m6i.large-x3-r1"
    for slot in range(3):
        _put(local_stack, f"{cell}/slot-{slot:04d}/w00-app-tiny.json", _app_artifact(slot))
    _put(local_stack, f"{cell}/slot-0003/w00-app-tiny.json", b"{this is not json")
    local_stack.esm.wait_drained()
    assert _count(trino_db, "app_runs", run_id) == 3
    errors = trino_db.execute(
        f"SELECT object_key, reason FROM ingest_errors WHERE run_id = '{run_id}'"
    ).rows
    assert len(errors) == 1 and errors[0][0].endswith("slot-0003/w00-app-tiny.json")
    assert "invalid app timing JSON" in errors[0][1]


def test_two_thousand_raw_objects_at_once_are_all_ingested(
    local_stack: LocalStack, trino_db: TrinoClient
) -> None:
    run_id = f"burst{uuid.uuid4().hex[:6]}-{_stamp()}"
    rels = [
        f"{run_id}/c000-efs-a-m6i.large-x2000-r1/slot-{i:04d}/w00-app-tiny.json"
        for i in range(2000)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda ir: _put(local_stack, ir[1], _app_artifact(ir[0])), enumerate(rels)))
    local_stack.esm.wait_drained(timeout_s=600)
    assert _count(trino_db, "app_runs", run_id) == 2000
    assert _count(trino_db, "ingest_errors", run_id) == 0
    dlq = local_stack.client("sqs").get_queue_attributes(
        QueueUrl=local_stack.d.dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    assert dlq["Attributes"]["ApproximateNumberOfMessages"] == "0"


def test_bad_matrix_fails_in_plan_and_launches_nothing(local_stack: LocalStack) -> None:
    before = len(local_stack.client("ec2").describe_instances()["Reservations"])
    doc = matrix(local_stack, "fault-bad", parallelism=[0], colour="blue")
    arn = local_stack.start(doc)
    desc = local_stack.wait(arn)
    assert desc["status"] == "FAILED"
    failed = [e for e in local_stack.history(arn) if e["type"] == "ExecutionFailed"][0][
        "executionFailedEventDetails"
    ]
    assert failed["error"] == "MatrixInvalid"
    assert "colour" in failed.get("cause", "") and "parallelism[0]" in failed.get("cause", "")
    assert len(local_stack.client("ec2").describe_instances()["Reservations"]) == before
    # and: the abort rule's cleanup has nothing to clean
    ((answer, error),) = local_stack.d.deliver_event(
        local_stack.d.execution_status_event(arn, "FAILED")
    )
    assert error is None and "skipped" in answer


def test_fio_job_failing_on_one_slot_keeps_its_error_code(
    local_stack: LocalStack,
    trino_db: TrinoClient,
    failing_slot_runs: dict[str, tuple[str, str, dict[str, Any]]],
) -> None:
    # given: slot 1's shared file system mount is a 2 MiB tmpfs (fio lays out 4 MiB files)
    # when (failing_slot_runs["fio"])
    arn, run_id, desc = failing_slot_runs["fio"]
    # then: the fio rows of slot 1 carry fio's error code (28, ENOSPC)
    _failed_cell(local_stack, run_id, "AgentFailed: agent exited with status 1")
    _nothing_lost(local_stack, run_id)
    rows = trino_db.execute(
        f"SELECT slot_index, error FROM fio_results WHERE run_id = '{run_id}'"
    ).rows
    errors = {slot: {e for s, e in rows if s == slot} for slot, _ in rows}
    assert errors[1] == {28}
    # slot 0 is usually stopped by the cell's cleanup mid-fio (no tolerated
    # failures: the fleet fails with slot 1, as on AWS); its instance's SIGTERM
    # makes it upload what it had finished, which is ingested (_nothing_lost) and clean
    assert errors.get(0, {0}) == {0}
    _no_instance_left(local_stack, run_id)
