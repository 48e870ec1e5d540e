"""Cleanup logic: the end of every path (cell, run) and the abort/timeout rule.

Terminates instances tagged for the run (and cell), deletes file systems the
run created, records the outcome and the reason in DynamoDB.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from iofleet.aws import fsx as fsx_cells
from iofleet.aws import keys, s3mount
from iofleet.aws.ddb import query_items, set_attributes

LIVE_STATES = ["pending", "running", "stopping", "stopped"]
# what a Distributed Map fails with once a child fails (the fleet tolerates none)
FLEET_FAILED = "States.ExceedToleratedFailureThreshold"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def tagged_instances(ec2: Any, filters: dict[str, str]) -> list[str]:
    """Live instances of this stack carrying every tag in `filters`."""
    ids: list[str] = []
    wanted = {**filters, keys.TAG_STACK: keys.stack_name()}
    flt = [{"Name": f"tag:{k}", "Values": [v]} for k, v in wanted.items()]
    flt.append({"Name": "instance-state-name", "Values": LIVE_STATES})
    for page in ec2.get_paginator("describe_instances").paginate(Filters=flt):
        for res in page["Reservations"]:
            ids += [i["InstanceId"] for i in res["Instances"]]
    return ids


def terminate(ec2: Any, ids: list[str]) -> list[str]:
    for i in range(0, len(ids), 500):
        ec2.terminate_instances(InstanceIds=ids[i : i + 500])
    return ids


def delete_file_system(efs: Any, fs_id: str) -> str:
    """Delete mount targets, then the file system; 'pending' if targets are still going."""
    targets = efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]
    for t in targets:
        if t.get("LifeCycleState") not in ("deleting", "deleted"):
            efs.delete_mount_target(MountTargetId=t["MountTargetId"])
    if targets:
        return "pending"  # the janitor finishes it once the mount targets are gone
    efs.delete_file_system(FileSystemId=fs_id)
    return "deleted"


def reason(error: Any) -> str | None:
    """One line from a Step Functions catch (`{"Error", "Cause"}`), or None."""
    if not error:
        return None
    if isinstance(error, dict):
        cause = error.get("Cause") or ""
        try:
            doc = json.loads(cause)
            cause = doc.get("errorMessage") or doc.get("Cause") or cause
        except (TypeError, ValueError):
            pass
        name = error.get("Error", "Error")
        text = f"{name}: {cause}" if str(cause).strip() else str(name)
    else:
        text = str(error)
    return " ".join(text.split())[:1000]


def record_slot_failure(event: dict[str, Any], *, ddb: Any, table: str) -> dict[str, str]:
    """A slot's task failed (its agent's SendTaskFailure, a heartbeat or task timeout): keep
    the reason on the slot item, where the cell's cleanup finds it, and hand back the
    error for the slot's Fail state (`Error` and `Cause` both present, whatever was caught)."""
    caught = event.get("error")
    error: dict[str, Any] = caught if isinstance(caught, dict) else {}
    name = str(error.get("Error") or "SlotFailed")
    cause = str(error.get("Cause") or "")
    set_attributes(
        ddb,
        table,
        keys.slot_item_key(event["run_id"], event["cell_id"], int(event["slot_index"])),
        {"task_error": reason({"Error": name, "Cause": cause}), "task_failed_at": _now()},
    )
    return {"Error": name, "Cause": cause}


def failed_slots(ddb: Any, table: str, run_id: str, cell_id: str) -> list[str]:
    """'slot-NNNN: <reason>' for each slot of the cell whose task failed, in slot order."""
    out: list[str] = []
    for item in query_items(ddb, table, f"run#{run_id}", f"slot#{cell_id}#", consistent=True):
        if "task_error" in item:
            index = int(item["sk"]["S"].rsplit("#", 1)[1])
            why = item["task_error"]["S"]
            retries = item.get("launch_retries", {}).get("N")
            if retries and "launch retries" not in why:  # a launch error names them already
                why += f" (after {retries} launch retries)"
            out.append(f"{keys.slot_name(index)}: {why}")
    return sorted(out)


