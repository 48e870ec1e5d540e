"""The Athena API over Trino (moto's Athena runs no SQL), plus a CloudFormation response sink.

Enough of Athena's JSON protocol for `iofleet.aws.athena.run_query`:
StartQueryExecution (starts the query on Trino in a thread and answers at
once, as Athena does; catalog `awsdatacatalog`, the context database as
schema; `ExecutionParameters` bound with `EXECUTE IMMEDIATE ... USING`),
GetQueryExecution, GetQueryResults (header row first, values as strings, one
page). `Statistics.DataScannedInBytes` is Trino's `physicalInputBytes` (what
the query read from S3; Athena bills the same measure). No SQL is rewritten:
the statements iofleet sends (SELECT, CREATE OR REPLACE VIEW, DROP VIEW,
INSERT INTO ... SELECT) have the same syntax in both. `PUT /cfn-response/...`
stores a custom resource's answer for the deployer to read.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trino_client import TrinoClient, TrinoError


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
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(
                    self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}"
                )
                op = self.headers.get("X-Amz-Target", "").rsplit(".", 1)[-1]
                status, answer = outer.call(op, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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
            info = [
                {"Name": c, "Label": c, "Type": t}
                for c, t in zip(query["columns"], query["types"], strict=False)
            ]
            return 200, {
                "ResultSet": {"Rows": rows, "ResultSetMetadata": {"ColumnInfo": info}},
                "UpdateCount": 0,
            }
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
                state="SUCCEEDED",
            )
        except TrinoError as err:
            query.update(state="FAILED", reason=str(err))
        except Exception as err:  # noqa: BLE001 - a query must end, as in Athena
            query.update(state="FAILED", reason=f"{type(err).__name__}: {err}")
