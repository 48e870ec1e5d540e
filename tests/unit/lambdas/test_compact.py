"""Per-run Parquet compaction (iofleet/aws/compact.py) against moto server: Glue partitions,
the wait for ingest, the no-op cases. moto's Athena runs no SQL, so the INSERT itself, the
views and the bytes scanned are tested on Trino (tests/cloud/test_e2e.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from iofleet.aws import compact
from iofleet.results import schema
from lambdas.ingest import handler as ingest
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext
from tests.unit.lambdas.test_ingest_handler import RUN, SLOT, _put_raw, _record

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def catalog(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Glue database with every landing and Parquet table (as the stack defines them);
    the ingest handler's environment names it."""
    glue = cloud.client("glue")
    database = f"db_{cloud.table.replace('-', '_')}"
    glue.create_database(DatabaseInput={"Name": database})
    for t in schema.TABLES:
        for name, location, fmt in (
            (
                compact.landing_table(t.name),
                f"s3://{cloud.bucket}/curated/{t.name}/",
                compact.JSON_FORMAT,
            ),
            (
                compact.parquet_table(t.name),
                compact.parquet_location(cloud.bucket, t.name),
                compact.PARQUET_FORMAT,
            ),
        ):
            glue.create_table(
                DatabaseName=database,
                TableInput={
                    "Name": name,
                    "TableType": "EXTERNAL_TABLE",
                    "PartitionKeys": [{"Name": "run_id", "Type": "string"}],
                    "StorageDescriptor": compact.storage_descriptor(t, location, fmt),
                },
            )
    monkeypatch.setenv(compact.DATABASE_ENV, database)
    ingest._clients.cache_clear()  # the handler reads its environment once per process
    yield database
    ingest._clients.cache_clear()


def _partitions(cloud: Cloud, database: str, table: str) -> dict[str, str]:
    got = cloud.client("glue").get_partitions(DatabaseName=database, TableName=table)
    return {p["Values"][0]: p["StorageDescriptor"]["Location"] for p in got["Partitions"]}


def _fio(cloud: Cloud, name: str = "w00-fio-randread.json") -> str:
    body = (FIXTURES / "fio" / "jsonplus-two-jobs.json").read_bytes()
    return _put_raw(cloud, f"{SLOT}/{name}", body)


def test_ingest_registers_the_runs_landing_partition_once(
    cloud: Cloud, catalog: str, context: FakeLambdaContext
) -> None:
    first, second = _fio(cloud), _fio(cloud, "w01-fio-randread.json")
    out = ingest.handler({"Records": [_record(first, "m1"), _record(second, "m2")]}, context)
    assert out == {"batchItemFailures": []}
    landing = _partitions(cloud, catalog, "fio_results_landing")
    # then: the run's partition points at its landing objects (the key prefix ingest writes)
    assert landing == {RUN: f"s3://{cloud.bucket}/curated/fio_results/dt=2026-11-21/{RUN}/"}
    assert cloud.keys(landing[RUN][len(f"s3://{cloud.bucket}/") :])
    assert RUN in _partitions(cloud, catalog, "fio_latency_histograms_landing")
    assert _partitions(cloud, catalog, "fio_results_parquet") == {}
    # and: another process (a cold Lambda) delivering the same object again is fine
    ingest._clients.cache_clear()
    assert ingest.handler({"Records": [_record(first, "m3")]}, context) == {"batchItemFailures": []}
    assert list(_partitions(cloud, catalog, "fio_results_landing")) == [RUN]