def cell_reason(event: dict[str, Any], *, ddb: Any, table: str) -> str | None:
    """The cell's failure reason: when its fleet failed, which slots failed and why."""
    error = event.get("error")
    why = reason(error)
    if isinstance(error, dict) and error.get("Error") == FLEET_FAILED:
        cell = event["cell"]
        slots = failed_slots(ddb, table, event["run_id"], cell["cell_id"])
        if slots:
            size = cell.get("fleet_size", "?")
            why = f"{len(slots)} of {size} slots failed: {'; '.join(slots)} ({FLEET_FAILED})"
    return None if why is None else why[:1000]


def cleanup_cell(
    event: dict[str, Any],
    *,
    ec2: Any,
    efs: Any,
    ddb: Any,
    table: str,
    fsx: Any = None,
    s3: Any = None,
) -> dict[str, Any]:
    run_id, cell_id = event["run_id"], event["cell"]["cell_id"]
    ids = terminate(ec2, tagged_instances(ec2, {keys.TAG_RUN: run_id, keys.TAG_CELL: cell_id}))
    storage = ((event.get("prepared") or {}).get("result") or {}).get("storage") or {}
    fs_state = None
    if storage.get("created") and storage.get("file_system_id"):
        if storage.get("kind") in fsx_cells.KINDS:
            fs_state = fsx_cells.delete(fsx, storage["file_system_id"])
        else:
            fs_state = delete_file_system(efs, storage["file_system_id"])
    elif fsx is not None and not storage:
        # PrepareCell failed after CreateFileSystem (or before its result was kept):
        # whatever FSx file system carries this cell's tags goes too
        for fs in fsx_cells.tagged(fsx, run_id):
            if fs["tags"].get(keys.TAG_CELL) == cell_id:
                fs_state = fsx_cells.delete(fsx, fs["id"])
    bucket = _cell_bucket(ddb, table, run_id, cell_id, storage)
    if bucket and s3 is not None:  # a Mountpoint cell's bucket, emptied then deleted
        fs_state = s3mount.delete_bucket(s3, bucket)
    why = cell_reason(event, ddb=ddb, table=table)
    outcome = event.get("outcome", "SUCCEEDED")
    set_attributes(
        ddb,
        table,
        keys.cell_item_key(run_id, cell_id),
        {"status": outcome, "finished_at": _now(), "error": why},
    )
    return {"terminated": len(ids), "file_system": fs_state, "status": outcome, "error": why}


def _cell_bucket(
    ddb: Any, table: str, run_id: str, cell_id: str, storage: dict[str, Any]
) -> str | None:
    """The cell's Mountpoint bucket: from PrepareCell's result, else from the cell item
    (a PrepareCell that failed after naming it)."""
    if storage.get("bucket"):
        return str(storage["bucket"]) if storage.get("created") else None
    if storage.get("kind"):  # prepared, and not a Mountpoint cell
        return None
    item = ddb.get_item(
        TableName=table,
        Key={k: {"S": v} for k, v in keys.cell_item_key(run_id, cell_id).items()},
        ConsistentRead=True,
    ).get("Item", {})
    return item.get("storage_bucket", {}).get("S")


def run_buckets(ddb: Any, table: str, run_id: str) -> list[str]:
    """Every Mountpoint bucket the run's cells named (cell items' storage_bucket)."""
    items = query_items(ddb, table, f"run#{run_id}", "cell#", consistent=True)
    return sorted({i["storage_bucket"]["S"] for i in items if "storage_bucket" in i})


