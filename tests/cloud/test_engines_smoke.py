"""The local-cloud engines work, here, together: moto, DynamoDB Local, Trino on Glue/S3 in moto."""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import engines
import pytest
from trino_client import TrinoClient, TrinoError

from iofleet.results.schema import FIO_RESULTS, RUNS, TABLES, Table

OPENX_JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
HIVE_JSON_SERDE = "org.apache.hive.hcatalog.data.JsonSerDe"


def glue_table_input(
    name: str,
    table: Table,
    location: str,
    *,
    partition_keys: tuple[str, ...] = (),
    parameters: dict[str, str] | None = None,
    serde: str = OPENX_JSON_SERDE,
) -> dict[str, Any]:
    """A Glue TableInput for JSON-lines objects with the columns of `table`."""
    columns = [
        {"Name": c["name"], "Type": c["type"], "Comment": c["comment"]}
        for c in table.glue_columns()
        if c["name"] not in partition_keys
    ]
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "json", **(parameters or {})},
        "PartitionKeys": [{"Name": key, "Type": "string"} for key in partition_keys],
        "StorageDescriptor": {
            "Columns": columns,
            "Location": location,
            "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            "SerdeInfo": {"SerializationLibrary": serde},
        },
    }


def json_lines(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def fio_row(slot_index: int, iops: float, clat_p99_ns: int) -> dict[str, Any]:
    return FIO_RESULTS.row(
        run_id="smoke-run",
        cell_id="c000-smoke",
        slot_index=slot_index,
        workload_index=0,
        workload="randread-16k-psync-16jobs",
        job="randread",
        job_index=0,
        direction="read",
        iops=iops,
        bw_bytes=int(iops * 16384),
        error=0,
        clat_p99_ns=clat_p99_ns,
    )


ROWS = [fio_row(0, 1500.5, 91_000), fio_row(1, 1400.0, 95_000), fio_row(2, 1600.25, 87_000)]


@dataclass(frozen=True)
class Catalog:
    database: str
    bucket: str


@pytest.fixture(scope="module")
def catalog(aws_client: Callable[[str], Any]) -> Catalog:
    """Bucket + Glue database + fio_results table (JSON SerDe) holding ROWS, all in moto."""
    suffix = uuid.uuid4().hex[:10]  # engines are shared by the session
    found = Catalog(database=f"iofleet_smoke_{suffix}", bucket=f"iofleet-smoke-{suffix}")
    s3, glue = aws_client("s3"), aws_client("glue")
    s3.create_bucket(Bucket=found.bucket)
    s3.put_object(
        Bucket=found.bucket, Key="curated/fio_results/part-0000.json", Body=json_lines(ROWS)
    )
    glue.create_database(DatabaseInput={"Name": found.database})
    glue.create_table(
        DatabaseName=found.database,
        TableInput=glue_table_input(
            "fio_results", FIO_RESULTS, f"s3://{found.bucket}/curated/fio_results/"
        ),
    )
    return found


# ---------------------------------------------------------------- moto: S3 + Glue


def test_moto_glue_table_has_the_results_schema_columns(
    catalog: Catalog, aws_client: Callable[[str], Any]
) -> None:
    table = aws_client("glue").get_table(DatabaseName=catalog.database, Name="fio_results")
    columns = table["Table"]["StorageDescriptor"]["Columns"]
    assert [(c["Name"], c["Type"]) for c in columns] == [
        (c.name, c.type) for c in FIO_RESULTS.columns
    ]


def test_moto_s3_holds_the_curated_object(
    catalog: Catalog, aws_client: Callable[[str], Any]
) -> None:
    body = (
        aws_client("s3")
        .get_object(Bucket=catalog.bucket, Key="curated/fio_results/part-0000.json")["Body"]
        .read()
    )
    assert body == json_lines(ROWS)


# ---------------------------------------------------------------- Trino over Glue + S3 in moto


def test_trino_counts_rows_through_glue_and_s3_in_moto(
    catalog: Catalog, trino: TrinoClient
) -> None:
    count = trino.execute(f"SELECT count(*) FROM {catalog.database}.fio_results").scalar()
    assert count == len(ROWS)


def test_trino_reads_the_json_values_with_their_types(catalog: Catalog, trino: TrinoClient) -> None:
    result = trino.execute(
        f"SELECT slot_index, iops, clat_p99_ns, clat_p50_ns FROM {catalog.database}.fio_results "
        "ORDER BY slot_index"
    )
    assert result.types == ["integer", "double", "bigint", "bigint"]
    assert result.rows == [[r["slot_index"], r["iops"], r["clat_p99_ns"], None] for r in ROWS]


def test_trino_athena_catalog_name_sees_the_same_table(
    catalog: Catalog, trino: TrinoClient
) -> None:
    count = trino.execute(
        f"SELECT count(*) FROM awsdatacatalog.{catalog.database}.fio_results"
    ).scalar()
    assert count == len(ROWS)


def _create_projected_table(glue: Any, catalog: Catalog, unique: str, location: str) -> None:
    """Table projected_<unique>: fio_results partitioned by run_id, an injected projection at `location`."""
    glue.create_table(
        DatabaseName=catalog.database,
        TableInput=glue_table_input(
            f"projected_{unique}",
            FIO_RESULTS,
            location,
            partition_keys=("run_id",),
            parameters={
                "projection.enabled": "true",
                "projection.run_id.type": "injected",
                "storage.location.template": location + "run_id=${run_id}/",
            },
        ),
    )


def test_trino_reads_injected_partition_projection_without_glue_partitions(
    catalog: Catalog, aws_client: Callable[[str], Any], trino: TrinoClient, unique: str
) -> None:
    # given: objects under run_id=... prefixes and a projected table, no partitions registered
    s3, glue = aws_client("s3"), aws_client("glue")
    prefix = f"curated/projected_{unique}"
    unpartitioned = [{k: v for k, v in row.items() if k != "run_id"} for row in ROWS]
    s3.put_object(
        Bucket=catalog.bucket, Key=f"{prefix}/run_id=r1/a.json", Body=json_lines(unpartitioned)
    )
    s3.put_object(
        Bucket=catalog.bucket, Key=f"{prefix}/run_id=r2/a.json", Body=json_lines(unpartitioned[:1])
    )
    _create_projected_table(glue, catalog, unique, f"s3://{catalog.bucket}/{prefix}/")
    # when
    result = trino.execute(
        f"SELECT run_id, count(*) FROM {catalog.database}.projected_{unique} "
        "WHERE run_id IN ('r1', 'r2') GROUP BY run_id ORDER BY run_id"
    )
    # then
    assert (
        glue.get_partitions(DatabaseName=catalog.database, TableName=f"projected_{unique}")[
            "Partitions"
        ]
        == []
    )
    assert result.rows == [["r1", 3], ["r2", 1]]


def test_trino_refuses_injected_projection_without_a_run_id_predicate(
    catalog: Catalog, aws_client: Callable[[str], Any], trino: TrinoClient, unique: str
) -> None:
    _create_projected_table(
        aws_client("glue"), catalog, unique, f"s3://{catalog.bucket}/curated/projected_{unique}/"
    )
    with pytest.raises(TrinoError, match="INVALID_COLUMN_PROPERTY"):
        trino.execute(f"SELECT count(*) FROM {catalog.database}.projected_{unique}")


def test_trino_expands_a_view_stored_in_glue_in_athena_format(
    catalog: Catalog, aws_client: Callable[[str], Any], trino: TrinoClient, unique: str
) -> None:
    # given: a Presto/Athena view definition as Athena stores it (catalog awsdatacatalog)
    view = {
        "originalSql": "SELECT max(iops) AS max_iops FROM fio_results",
        "catalog": "awsdatacatalog",
        "schema": catalog.database,
        "columns": [{"name": "max_iops", "type": "double"}],
    }
    encoded = base64.b64encode(json.dumps(view).encode()).decode()
    aws_client("glue").create_table(
        DatabaseName=catalog.database,
        TableInput={
            "Name": f"v_max_iops_{unique}",
            "TableType": "VIRTUAL_VIEW",
            "Owner": "iofleet",  # Trino refuses a definer view without an owner
            "Parameters": {"presto_view": "true", "comment": "Presto View"},
            "ViewOriginalText": f"/* Presto View: {encoded} */",
            "ViewExpandedText": "/* Presto View */",
            # Trino needs a SerdeInfo, even empty, on a view's StorageDescriptor
            "StorageDescriptor": {
                "Columns": [{"Name": "max_iops", "Type": "double"}],
                "SerdeInfo": {},
            },
        },
    )
    # when
    value = trino.execute(f"SELECT max_iops FROM {catalog.database}.v_max_iops_{unique}").scalar()
    # then
    assert value == max(r["iops"] for r in ROWS)


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
def test_trino_reads_every_results_table_definition(
    table: Table,
    catalog: Catalog,
    aws_client: Callable[[str], Any],
    trino: TrinoClient,
    unique: str,
) -> None:
    # given: one all-null row for the table, as ingest would write it
    prefix = f"curated/{table.name}_{unique}"
    aws_client("s3").put_object(
        Bucket=catalog.bucket, Key=f"{prefix}/x.json", Body=json_lines([table.row()])
    )
    aws_client("glue").create_table(
        DatabaseName=catalog.database,
        TableInput=glue_table_input(
            f"{table.name}_{unique}", table, f"s3://{catalog.bucket}/{prefix}/"
        ),
    )
    # when
    result = trino.execute(f"SELECT * FROM {catalog.database}.{table.name}_{unique}")
    # then
    assert result.columns == list(table.column_names)
    assert result.rows == [[None] * len(table.columns)]


def test_openx_json_serde_reads_both_timestamp_spellings(
    catalog: Catalog, aws_client: Callable[[str], Any], trino: TrinoClient, unique: str
) -> None:
    # given: the timestamp spellings ingest might write
    spellings = ["2026-11-21 05:12:00.250", "2026-11-21T05:12:00.250Z"]
    rows = [RUNS.row(run_id=f"r{i}", started_at=ts) for i, ts in enumerate(spellings)]
    prefix = f"curated/runs_ts_{unique}"
    aws_client("s3").put_object(
        Bucket=catalog.bucket, Key=f"{prefix}/x.json", Body=json_lines(rows)
    )
    aws_client("glue").create_table(
        DatabaseName=catalog.database,
        TableInput=glue_table_input(f"runs_ts_{unique}", RUNS, f"s3://{catalog.bucket}/{prefix}/"),
    )
    # when
    result = trino.execute(
        f"SELECT run_id, CAST(started_at AS varchar) FROM {catalog.database}.runs_ts_{unique} "
        "ORDER BY run_id"
    )
    # then
    assert result.rows == [["r0", "2026-11-21 05:12:00.250"], ["r1", "2026-11-21 05:12:00.250"]]


def date_projection(location: str, start: dt.date) -> dict[str, str]:
    """Athena date projection on `dt` up to NOW, as the deployed catalog declares it."""
    return {
        "classification": "json",
        "projection.enabled": "true",
        "projection.dt.type": "date",
        "projection.dt.format": "yyyy-MM-dd",
        "projection.dt.range": f"{start.isoformat()},NOW",
        "projection.dt.interval": "1",
        "projection.dt.interval.unit": "DAYS",
        "storage.location.template": location + "dt=${dt}/",
    }


def test_trino_reads_date_projection_up_to_now_with_hive_json_serde(
    catalog: Catalog, aws_client: Callable[[str], Any], trino: TrinoClient, unique: str
) -> None:
    # given: today's partition written, a projection starting two days ago (few S3 listings)
    today = dt.datetime.now(dt.UTC).date()
    prefix = f"curated/dated_{unique}"
    aws_client("s3").put_object(
        Bucket=catalog.bucket, Key=f"{prefix}/dt={today.isoformat()}/a.json", Body=json_lines(ROWS)
    )
    location = f"s3://{catalog.bucket}/{prefix}/"
    aws_client("glue").create_table(
        DatabaseName=catalog.database,
        TableInput=glue_table_input(
            f"dated_{unique}",
            FIO_RESULTS,
            location,
            partition_keys=("dt",),
            parameters=date_projection(location, today - dt.timedelta(days=2)),
            serde=HIVE_JSON_SERDE,
        ),
    )
    # when: no dt filter, so Trino enumerates every projected day through NOW
    result = trino.execute(
        f"SELECT dt, count(*), sum(iops) FROM {catalog.database}.dated_{unique} GROUP BY dt"
    )
    # then
    assert result.rows == [[today.isoformat(), len(ROWS), sum(r["iops"] for r in ROWS)]]


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("2026-11-21 05:12:00.250", "2026-11-21 05:12:00.250"),
        ("2026-11-21 05:12:00", "2026-11-21 05:12:00.000"),
        ("2026-11-21T05:12:00", "2026-11-21 05:12:00.000"),
        ("2026-11-21T05:12:00.250Z", None),  # the Hive SerDe rejects the file: HIVE_CURSOR_ERROR
    ],
)
def test_hive_json_serde_timestamp_spellings(
    spelling: str,
    expected: str | None,
    catalog: Catalog,
    aws_client: Callable[[str], Any],
    trino: TrinoClient,
    unique: str,
) -> None:
    # given
    prefix = f"curated/runs_hive_ts_{unique}"
    aws_client("s3").put_object(
        Bucket=catalog.bucket,
        Key=f"{prefix}/x.json",
        Body=json_lines([RUNS.row(run_id="r", started_at=spelling)]),
    )
    aws_client("glue").create_table(
        DatabaseName=catalog.database,
        TableInput=glue_table_input(
            f"runs_hive_ts_{unique}",
            RUNS,
            f"s3://{catalog.bucket}/{prefix}/",
            serde=HIVE_JSON_SERDE,
        ),
    )
    sql = f"SELECT CAST(started_at AS varchar) FROM {catalog.database}.runs_hive_ts_{unique}"
    # when / then
    if expected is None:
        with pytest.raises(TrinoError, match="HIVE_CURSOR_ERROR"):
            trino.execute(sql)
    else:
        assert trino.execute(sql).scalar() == expected