def test_ingest_without_a_glue_database_registers_nothing(
    cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(compact.DATABASE_ENV, raising=False)
    ingest._clients.cache_clear()
    assert "partitions" not in ingest._clients()
    ingest._clients.cache_clear()


def test_raw_objects_not_curated_yet_are_pending(
    cloud: Cloud, catalog: str, context: FakeLambdaContext
) -> None:
    s3 = cloud.client("s3")
    fio = _fio(cloud)
    manifest = _put_raw(cloud, f"{SLOT}/manifest.json", b"{}")
    _put_raw(cloud, f"{SLOT}/.hidden.json", b"{}")  # not ingested by design
    _put_raw(cloud, f"{SLOT}/notes.txt", b"x")
    pending = compact.ingest_pending(RUN, s3=s3, bucket=cloud.bucket)
    assert pending == [f"{SLOT}/manifest.json", f"{SLOT}/w00-fio-randread.json"]
    ingest.handler({"Records": [_record(fio, "m1"), _record(manifest, "m2")]}, context)
    assert compact.ingest_pending(RUN, s3=s3, bucket=cloud.bucket) == []


def test_a_run_with_objects_still_in_the_ingest_queue_is_not_compacted(
    cloud: Cloud, catalog: str, workgroup: str
) -> None:
    _fio(cloud)  # uploaded, never delivered to ingest
    waits: list[float] = []
    out = compact.compaction_section(
        RUN,
        s3=cloud.client("s3"),
        bucket=cloud.bucket,
        ingest_timeout_s=0,
        sleep=waits.append,
        athena=cloud.client("athena"),
        glue=cloud.client("glue"),
        workgroup=workgroup,
        database=catalog,
    )
    assert out["objects"] == {}
    assert out["error"] == (
        f"not compacted: 1 raw objects not ingested yet, e.g. {SLOT}/w00-fio-randread.json"
    )
    athena = cloud.client("athena")
    assert athena.list_query_executions(WorkGroup=workgroup)["QueryExecutionIds"] == []
    assert cloud.keys("curated/parquet/") == []


def test_compaction_of_an_ingested_run_inserts_each_table_with_landing_rows(
    cloud: Cloud, catalog: str, workgroup: str, context: FakeLambdaContext
) -> None:
    ingest.handler({"Records": [_record(_fio(cloud), "m1")]}, context)
    # a stale Parquet object of an earlier attempt is replaced, not kept beside the new ones
    stale = compact.parquet_prefix("fio_results", RUN) + "stale.parquet"
    cloud.client("s3").put_object(Bucket=cloud.bucket, Key=stale, Body=b"PAR1")
    cloud.client("glue").create_partition(
        DatabaseName=catalog,
        TableName="fio_results_parquet",
        PartitionInput={
            "Values": [RUN],
            "StorageDescriptor": compact.storage_descriptor(
                schema.FIO_RESULTS,
                f"s3://{cloud.bucket}/{compact.parquet_prefix('fio_results', RUN)}",
                compact.PARQUET_FORMAT,
            ),
        },
    )
    out = compact.compaction_section(
        RUN,
        s3=cloud.client("s3"),
        bucket=cloud.bucket,
        athena=cloud.client("athena"),
        glue=cloud.client("glue"),
        workgroup=workgroup,
        database=catalog,
    )
    assert out["error"] is None
    # moto's Athena runs no SQL: no Parquet object appears; the old partition (objects
    # and Glue entry) is gone, so the INSERT writes a new one instead of appending
    assert cloud.keys("curated/parquet/") == []
    assert _partitions(cloud, catalog, "fio_results_parquet") == {}
    athena = cloud.client("athena")
    queries = [
        athena.get_query_execution(QueryExecutionId=q)["QueryExecution"]["Query"]
        for q in athena.list_query_executions(WorkGroup=workgroup)["QueryExecutionIds"]
    ]
    assert sorted(q.split()[2] for q in queries) == [
        "fio_latency_histograms_parquet",
        "fio_results_parquet",
    ]
    # the landing partitions of the compacted tables are deregistered (the view reads Parquet)
    assert _partitions(cloud, catalog, "fio_results_landing") == {}


def test_table_view_lists_the_schema_columns_in_order() -> None:
    sql = compact.table_view_sql(schema.FIO_RESULTS)
    cols = ", ".join(f'"{c}"' for c in schema.FIO_RESULTS.column_names)
    assert sql.startswith(f"SELECT {cols} FROM fio_results_parquet\nUNION ALL\n")
    assert sql.endswith(f"UNION ALL\nSELECT {cols} FROM fio_results_landing")
    insert = compact.insert_sql(schema.FIO_RESULTS)
    assert insert.startswith("INSERT INTO fio_results_parquet (")
    assert insert.endswith("FROM fio_results_landing WHERE run_id = ?")
    assert '"run_id"' in insert.splitlines()[0]


def test_ingest_leaves_a_compacted_runs_landing_partition_deregistered(
    cloud: Cloud, catalog: str, context: FakeLambdaContext
) -> None:
    # given: the run's fio_results are compacted (its Parquet partition exists)
    location = f"s3://{cloud.bucket}/{compact.parquet_prefix('fio_results', RUN)}"
    cloud.client("glue").create_partition(
        DatabaseName=catalog,
        TableName="fio_results_parquet",
        PartitionInput={
            "Values": [RUN],
            "StorageDescriptor": compact.storage_descriptor(
                schema.FIO_RESULTS, location, compact.PARQUET_FORMAT
            ),
        },
    )
    # when: one of its raw objects is delivered again
    assert ingest.handler({"Records": [_record(_fio(cloud), "m1")]}, context) == {
        "batchItemFailures": []
    }
    # then: its landing object is written, but the view keeps reading the run from Parquet
    assert cloud.keys(compact.landing_prefix("fio_results", RUN))
    assert _partitions(cloud, catalog, "fio_results_landing") == {}
    assert RUN in _partitions(cloud, catalog, "fio_latency_histograms_landing")  # not compacted
