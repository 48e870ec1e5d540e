"""Athena: a small query runner (start, poll, page the results as text) and `AthenaSource`,
the typed results source `iofleet report --athena` / `compare --athena` and Summarize read."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from iofleet.errors import EnvironmentProblem, UsageError


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


# --- typed reads: the report and compare's results source ---------------------------

_INTEGER = frozenset({"tinyint", "smallint", "integer", "int", "bigint"})
_FLOAT = frozenset({"double", "float", "real"})


def convert(value: str | None, athena_type: str) -> Any:
    """One VarCharValue as the Python value DuckDB gives for the same column type.

    `athena_type` is ResultSetMetadata's ColumnInfo.Type (`bigint`, `double`,
    `varchar`, `timestamp`, `decimal`, ...; a parameterised `timestamp(3)` or
    `decimal(10,2)` reads as its base type). Arrays, maps, rows and unknown types stay text.
    """
    base = athena_type.split("(", 1)[0].strip().lower()
    if value is None or (value == "" and base in ("varchar", "char", "string")):
        return None  # as the warehouse loads it: an empty string is NULL there (warehouse.py)
    if base in _INTEGER:
        return int(value)
    if base in _FLOAT:
        return float(value)  # Athena writes NaN, Infinity, -Infinity, 1.5E7: float() reads all
    if base == "boolean":
        return value.lower() == "true"
    if base == "decimal":
        import decimal

        return decimal.Decimal(value)
    if base == "timestamp":  # `2026-11-21 05:12:00.250`; with a zone: kept as text
        import datetime

        try:
            return datetime.datetime.fromisoformat(value)
        except ValueError:
            return value
    if base == "date":
        import datetime

        return datetime.date.fromisoformat(value)
    return value


class AthenaError(UsageError):
    """A query that ended FAILED or CANCELLED (a missing table or view, a wrong database):
    bad input, exit 2. One line: `--athena: query FAILED: reason`."""


# botocore error codes that say the machine/account, not the command line, is wrong
_ENVIRONMENT_CODES = frozenset(
    {
        "AccessDeniedException",
        "AccessDenied",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "ExpiredToken",
        "ThrottlingException",
        "TooManyRequestsException",
        "InternalServerException",
        "ServiceUnavailable",
    }
)


def problem(exc: BaseException, source: AthenaSource) -> Exception | None:
    """A botocore exception as the CLI's one-line error (UsageError: exit 2,
    EnvironmentProblem: exit 3), or None when it is none of botocore's."""
    try:
        from botocore import exceptions as bx
    except ImportError:  # pragma: no cover - boto3 is a dependency
        return None
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return EnvironmentProblem(f"--athena: no AWS credentials ({first})")
    if isinstance(exc, bx.NoRegionError):
        return EnvironmentProblem(
            "--athena: no AWS region (set AWS_DEFAULT_REGION or a profile's region)"
        )
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError):
        return EnvironmentProblem(f"--athena: cannot reach Athena: {first}")
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code, message = str(err.get("Code", "")), str(err.get("Message", "")) or first
        if code in _ENVIRONMENT_CODES:
            return EnvironmentProblem(f"--athena: {code}: {message}")
        if "workgroup" in message.lower():
            return UsageError(f"--workgroup {source.workgroup}: {message}")
        if "database" in message.lower() or "schema" in message.lower():
            return UsageError(f"--database {source.database}: {message}")
        return UsageError(f"--athena: {code}: {message}")
    if isinstance(exc, bx.BotoCoreError):
        return EnvironmentProblem(f"--athena: {first}")
    return None


