"""The Athena API over Trino (moto's Athena runs no SQL), plus a CloudFormation response sink.

Enough of Athena's JSON protocol for `iofleet.aws.athena` (run_query, AthenaSource):
StartQueryExecution (answers at once, then runs the query on Trino in a thread
while GetQueryExecution says RUNNING, as Athena does; catalog `awsdatacatalog`, the
context database as schema; `ExecutionParameters` bound with
`EXECUTE IMMEDIATE ... USING`; once `workgroups` is set, another workgroup is
refused as Athena does: InvalidRequestException "WorkGroup NAME is not found."),
GetQueryExecution, GetQueryResults (values as strings; pages of `MaxResults`
rows, at most 1,000, with a NextToken, the header row first on the first page
only, as Athena pages; ColumnInfo types without their parameters, `timestamp`
not `timestamp(3)`, as Athena names them). `Statistics.DataScannedInBytes` is
Trino's `physicalInputBytes` (what the query read from S3; Athena bills the same
measure). No SQL is rewritten: the statements iofleet sends (SELECT, CREATE OR
REPLACE VIEW, DROP VIEW, INSERT INTO ... SELECT) have the same syntax in both.
`PUT /cfn-response/...` stores a custom resource's answer for the deployer to read.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import ThreadingHTTPServer
from typing import Any

from trino_client import TrinoClient, TrinoError

from tests.awsjson import json11_handler


def _text(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"VarCharValue": "true" if value else "false"}
    if isinstance(value, list | dict):
        return {"VarCharValue": json.dumps(value)}
    return {"VarCharValue": str(value)}


class AthenaOnTrino:
    def __init__(self, trino_endpoint: str) -> None:
        self.trino_endpoint = trino_endpoint
        self.queries: dict[str, dict[str, Any]] = {}
        self.cfn_responses: dict[str, dict[str, Any]] = {}
        self.sql_log: list[str] = []
        self.workgroups: set[str] | None = None  # None: any workgroup (before the deployment)
        outer = self

        class Handler(json11_handler(self.call)):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.cfn_responses[self.path.rsplit("/", 1)[-1]] = json.loads(body or b"{}")
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> AthenaOnTrino:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def response_url(self, request_id: str) -> str:
        return f"{self.endpoint}/cfn-response/{request_id}"

    def call(self, op: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if op == "StartQueryExecution":
            workgroup = body.get("WorkGroup", "primary")
            if self.workgroups is not None and workgroup not in self.workgroups:
                return 400, {
                    "__type": "InvalidRequestException",
                    "Message": f"WorkGroup {workgroup} is not found.",
                }
            return 200, {"QueryExecutionId": self.start_query(body)}
        query = self.queries.get(body.get("QueryExecutionId", ""))
        if query is None:
            return 400, {"__type": "InvalidRequestException", "Message": "unknown QueryExecutionId"}
        if op == "GetQueryExecution":
            status: dict[str, Any] = {"State": query["state"]}
            if query.get("reason"):
                status["StateChangeReason"] = query["reason"]
            return 200, {
                "QueryExecution": {
                    "QueryExecutionId": query["id"],
                    "Query": query["sql"],
                    "Status": status,
                    "Statistics": {"DataScannedInBytes": query["scanned"]},
                }
            }
        if op == "GetQueryResults":
            rows = [{"Data": [_text(c) for c in query["columns"]]}] if query["columns"] else []
            rows += [{"Data": [_text(v) for v in row]} for row in query["rows"]]
            size = min(int(body.get("MaxResults") or 1000), 1000)
            start = int(body.get("NextToken") or 0)
            info = [
                {"Name": c, "Label": c, "Type": re.sub(r"\(.*?\)", "", t)}
                for c, t in zip(query["columns"], query["types"], strict=False)
            ]
            answer: dict[str, Any] = {
                "ResultSet": {
                    "Rows": rows[start : start + size],
                    "ResultSetMetadata": {"ColumnInfo": info},
                },
                "UpdateCount": 0,
            }
            if start + size < len(rows):
                answer["NextToken"] = str(start + size)
            return 200, answer
        return 400, {"__type": "InvalidRequestException", "Message": f"{op} is not supported here"}

    def start_query(self, body: dict[str, Any]) -> str:
        qid = str(uuid.uuid4())
        sql = body["QueryString"]
        params = body.get("ExecutionParameters") or []
        if params:  # Athena binds `?` with SQL literals, in order
            sql = "EXECUTE IMMEDIATE '" + sql.replace("'", "''") + "' USING " + ", ".join(params)
        database = (body.get("QueryExecutionContext") or {}).get("Database", "default")
        self.sql_log.append(sql)
        query: dict[str, Any] = {
            "id": qid,
            "sql": sql,
            "state": "RUNNING",
            "columns": [],
            "types": [],
            "rows": [],
            "scanned": 0,
        }
        self.queries[qid] = query
        # as in Athena, the query runs after StartQueryExecution has answered: a slow
        # query (an INSERT on a loaded machine) never outlasts the caller's HTTP timeout
        threading.Thread(target=self._run, args=(query, database), daemon=True).start()
        return qid

    def _run(self, query: dict[str, Any], database: str) -> None:
        try:
            result = TrinoClient(
                self.trino_endpoint, catalog="awsdatacatalog", schema=database, timeout_s=1800
            ).execute(query["sql"])
            query.update(
                columns=list(result.columns),
                types=list(result.types),
                rows=result.rows,
                scanned=int(result.stats.get("physicalInputBytes", 0)),
            )
            query["state"] = "SUCCEEDED"  # last: a poller never sees SUCCEEDED without rows
        except TrinoError as err:
            query.update(state="FAILED", reason=str(err))
        except Exception as err:  # noqa: BLE001 - a query must end, as in Athena
            query.update(state="FAILED", reason=f"{type(err).__name__}: {err}")