def test_trino_memory_catalog_round_trips_a_table(trino: TrinoClient, unique: str) -> None:
    trino.execute(f"CREATE TABLE memory.default.t_{unique} AS SELECT 7 AS n")
    assert trino.execute(f"SELECT n FROM memory.default.t_{unique}").scalar() == 7


# ---------------------------------------------------------------- DynamoDB Local


@pytest.fixture
def runs_table(aws_client: Callable[[str], Any], unique: str) -> str:
    name = f"iofleet-runs-{unique}"
    aws_client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def test_dynamodb_local_returns_the_item_it_was_given(
    runs_table: str, aws_client: Callable[[str], Any]
) -> None:
    ddb = aws_client("dynamodb")
    item = {"pk": {"S": "run#r1"}, "status": {"S": "RUNNING"}, "slots": {"N": "3"}}
    ddb.put_item(TableName=runs_table, Item=item)
    got = ddb.get_item(TableName=runs_table, Key={"pk": {"S": "run#r1"}}, ConsistentRead=True)
    assert got["Item"] == item


def test_dynamodb_local_conditional_update_applies_once(
    runs_table: str, aws_client: Callable[[str], Any]
) -> None:
    # given: a counter at 0
    ddb = aws_client("dynamodb")
    key = {"pk": {"S": "barrier#c0"}}
    ddb.put_item(TableName=runs_table, Item={**key, "arrived": {"N": "0"}})
    update = {
        "TableName": runs_table,
        "Key": key,
        "UpdateExpression": "SET arrived = arrived + :one",
        "ConditionExpression": "arrived = :expected",
        "ExpressionAttributeValues": {":one": {"N": "1"}, ":expected": {"N": "0"}},
        "ReturnValues": "UPDATED_NEW",
    }
    # when: the same conditional update twice
    first = ddb.update_item(**update)
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.update_item(**update)
    # then
    assert first["Attributes"]["arrived"] == {"N": "1"}
    assert ddb.get_item(TableName=runs_table, Key=key, ConsistentRead=True)["Item"]["arrived"] == {
        "N": "1"
    }


