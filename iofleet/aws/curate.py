"""Ingest Lambda logic: one raw object -> curated JSON lines in S3 + slot summary in DynamoDB.

Idempotent by construction: every curated object key is a function of the raw
key (and, for `slots`, of the slot), so a redelivered raw object overwrites the
same objects with the same rows. Raw objects are only read.

Who wrote a raw object is in its key: `raw/<aws:userid>/<relpath>` from an instance (IAM
lets an instance write under its own session id only), `raw/<relpath>` from iofleet's
Lambdas. An instance chooses the relpath, so a slot's (or a populate phase's) objects count
only from the instance launched for it: the one the slot item (cell item) names.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from iofleet.aws import keys
from iofleet.aws.compact import LandingPartitions
from iofleet.aws.ddb import set_attributes
from iofleet.results import schema
from iofleet.results.ingest import error_row, merge_slot_rows, rows_for_artifact
from iofleet.results.parsers import decode_text

_SLOT_DIR = re.compile(r"^(?P<run>[^/]+)/(?P<cell>[^/]+)/slot-(?P<slot>\d{4})/")
_INSTANCE_DIR = re.compile(r"^(?P<run>[^/]+)/(?P<cell>[^/]+)/(?:slot-(?P<slot>\d+)|populate)/")
_TS_COLUMNS = {t.name: {c.name for c in t.columns if c.type == "timestamp"} for t in schema.TABLES}


def athena_timestamp(value: object) -> object:
    """ISO-8601 (or datetime) -> `yyyy-MM-dd HH:mm:ss.SSS` (UTC), what Hive's JsonSerDe reads."""
    if value is None:
        return None
    if isinstance(value, datetime):
        when = value
    else:
        try:
            when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.isoformat(sep=" ", timespec="milliseconds")  # the year padded to 4 digits


def jsonl(table: str, rows: list[dict[str, Any]]) -> bytes:
    ts = _TS_COLUMNS.get(table, set())
    lines = []
    for row in rows:
        out = {k: (athena_timestamp(v) if k in ts else v) for k, v in row.items()}
        lines.append(json.dumps(out, sort_keys=False, default=str))
    return ("\n".join(lines) + "\n").encode()


def s3_keys_from_message(body: str) -> list[str]:
    """Object keys of an S3 event notification (URL-decoded); [] for s3:TestEvent."""
    doc = json.loads(body)
    return [unquote_plus(r["s3"]["object"]["key"]) for r in doc.get("Records", []) if "s3" in r]


def _read(s3: Any, bucket: str, key: str) -> str | None:
    try:
        return decode_text(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), errors="replace")
    except s3.exceptions.NoSuchKey:
        return None


def ingest_object(
    key: str,
    *,
    s3: Any,
    ddb: Any,
    bucket: str,
    table: str,
    partitions: LandingPartitions | None = None,
) -> dict[str, int]:
    """Curate one raw object; returns rows written per table.

    With `partitions`, the run's landing partition of each table written is
    registered in Glue (once per process), so Athena sees the rows at once.
    """
    if not key.startswith(keys.RAW_PREFIX):
        return {}
    owner, relpath = keys.split_raw_key(key)
    run_id = relpath.split("/", 1)[0]
    refused = _not_the_slots_instance(owner, relpath, ddb=ddb, table=table)
    text = None if refused else _read(s3, bucket, key)
    if refused:
        tables = {schema.INGEST_ERRORS.name: [error_row(run_id, key, refused)]}
    elif text is None:
        tables = {schema.INGEST_ERRORS.name: [error_row(run_id, relpath, "raw object not found")]}
    else:
        tables = rows_for_artifact(relpath, text)
    written: dict[str, int] = {}
    for name, rows in tables.items():
        if not rows:
            continue
        # a refused object's row has a key of its own: it replaces no row of the slot's instance
        target = f"refused/{owner}/{relpath}" if refused else relpath
        if name == schema.SLOTS.name:
            rows, target = _merged_slot(relpath, rows, s3=s3, bucket=bucket, owner=owner)
            _slot_summary(rows[0], ddb=ddb, table=table)
        s3.put_object(
            Bucket=bucket,
            Key=keys.curated_key(name, run_id, target),
            Body=jsonl(name, rows),
            ContentType="application/x-ndjson",
        )
        if partitions is not None:
            partitions.ensure(name, run_id)
        written[name] = len(rows)
    return written


def _not_the_slots_instance(owner: str | None, relpath: str, *, ddb: Any, table: str) -> str:
    """Why an instance's raw object is not taken ("" when it is): outside a slot or populate
    folder, or not from the instance launched for that slot (populate phase)."""
    if owner is None:
        return ""  # iofleet's own Lambdas (or an operator): no instance can write here
    instance = keys.owner_instance(owner)
    m = _INSTANCE_DIR.match(relpath)
    if not m:
        return f"written by instance {instance} outside a slot or populate folder"
    run_id, cell_id, slot = m.group("run"), m.group("cell"), m.group("slot")
    if slot is None:
        item_key, attribute, what = (
            keys.cell_item_key(run_id, cell_id),
            "populate_instance_id",
            "populate phase",
        )
    else:
        item_key = keys.slot_item_key(run_id, cell_id, int(slot))
        attribute, what = "instance_id", f"slot {int(slot)}"
    item = ddb.get_item(
        TableName=table,
        Key={k: {"S": v} for k, v in item_key.items()},
        ProjectionExpression="#i",
        ExpressionAttributeNames={"#i": attribute},
        ConsistentRead=True,
    ).get("Item", {})
    launched = item.get(attribute, {}).get("S")
    if launched != instance:
        return (
            f"written by instance {instance}, but {what} of {run_id}/{cell_id} was launched "
            f"as {launched or 'no instance'}: not taken"
        )
    return ""


def _merged_slot(
    relpath: str,
    rows: list[dict[str, Any]],
    *,
    s3: Any,
    bucket: str,
    owner: str | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """manifest.json and slot.json both describe the slot: one curated row from both."""
    m = _SLOT_DIR.match(relpath)
    if not m:
        return rows, relpath
    slot_dir = m.group(0)
    all_rows = []
    for name in ("manifest.json", "slot.json"):
        other = slot_dir + name
        text = _read(s3, bucket, keys.raw_key(other, owner))
        if text is not None:
            all_rows += rows_for_artifact(other, text).get(schema.SLOTS.name, [])
    merged = merge_slot_rows(all_rows or rows)
    return merged, slot_dir + "slot"


def _slot_summary(row: dict[str, Any], *, ddb: Any, table: str) -> None:
    key = keys.slot_item_key(str(row["run_id"]), str(row["cell_id"]), int(row["slot_index"]))  # type: ignore[call-overload]
    fields = (
        "status",
        "exit_code",
        "error",
        "started_at",
        "finished_at",
        "instance_id",
        "volume_id",
        "hostname",
    )
    values: dict[str, object] = {"agent_" + k: row.get(k) for k in fields}
    values["ingested"] = True
    set_attributes(ddb, table, key, values)
