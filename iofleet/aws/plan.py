"""Plan Lambda logic: validate the matrix with iofleet's own rules, write the run."""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime
from typing import Any

from iofleet.aws import keys
from iofleet.errors import ValidationFailed

DEFAULT_HEARTBEAT_S = 600  # instances beat every heartbeat_s / 3
BOOT_MARGIN_S = 900  # apt-get, agent download, volume attach, mkfs


def run_stamp(started_at: str | None) -> str:
    """`20261121t051200z` from the execution start time (ISO-8601), else now."""
    when = datetime.now(UTC)
    if started_at:
        try:
            when = datetime.fromisoformat(started_at.replace("Z", "+00:00")).astimezone(UTC)
        except ValueError:
            pass
    return when.strftime("%Y%m%dt%H%M%Sz")


def run_suffix(execution_arn: str | None) -> str:
    """8 hex digits unique to this execution: a hash of its ARN (Step Functions keeps
    execution names unique per state machine), so a retried Plan step gets the same run
    id and two executions started in the same second get different ones. Without an
    ARN (a direct invocation), random."""
    if execution_arn:
        return hashlib.sha256(execution_arn.encode()).hexdigest()[:8]
    return secrets.token_hex(4)


def new_run_id(matrix_name: str, started_at: str | None, execution_arn: str | None) -> str:
    """`<matrix>-<YYYYmmddtHHMMSSz>-<8 hex>`; the `dt` partition comes from the stamp
    (keys.run_date)."""
    return f"{matrix_name}-{run_stamp(started_at)}-{run_suffix(execution_arn)}"


def invalid(lines: list[str]) -> dict[str, Any]:
    return {"valid": False, "errors": lines, "error_text": "\n".join(lines)}


def plan_run(
    event: dict[str, Any],
    *,
    s3: Any,
    ddb: Any,
    bucket: str,
    table: str,
    max_instances: int,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
) -> dict[str, Any]:
    """Validate, expand, record. On bad input: `{"valid": false, "error_text": ...}` and no writes."""
    from iofleet.plan.matrix import build_plan, validate_matrix_dict

    try:
        matrix = validate_matrix_dict(event.get("matrix"))
        # counted before the cells are expanded: an oversized matrix never reaches memory
        plan = build_plan(matrix, target="aws", max_instances=max_instances)
    except ValidationFailed as exc:
        return invalid(exc.lines())
    run_id = new_run_id(matrix.name, event.get("started_at"), event.get("execution_arn"))
    started_at = event.get("started_at") or datetime.now(UTC).isoformat()
    plan_doc = plan.to_dict()
    timeout_s = int(matrix.slot_timeout_s) + BOOT_MARGIN_S
    heartbeat = min(heartbeat_s, timeout_s - 1)  # Step Functions: HeartbeatSeconds < TimeoutSeconds
    from iofleet.plan.hosts import for_matrix

    host = for_matrix(matrix)[0].to_dict()  # build_plan refused any conflict
    cells = []
    for cell, doc in zip(plan.cells, plan_doc["cells"], strict=True):
        doc["host"] = host  # the release to launch and what the bootstrap installs
        doc["populate_workloads"] = [
            i
            for i, w in enumerate(doc["workloads"])
            if w.get("kind") == "app" and w.get("populate")
        ]
        cells.append(
            {
                "cell_id": cell.cell_id,
                "cell_index": cell.cell_index,
                "fleet_size": cell.fleet_size,
                "storage_type": cell.storage_type,
                "has_populate": bool(doc["populate_workloads"]),
                "heartbeat_s": heartbeat,
                "timeout_s": timeout_s,
            }
        )
    manifest = {
        "version": 1,
        "run_id": run_id,
        "mode": "aws",
        "status": "RUNNING",
        "started_at": started_at,
        "execution_arn": event.get("execution_arn"),
        "matrix": matrix.model_dump(mode="json"),
        "matrix_name": matrix.name,
        "description": matrix.description,
        "total_instances": plan.total_instances,
        "ami_id": matrix.ami_id,
        "slot_timeout_s": matrix.slot_timeout_s,
        "plan": plan_doc,
    }
    body = json.dumps(manifest, sort_keys=True).encode()
    s3.put_object(
        Bucket=bucket, Key=keys.plan_key(run_id), Body=body, ContentType="application/json"
    )
    s3.put_object(
        Bucket=bucket,
        Key=keys.raw_key(f"{run_id}/run.json"),
        Body=body,
        ContentType="application/json",
    )
    item = {
        **{k: {"S": v} for k, v in keys.run_item_key(run_id).items()},
        "run_id": {"S": run_id},
        "status": {"S": "RUNNING"},
        "started_at": {"S": started_at},
        "matrix_name": {"S": matrix.name},
        "total_instances": {"N": str(plan.total_instances)},
        "cells": {"N": str(len(cells))},
    }
    if event.get("execution_arn"):
        item["execution_arn"] = {"S": event["execution_arn"]}
        ddb.put_item(
            TableName=table,
            Item={
                "pk": {"S": f"exec#{event['execution_arn']}"},
                "sk": {"S": "exec"},
                "run_id": {"S": run_id},
            },
        )
    ddb.put_item(TableName=table, Item=item)
    return {
        "valid": True,
        "run_id": run_id,
        "stop_on_failure": matrix.stop_on_failure,
        "cell_concurrency": matrix.cell_concurrency,
        "total_instances": plan.total_instances,
        "cells": cells,
    }


def load_manifest(s3: Any, bucket: str, run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        s3.get_object(Bucket=bucket, Key=keys.plan_key(run_id))["Body"].read()
    )
    return doc


def find_cell(manifest: dict[str, Any], cell_id: str) -> dict[str, Any]:
    for cell in manifest["plan"]["cells"]:
        if cell["cell_id"] == cell_id:
            return dict(cell)
    raise KeyError(f"cell {cell_id!r} is not in run {manifest['run_id']!r}")