# ---------------------------------------------------------------- moto Step Functions


def test_moto_step_functions_executes_a_state_machine_to_success(
    aws_client: Callable[[str], Any], unique: str
) -> None:
    # given: Pass -> Succeed
    sfn = aws_client("stepfunctions")
    definition = {
        "StartAt": "Hello",
        "States": {
            "Hello": {
                "Type": "Pass",
                "Result": {"greeting": "hi"},
                "ResultPath": "$.pass",
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
    }
    machine = sfn.create_state_machine(
        name=f"smoke-{unique}",
        definition=json.dumps(definition),
        roleArn=f"arn:aws:iam::{engines.AWS_ACCOUNT}:role/smoke",
    )
    # when
    execution = sfn.start_execution(
        stateMachineArn=machine["stateMachineArn"], input=json.dumps({"n": 1})
    )

    def finished() -> dict[str, Any] | None:
        found: dict[str, Any] = sfn.describe_execution(executionArn=execution["executionArn"])
        return found if found["status"] != "RUNNING" else None

    described = engines.poll(finished, timeout_s=60, what="Step Functions execution")
    # then
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"n": 1, "pass": {"greeting": "hi"}}


# ---------------------------------------------------------------- the engine layer itself


def test_install_downloads_nothing_when_cached(dynamodb_local: engines.Engine) -> None:
    assert engines.install() == []


def test_stopped_engine_leaves_no_process_and_frees_its_port() -> None:
    # given
    engine = engines.start_moto(execute_state_machine=False)
    # when
    engine.stop()
    # then
    assert engine.process.returncode is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", engine.port), timeout=2).close()
