"""Summarize Lambda logic: the run's percentile table from Athena, a CSV + JSON report,
report.html (the local report, from the same views), the run status."""

from __future__ import annotations

import csv
import io
import json
import logging
from typing import Any

from iofleet.aws import keys
from iofleet.aws.athena import run_query
from iofleet.aws.burst import collect_burst_metrics
from iofleet.aws.compact import compaction_section
from iofleet.aws.ddb import query_items

log = logging.getLogger(__name__)

REPORT_SQL = "SELECT * FROM cell_percentiles WHERE run_id = ? ORDER BY cell_index, metric_source, workload_index, job, direction, metric"


def cell_outcomes(ddb: Any, table: str, run_id: str) -> dict[str, str]:
    return {
        item["sk"]["S"][len("cell#") :]: item.get("status", {}).get("S", "UNKNOWN")
        for item in query_items(ddb, table, f"run#{run_id}", "cell#")
    }


def run_status(outcomes: dict[str, str]) -> str:
    if not outcomes:
        return "FAILED"
    ok = sum(1 for s in outcomes.values() if s == "SUCCEEDED")
    if ok == len(outcomes):
        return "SUCCEEDED"
    return "PARTIAL" if ok else "FAILED"


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


def burst_section(
    run_id: str, *, cloudwatch: Any, s3: Any, ddb: Any, bucket: str, table: str
) -> dict[str, Any]:
    """The report's `burst_metrics` (docs/expectations.md); a failure is recorded, never raised."""
    try:
        return collect_burst_metrics(
            run_id, cloudwatch=cloudwatch, s3=s3, ddb=ddb, bucket=bucket, table=table
        ).report()
    except Exception as exc:  # noqa: BLE001 - the summary is written without burst metrics
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        log.warning("burst metrics not recorded for %s: %s", run_id, reason)
        return {"rows": 0, "object_key": None, "slots": [], "notes": [], "error": reason}


def html_section(
    run_id: str, *, athena: Any, s3: Any, bucket: str, workgroup: str, database: str
) -> dict[str, Any]:
    """report.html (iofleet.aws.report) and the start skew it shows; a failure is
    recorded (`error`), never raised: the run's status is written regardless.
    `repeat_noise_missing`: why the page has no repeat-noise rows although the run
    has repeats (numpy/scipy not importable: the stats layer is missing), else None."""
    from iofleet.aws.report import json_safe, write_report_html

    try:
        key, data = write_report_html(
            run_id, athena=athena, s3=s3, bucket=bucket, workgroup=workgroup, database=database
        )
    except Exception as exc:  # noqa: BLE001 - the summary is written without the HTML
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        log.warning("report.html not written for %s: %s", run_id, reason)
        return {"key": None, "error": reason, "repeat_noise_missing": None, "start_skew": []}
    if data.noise_missing:
        log.warning("report.html of %s without repeat noise: %s", run_id, data.noise_missing)
    return {
        "key": key,
        "error": None,
        "repeat_noise_missing": data.noise_missing,
        "start_skew": json_safe(data.skew),
    }


def summarize(
    event: dict[str, Any],
    *,
    athena: Any,
    s3: Any,
    ddb: Any,
    bucket: str,
    table: str,
    workgroup: str,
    database: str,
    cloudwatch: Any = None,
    glue: Any = None,
) -> dict[str, Any]:
    run_id = event["run_id"]
    rows = run_query(
        athena, REPORT_SQL, workgroup=workgroup, database=database, params=[f"'{run_id}'"]
    )
    outcomes = cell_outcomes(ddb, table, run_id)
    status = run_status(outcomes)
    csv_key, json_key = keys.report_keys(run_id)
    s3.put_object(Bucket=bucket, Key=csv_key, Body=to_csv(rows).encode(), ContentType="text/csv")
    report = {"run_id": run_id, "status": status, "cells": outcomes, "cell_percentiles": rows}
    if cloudwatch is not None:
        report["burst_metrics"] = burst_section(
            run_id, cloudwatch=cloudwatch, s3=s3, ddb=ddb, bucket=bucket, table=table
        )
    if glue is not None:  # after burst_metrics: Parquet per run for Athena (iofleet/aws/compact.py)
        report["compaction"] = compaction_section(
            run_id, athena=athena, glue=glue, s3=s3, bucket=bucket, workgroup=workgroup,
            database=database,
        )  # fmt: skip
    html = html_section(
        run_id, athena=athena, s3=s3, bucket=bucket, workgroup=workgroup, database=database
    )
    report["start_skew"] = html.pop("start_skew")
    report["report_html"] = html
    s3.put_object(
        Bucket=bucket,
        Key=json_key,
        Body=json.dumps(report, indent=1).encode(),
        ContentType="application/json",
    )
    ddb.update_item(
        TableName=table,
        Key={k: {"S": v} for k, v in keys.run_item_key(run_id).items()},
        UpdateExpression="SET report_csv = :c, report_json = :j, summary_rows = :n",
        ExpressionAttributeValues={
            ":c": {"S": csv_key},
            ":j": {"S": json_key},
            ":n": {"N": str(len(rows))},
        },
    )
    return {
        "status": status,
        "rows": len(rows),
        "report_csv": csv_key,
        "report_json": json_key,
        "report_html": html["key"],
        "report_html_uri": f"s3://{bucket}/{html['key']}" if html["key"] else None,
        **({"report_html_error": html["error"]} if html["error"] else {}),
    }