def failed_cells(ddb: Any, table: str, run_id: str) -> str | None:
    """'N of M cells failed: <cell>: <reason>; ...' from the cell items, or None if none failed."""
    cells: list[tuple[str, str, str]] = []
    for item in query_items(ddb, table, f"run#{run_id}", "cell#", consistent=True):
        status = item.get("status", {}).get("S", "UNKNOWN")
        cells.append((item["sk"]["S"][len("cell#") :], status, item.get("error", {}).get("S", "")))
    failed = [
        f"{cell_id}: {why or status}"
        for cell_id, status, why in sorted(cells)
        if status != "SUCCEEDED"
    ]
    if not failed:
        return None
    return (f"{len(failed)} of {len(cells)} cells failed: " + "; ".join(failed))[:1000]


def cleanup_run(
    run_id: str,
    outcome: str,
    error: Any,
    *,
    ec2: Any,
    efs: Any,
    ddb: Any,
    table: str,
    fsx: Any = None,
    s3: Any = None,
) -> dict[str, Any]:
    ids = terminate(ec2, tagged_instances(ec2, {keys.TAG_RUN: run_id}))
    file_systems = []
    for page in efs.get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
            if tags.get(keys.TAG_RUN) == run_id and tags.get(keys.TAG_STACK) == keys.stack_name():
                file_systems.append(delete_file_system(efs, fs["FileSystemId"]))
    if fsx is not None:  # FSx for OpenZFS / Lustre created by this run (iofleet/aws/fsx.py)
        file_systems += [fsx_cells.delete(fsx, fs["id"]) for fs in fsx_cells.tagged(fsx, run_id)]
    buckets = s3mount.delete_named(s3, run_buckets(ddb, table, run_id)) if s3 is not None else {}
    why = reason(error)
    if (
        why is None and outcome != "SUCCEEDED"
    ):  # the summary's FAILED/PARTIAL: say which cells and why
        why = failed_cells(ddb, table, run_id)
    set_attributes(
        ddb,
        table,
        keys.run_item_key(run_id),
        {"status": outcome, "finished_at": _now(), "error": why},
    )
    return {
        "terminated": len(ids),
        "file_systems": len(file_systems),
        "buckets": buckets,
        "status": outcome,
        "error": why,
    }


EXECUTION_STATUS = {"ABORTED": "ABORTED", "TIMED_OUT": "FAILED", "FAILED": "FAILED"}


def handle(
    event: dict[str, Any],
    *,
    ec2: Any,
    efs: Any,
    ddb: Any,
    table: str,
    fsx: Any = None,
    s3: Any = None,
) -> dict[str, Any]:
    """Dispatch: a state-machine step (`scope`: slot, cell, run) or an EventBridge execution status change."""
    if event.get("source") == "aws.states":
        detail = event.get("detail") or {}
        item = ddb.get_item(
            TableName=table,
            Key={"pk": {"S": f"exec#{detail.get('executionArn')}"}, "sk": {"S": "exec"}},
        ).get("Item")
        if not item:
            return {
                "skipped": "no run for this execution (it failed in Plan, before creating anything)"
            }
        status = EXECUTION_STATUS.get(detail.get("status", ""), "FAILED")
        return cleanup_run(
            item["run_id"]["S"],
            status,
            f"execution {detail.get('status', '').lower()}: {detail.get('cause') or detail.get('error') or ''}",
            ec2=ec2,
            efs=efs,
            ddb=ddb,
            table=table,
            fsx=fsx,
            s3=s3,
        )
    if event.get("scope") == "slot":
        return record_slot_failure(event, ddb=ddb, table=table)
    if event.get("scope") == "cell":
        return cleanup_cell(event, ec2=ec2, efs=efs, ddb=ddb, table=table, fsx=fsx, s3=s3)
    return cleanup_run(
        event["run_id"],
        event.get("outcome") or "SUCCEEDED",
        event.get("error"),
        ec2=ec2,
        efs=efs,
        ddb=ddb,
        table=table,
        fsx=fsx,
        s3=s3,
    )
