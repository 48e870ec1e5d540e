"""Views custom resource logic: `CREATE OR REPLACE VIEW` for every view in iofleet/results/sql/.

First come the table views (`fio_results` = its Parquet table + the landing rows of runs not
yet compacted, iofleet/aws/compact.py), which the views of iofleet/results/sql read as tables.

Plain CloudFormation custom resource protocol (no provider framework): the
handler answers CloudFormation's pre-signed URL itself with urllib.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from iofleet.aws.athena import run_query
from iofleet.aws.compact import table_views
from iofleet.results.sql import all_views


def athena_views() -> dict[str, str]:
    """Every view to create, in dependency order: the table views, then the SQL views."""
    return {**table_views(), **all_views()}


def view_ddl(name: str, select: str) -> str:
    return f"CREATE OR REPLACE VIEW {name} AS\n{select}"


def create_views(athena: Any, *, workgroup: str, database: str) -> list[str]:
    done = []
    for name, select in athena_views().items():  # dependency order
        run_query(athena, view_ddl(name, select), workgroup=workgroup, database=database)
        done.append(name)
    return done


def drop_views(athena: Any, *, workgroup: str, database: str) -> list[str]:
    done = []
    for name in reversed(list(athena_views())):
        run_query(athena, f"DROP VIEW IF EXISTS {name}", workgroup=workgroup, database=database)
        done.append(name)
    return done


def put_response(url: str, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(data))}
    )
    urllib.request.urlopen(req, timeout=30).read()


def handle(
    event: dict[str, Any],
    athena: Any,
    log_stream: str,
    respond: Callable[[str, dict[str, Any]], None] = put_response,
) -> dict[str, Any]:
    props = event.get("ResourceProperties", {})
    body: dict[str, Any] = {
        "Status": "SUCCESS",
        "PhysicalResourceId": f"iofleet-views-{props.get('Database', 'iofleet')}",
        "StackId": event.get("StackId"),
        "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"),
    }
    try:
        kw = {"workgroup": props["WorkGroup"], "database": props["Database"]}
        if event.get("RequestType") == "Delete":
            views = drop_views(athena, **kw)
        else:
            views = create_views(athena, **kw)
        body["Data"] = {"Views": ",".join(views)}
    except Exception as exc:  # noqa: BLE001 - CloudFormation must always get an answer
        body["Status"] = "FAILED"
        body["Reason"] = f"{type(exc).__name__}: {exc} (log stream {log_stream})"[:1000]
    respond(event["ResponseURL"], body)
    return body
