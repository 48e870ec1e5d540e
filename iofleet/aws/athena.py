"""A small Athena query runner (start, poll, page the results)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class QueryFailed(Exception):
    """An Athena query ended FAILED or CANCELLED; one line."""


def run_query(
    athena: Any,
    sql: str,
    *,
    workgroup: str,
    database: str,
    params: list[str] | None = None,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict[str, str | None]]:
    args: dict[str, Any] = {
        "QueryString": sql,
        "WorkGroup": workgroup,
        "QueryExecutionContext": {"Database": database},
    }
    if params:
        args["ExecutionParameters"] = params
    qid = athena.start_query_execution(**args)["QueryExecutionId"]
    while True:
        status = athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]
        state = status["State"]
        if state == "SUCCEEDED":
            break
        if state in ("FAILED", "CANCELLED"):
            raise QueryFailed(
                f"Athena query {qid} {state.lower()}: {status.get('StateChangeReason', '')}"
            )
        sleep(poll_s)
    rows: list[dict[str, str | None]] = []
    header: list[str] | None = None
    for page in athena.get_paginator("get_query_results").paginate(QueryExecutionId=qid):
        for row in page["ResultSet"]["Rows"]:
            values = [d.get("VarCharValue") for d in row["Data"]]
            if header is None:
                header = [str(v) for v in values]
                continue
            rows.append(dict(zip(header, values, strict=False)))
    return rows