class AthenaSource:
    """`iofleet.results.source.ResultsSource` on Athena: runs the Trino text as written.

    `?` placeholders go as ExecutionParameters (SQL literals: strings quoted,
    numbers as written). Results are paged with GetQueryResults' NextToken (the
    header row is the first row of the first page) and converted by the column
    types of ResultSetMetadata. `output_location`: the S3 prefix for results when
    the workgroup sets none.
    """

    def __init__(
        self,
        athena: Any,
        *,
        workgroup: str,
        database: str,
        output_location: str | None = None,
        poll_s: float = 0.2,
        max_poll_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.athena = athena
        self.workgroup = workgroup
        self.database = database
        self.output_location = output_location
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self.sleep = sleep
        self.where = f"--athena (workgroup {workgroup}, database {database})"

    @staticmethod
    def literal(value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return repr(value)
        return "'" + str(value).replace("'", "''") + "'"

    def start(self, sql: str, params: Sequence[object] = ()) -> str:
        args: dict[str, Any] = {
            "QueryString": sql,
            "WorkGroup": self.workgroup,
            "QueryExecutionContext": {"Database": self.database},
        }
        if params:
            args["ExecutionParameters"] = [self.literal(p) for p in params]
        if self.output_location:
            args["ResultConfiguration"] = {"OutputLocation": self.output_location}
        return str(self.athena.start_query_execution(**args)["QueryExecutionId"])

    def wait(self, qid: str) -> None:
        delay = self.poll_s
        while True:
            status = self.athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"][
                "Status"
            ]
            state = status["State"]
            if state == "SUCCEEDED":
                return
            if state in ("FAILED", "CANCELLED"):
                reason = str(status.get("StateChangeReason") or "no reason given")
                raise AthenaError(f"--athena: query {state}: {reason.splitlines()[0]}")
            self.sleep(delay)  # Athena has no wait call: poll with backoff
            delay = min(delay * 2, self.max_poll_s)

    def fetch(self, qid: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        names: list[str] | None = None
        types: list[str] = []
        token: str | None = None
        while True:
            args: dict[str, Any] = {"QueryExecutionId": qid, "MaxResults": 1000}
            if token:
                args["NextToken"] = token
            page = self.athena.get_query_results(**args)
            result = page["ResultSet"]
            page_rows = result.get("Rows", [])
            if names is None:
                info = result.get("ResultSetMetadata", {}).get("ColumnInfo", [])
                names = [str(c["Name"]) for c in info]
                types = [str(c.get("Type") or "varchar") for c in info]
                page_rows = page_rows[1:]  # the header row (column labels)
            for row in page_rows:
                data = row.get("Data", [])
                rows.append(
                    {
                        name: convert(cell.get("VarCharValue"), kind)
                        for name, kind, cell in zip(names, types, data, strict=False)
                    }
                )
            token = page.get("NextToken")
            if not token:
                return rows

    def select(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        try:
            qid = self.start(sql, params)
            self.wait(qid)
            return self.fetch(qid)
        except AthenaError:
            raise
        except Exception as exc:
            translated = problem(exc, self)
            if translated is None:
                raise
            raise translated from None


def open_athena(
    workgroup: str | None, database: str | None, output_location: str | None = None
) -> AthenaSource:
    """The CLI's Athena source (`--athena --workgroup W --database D [--athena-output S3]`),
    a boto3 client from the usual AWS configuration (AWS_ENDPOINT_URL /
    AWS_ENDPOINT_URL_ATHENA honoured). Bad options: UsageError (exit 2)."""
    if not workgroup:
        raise UsageError("--workgroup: required with --athena (the stack's AthenaWorkGroup output)")
    if not database:
        raise UsageError("--database: required with --athena (the stack's database: iofleet)")
    if output_location is not None and not output_location.startswith("s3://"):
        raise UsageError(f"--athena-output {output_location}: expected s3://BUCKET/PREFIX/")
    import boto3

    source = AthenaSource(
        None, workgroup=workgroup, database=database, output_location=output_location
    )
    try:
        session = boto3.session.Session()
        if not session.region_name:  # an empty AWS_REGION too (botocore would build "athena..")
            raise EnvironmentProblem(
                "--athena: no AWS region (set AWS_DEFAULT_REGION or a profile's region)"
            )
        source.athena = session.client("athena")
    except EnvironmentProblem:
        raise
    except Exception as exc:
        translated = problem(exc, source)
        if translated is None:
            raise
        raise translated from None
    return source
