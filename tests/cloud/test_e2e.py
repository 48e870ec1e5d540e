"""End to end on the local cloud: the deployed state machine runs a small matrix for real.

Substitutes (see tests/cloud/localcloud/__init__.py): CloudFormation is played
by the deployer, Lambda invokes run the real handlers from their asset zips in
warm worker processes, RunInstances starts the real agent command from the
user-data as a local process (EFS mounts become bind mounts of temp dirs in a
private mount namespace), Athena is a thin API over Trino, the SQS event
source mapping is a poller thread invoking the ingest function.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from trino_client import TrinoClient

from iofleet.aws import keys
from iofleet.results.warehouse import Warehouse
from tests.cloud.localcloud.fixtures import LocalStack, poll

FIO = {
    "fio": "randread-16k-psync-16jobs",
    "params": {"RUNTIME": 1, "SIZE": "4m", "NUM_JOBS": 2, "DIRECT": 0},
}
IOPING = {"ioping": {"count": 5, "interval_ms": 0}}
APP = {"app": {"name": "small-files", "run": "for i in 1 2 3 4 5; do echo $i > f$i; done; sync"}}


def matrix(stack: LocalStack, name: str, **extra: Any) -> dict[str, Any]:
    fs_a, fs_b = sorted(stack.file_systems)
    doc: dict[str, Any] = {
        "name": name,
        "instance_types": ["m6i.large"],
        "ami_id": stack.ami,
        "storage": [
            {"type": "efs", "label": "efs-a", "file_system_id": fs_a},
            {"type": "efs", "label": "efs-b", "file_system_id": fs_b},
        ],
        "workloads": [FIO, IOPING, APP],
        "parallelism": [1, 3],
        "slot_timeout_s": 600,
    }
    doc.update(extra)
    return doc


@pytest.fixture(scope="module")
def e2e_run(local_stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # given: a matrix of 2 EFS labels x fleets of 1 and 3 with fio, ioping and an app
    arn = local_stack.start(matrix(local_stack, "e2e"))
    # when: the execution runs to its end and ingest has drained the queue
    desc = local_stack.wait(arn)
    run_id = local_stack.run_id_of(arn)
    local_stack.esm.wait_drained()
    raw = local_stack.download(f"raw/{run_id}/", tmp_path_factory.mktemp("e2e-raw"))
    return {"arn": arn, "desc": desc, "run_id": run_id, "raw": raw}


def test_execution_succeeds(e2e_run: dict[str, Any], local_stack: LocalStack) -> None:
    assert e2e_run["desc"]["status"] == "SUCCEEDED", local_stack.history(e2e_run["arn"])[-3:]


def test_run_item_says_succeeded(e2e_run: dict[str, Any], local_stack: LocalStack) -> None:
    item = local_stack.run_item(e2e_run["run_id"])
    assert item["status"] == "SUCCEEDED"
    assert int(item["summary_rows"]) > 0


def test_every_slot_uploaded_its_raw_objects(e2e_run: dict[str, Any]) -> None:
    raw: Path = e2e_run["raw"] / e2e_run["run_id"]
    slots = sorted(p.parent.relative_to(raw).as_posix() for p in raw.glob("*/slot-*/slot.json"))
    cells = sorted(p.name for p in raw.iterdir() if p.is_dir())
    assert len(cells) == 4
    assert len(slots) == 1 + 3 + 1 + 3
    for slot in slots:
        names = sorted(p.name for p in (raw / slot).iterdir())
        assert names == [
            "manifest.json",
            "slot.json",
            "w00-fio-randread-16k-psync-16jobs.json",
            "w01-ioping.json",
            "w02-app-small-files.json",
        ]


def test_every_slot_is_ingested_into_dynamodb(
    e2e_run: dict[str, Any], local_stack: LocalStack
) -> None:
    slots = local_stack.items(e2e_run["run_id"], "slot#")
    assert len(slots) == 8
    assert {(s["status"], s["agent_status"], s.get("ingested")) for s in slots} == {
        ("LAUNCHED", "SUCCEEDED", True)
    }


def test_each_slot_wrote_under_its_own_instance_session_and_read_its_own_payload(
    e2e_run: dict[str, Any], local_stack: LocalStack
) -> None:
    # every instance signs with its role session (hooks.py: named by the instance id, as on
    # EC2); its raw objects are under raw/<role id>:<its instance id>/ (the only prefix its
    # role may write) and its payload was control/.../slot-N/<role id>:<instance id>.json
    run_id = e2e_run["run_id"]
    launched = {tuple(s["sk"].split("#")[1:]): s for s in local_stack.items(run_id, "slot#")}
    objects = local_stack.raw_objects(run_id)
    slot_objects = {r: k for r, k in objects.items() if "/slot-" in r}
    assert len(slot_objects) == 8 * 5
    for relpath, key in slot_objects.items():
        owner, _ = keys.split_raw_key(key)
        _, cell_id, slot_dir, _ = relpath.split("/")
        slot = launched[(cell_id, slot_dir.removeprefix("slot-"))]
        assert owner is not None and keys.owner_instance(owner) == slot["instance_id"], key
        assert slot["payload_key"].endswith(f"/{owner}.json")
    assert objects[f"{run_id}/run.json"] == f"raw/{run_id}/run.json"  # the plan Lambda's


def test_no_instance_left_running(e2e_run: dict[str, Any], local_stack: LocalStack) -> None:
    assert len(local_stack.all_instances(e2e_run["run_id"])) == 8
    assert local_stack.live_instances(e2e_run["run_id"]) == []


def _rounded(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    cols = [
        "cell_id",
        "metric_source",
        "workload_index",
        "workload",
        "job",
        "direction",
        "metric",
        "slots",
        "p0",
        "p50",
        "p75",
        "p90",
        "p98",
        "p100",
    ]
    out = []
    for r in rows:
        out.append(
            tuple(
                round(float(r[c]), 6) if c.startswith("p") and r[c] is not None else r[c]
                for c in cols
            )
        )
    return sorted(out, key=repr)


def test_trino_views_equal_the_local_duckdb_warehouse(
    e2e_run: dict[str, Any], trino_server: Any
) -> None:
    # when: the views are queried through Trino (Athena's engine) over the curated objects
    trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
    cloud = trino.execute(
        f"SELECT * FROM cell_percentiles WHERE run_id = '{e2e_run['run_id']}'"
    ).dicts()
    # and: `iofleet local`'s warehouse ingests the same raw files
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(e2e_run["raw"])
        local = wh.cell_percentiles(e2e_run["run_id"])
    # then: the same P0..P100 table
    assert {r["metric_source"] for r in cloud} == {"fio", "ioping", "app"}
    assert len(cloud) == len(local)
    assert _rounded(cloud) == _rounded(local)


def test_trino_fleet_latency_and_bins_equal_the_local_duckdb_warehouse(
    e2e_run: dict[str, Any], trino_server: Any
) -> None:
    """The json+ histograms as Athena stores them (arrays in the landing JSON and in the
    compacted Parquet), unnested by the fio_latency_bins view: the same bins and the same
    merged percentiles as the local warehouse."""
    run_id = e2e_run["run_id"]
    trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(e2e_run["raw"])
        for view in ("fleet_latency", "fio_latency_bins"):
            cloud = trino.execute(f"SELECT * FROM {view} WHERE run_id = '{run_id}'").dicts()
            local = wh.query(f"SELECT * FROM {view} WHERE run_id = ?", [run_id])
            assert cloud, view
            assert sorted(map(repr, _plain(cloud))) == sorted(map(repr, _plain(local))), view


def test_summarize_report_holds_the_percentiles(
    e2e_run: dict[str, Any], local_stack: LocalStack
) -> None:
    import json

    body = local_stack.client("s3").get_object(
        Bucket=local_stack.d.bucket, Key=f"reports/{e2e_run['run_id']}/report.json"
    )["Body"]
    report = json.loads(body.read())
    assert report["status"] == "SUCCEEDED"
    assert {r["metric_source"] for r in report["cell_percentiles"]} >= {"fio", "app"}


__all__ = ["matrix", "poll"]


# --- columnar results for Athena (iofleet/aws/compact.py) ---------------------------------


def _athena(stack: LocalStack) -> Any:
    import boto3

    return boto3.client("athena", endpoint_url=stack.athena.endpoint, region_name="us-east-1")


def _compact(stack: LocalStack, run_id: str) -> dict[str, int]:
    from iofleet.aws.compact import compact_run

    return compact_run(
        run_id,
        athena=_athena(stack),
        glue=stack.client("glue"),
        s3=stack.client("s3"),
        bucket=stack.d.bucket,
        workgroup=stack.d.workgroup,
        database=stack.d.database,
    )


def _partitions(stack: LocalStack, glue_table: str) -> set[str]:
    pages = stack.client("glue").get_paginator("get_partitions")
    return {
        p["Values"][0]
        for page in pages.paginate(DatabaseName=stack.d.database, TableName=glue_table)
        for p in page["Partitions"]
    }


def _finished(execution: dict[str, Any]) -> dict[str, Any] | None:
    return None if execution["Status"]["State"] in ("QUEUED", "RUNNING") else execution


def _table_rows(trino: TrinoClient, table: str, run_id: str) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(r) for r in trino.execute(f"SELECT * FROM {table} WHERE run_id = '{run_id}'").rows),
        key=repr,
    )


def test_summarize_compacted_the_run_into_a_few_parquet_objects_per_table(
    e2e_run: dict[str, Any], local_stack: LocalStack
) -> None:
    from iofleet.aws.compact import landing_prefix, parquet_prefix
    from iofleet.results.schema import TABLES

    run_id = e2e_run["run_id"]
    report = json.loads(
        local_stack.client("s3")
        .get_object(Bucket=local_stack.d.bucket, Key=f"reports/{run_id}/report.json")["Body"]
        .read()
    )
    assert report["compaction"]["error"] is None
    landing = {t.name: local_stack.keys(landing_prefix(t.name, run_id)) for t in TABLES}
    parquet = {t.name: local_stack.keys(parquet_prefix(t.name, run_id)) for t in TABLES}
    # then: every table with landing rows has its run in one or a few Parquet objects
    # (8 slots: 8 fio_results objects land, one or two Parquet objects hold them)
    assert len(landing["fio_results"]) == 8 and len(landing["app_runs"]) == 8
    for name, objects in landing.items():
        assert (len(parquet[name]) >= 1) == bool(objects), name
        assert len(parquet[name]) <= 2, (name, parquet[name])
    assert report["compaction"]["objects"] == {n: len(k) for n, k in parquet.items()}
    body = local_stack.client("s3").get_object(
        Bucket=local_stack.d.bucket, Key=parquet["fio_results"][0]
    )["Body"]
    assert body.read(4) == b"PAR1"  # Parquet's magic number
    # and: the run's landing partitions are deregistered, its Parquet partitions registered
    for t in TABLES:
        assert run_id not in _partitions(local_stack, f"{t.name}_landing")
        assert (run_id in _partitions(local_stack, f"{t.name}_parquet")) == bool(landing[t.name])


def test_every_table_view_equals_the_local_duckdb_table(
    e2e_run: dict[str, Any], trino_server: Any
) -> None:
    from iofleet.results.schema import TABLES

    run_id = e2e_run["run_id"]
    trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(e2e_run["raw"])
        for t in TABLES:
            if t.name == "burst_metrics":
                continue  # CloudWatch rows, written by Summarize only in the cloud
            got = trino.execute(f"SELECT * FROM {t.name} WHERE run_id = '{run_id}'")
            want = wh.query(f"SELECT * FROM {t.name} WHERE run_id = ?", [run_id])
            # same columns in the same order, same number of rows
            assert got.columns == list(t.column_names), t.name
            assert len(got.rows) == len(want), t.name
            if t.name in ("fio_results", "app_runs", "ioping_requests", "fio_latency_histograms"):
                assert sorted(map(repr, _plain(got.dicts()))) == sorted(map(repr, _plain(want))), (
                    t.name
                )


def _plain(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as comparable tuples: floats rounded, timestamps as Trino prints them, and
    empty strings as NULL (the DuckDB warehouse loads them so; Athena keeps them)."""
    import datetime as dt

    out = []
    for r in rows:
        values = []
        for v in r.values():
            if isinstance(v, float):
                v = round(v, 6)
            elif isinstance(v, dt.datetime):
                v = v.isoformat(sep=" ", timespec="milliseconds")
            elif v == "":
                v = None
            values.append(v)
        out.append(tuple(values))
    return out


def test_retried_compaction_and_redelivered_ingest_add_no_rows(
    e2e_run: dict[str, Any], local_stack: LocalStack, trino_server: Any
) -> None:
    from iofleet.aws.compact import parquet_prefix

    run_id = e2e_run["run_id"]
    trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
    before = {t: _table_rows(trino, t, run_id) for t in ("fio_results", "slots", "app_runs")}
    objects = local_stack.keys(parquet_prefix("fio_results", run_id))
    # when: Summarize's compaction runs again
    again = _compact(local_stack, run_id)
    # then: the same rows, in as many objects as before (replaced, not added)
    assert again["fio_results"] == len(objects)
    for table, rows in before.items():
        assert _table_rows(trino, table, run_id) == rows, table
    # when: a raw object of the run is delivered again after compaction (ingest writes
    # its landing object again)
    from iofleet.aws.compact import LandingPartitions
    from iofleet.aws.curate import ingest_object

    raw = next(key for rel, key in local_stack.raw_objects(run_id).items() if "-fio-" in rel)
    ingest_object(
        raw,
        s3=local_stack.client("s3"),
        ddb=local_stack.client("dynamodb"),
        bucket=local_stack.d.bucket,
        table=local_stack.d.table,
        partitions=LandingPartitions(
            local_stack.client("glue"), local_stack.d.database, local_stack.d.bucket
        ),
    )
    # then: the compacted run's landing partition stays deregistered: each row counts once
    assert run_id not in _partitions(local_stack, "fio_results_landing")
    assert _table_rows(trino, "fio_results", run_id) == before["fio_results"]
    # and: compacting again gives the same rows
    _compact(local_stack, run_id)
    assert run_id not in _partitions(local_stack, "fio_results_landing")
    assert _table_rows(trino, "fio_results", run_id) == before["fio_results"]


def test_a_running_run_is_queryable_at_once_and_a_one_run_query_reads_only_that_run(
    e2e_run: dict[str, Any], local_stack: LocalStack, trino_server: Any
) -> None:
    import uuid as _uuid

    from iofleet.aws.compact import landing_prefix, parquet_prefix
    from iofleet.results.schema import TABLES

    run_id = e2e_run["run_id"]
    other = run_id[: run_id.rfind("-") + 1] + _uuid.uuid4().hex[:8]  # same day, another run
    s3 = local_stack.client("s3")
    bucket = local_stack.d.bucket
    trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
    want = trino.execute(
        f"SELECT count(*), sum(iops) FROM fio_results WHERE run_id = '{run_id}'"
    ).rows[0]
    # given: another run's raw objects arrive (the e2e run's fio results, copied)
    fio = {rel: key for rel, key in local_stack.raw_objects(run_id).items() if "-fio-" in rel}
    try:
        # copied under keys with no writer segment (as iofleet's own Lambdas write): no
        # instance was launched for `other`, so ingest's ownership check would refuse an
        # instance-written copy; the queue delivers them to ingest as it does any upload
        for rel, key in fio.items():
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            s3.put_object(Bucket=bucket, Key=keys.raw_key(rel.replace(run_id, other, 1)), Body=body)
        local_stack.esm.wait_drained()
        # then: its rows are queryable at once, from landing (no crawler, no MSCK REPAIR)
        got = trino.execute(
            f"SELECT count(*), sum(iops) FROM fio_results WHERE run_id = '{other}'"
        ).rows[0]
        assert got[0] == want[0] and got[1] == pytest.approx(want[1])
        assert other in _partitions(local_stack, "fio_results_landing")
        # when: it is compacted too
        _compact(local_stack, other)
        assert local_stack.keys(parquet_prefix("fio_results", other))
        # and: the other run's Parquet objects are made unreadable
        for key in local_stack.keys(parquet_prefix("fio_results", other)):
            s3.put_object(Bucket=bucket, Key=key, Body=b"not parquet")
        # then: a one-run query through the views still answers: it opened no file of the
        # other run (an unfiltered one fails on them)
        athena = _athena(local_stack)
        sql = f"SELECT * FROM cell_percentiles WHERE run_id = '{run_id}' AND metric_source = 'fio'"
        qid = athena.start_query_execution(
            QueryString=sql,
            QueryExecutionContext={"Database": local_stack.d.database},
            WorkGroup=local_stack.d.workgroup,
        )["QueryExecutionId"]
        run = poll(
            lambda: _finished(athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]),
            timeout_s=600,
            what=f"Athena query {qid}",
        )
        assert run["Status"]["State"] == "SUCCEEDED", run["Status"]
        # and: it scanned at most the run's own Parquet objects of the tables it reads
        own = sum(
            o["Size"]
            for t in TABLES
            for o in s3.list_objects_v2(Bucket=bucket, Prefix=parquet_prefix(t.name, run_id)).get(
                "Contents", []
            )
        )
        scanned = run["Statistics"]["DataScannedInBytes"]
        # Trino reads a small Parquet file's tail for its footer, then its column chunks:
        # at most twice the run's own objects, never a landing object or another run's
        assert 0 < scanned <= 2 * own
        with pytest.raises(Exception, match="HIVE_|not a Parquet|Parquet"):
            trino.execute("SELECT sum(iops) FROM fio_results")
    finally:  # the session's other tests query unfiltered: leave no broken run behind
        from iofleet.aws.compact import _drop_parquet_partition

        for t in ("fio_results", "fio_latency_histograms"):
            _drop_parquet_partition(
                local_stack.client("glue"),
                s3,
                local_stack.d.database,
                t,
                other,
                bucket=bucket,
            )
        for prefix in [f"raw/{other}/"] + [
            landing_prefix(t, other)
            for t in ("fio_results", "fio_latency_histograms", "ingest_errors")
        ]:
            for key in local_stack.keys(prefix):
                s3.delete_object(Bucket=bucket, Key=key)


def test_duckdb_reads_the_compacted_parquet_as_its_warehouse_tables(
    e2e_run: dict[str, Any], local_stack: LocalStack, tmp_path: Path
) -> None:
    import duckdb

    from iofleet.aws.compact import parquet_prefix
    from iofleet.results.schema import BY_NAME

    run_id = e2e_run["run_id"]
    s3 = local_stack.client("s3")
    with Warehouse(":memory:") as wh:
        wh.ingest_dir(e2e_run["raw"])
        for name in (
            "runs",
            "slots",
            "fio_results",
            "fio_latency_histograms",
            "app_runs",
            "ioping_requests",
        ):
            table = BY_NAME[name]
            keys = local_stack.keys(parquet_prefix(name, run_id))
            assert keys, name
            for key in keys:  # Hive's layout: <table>/run_id=<run>/<object>
                path = tmp_path / name / f"run_id={run_id}" / key.rsplit("/", 1)[1]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(s3.get_object(Bucket=local_stack.d.bucket, Key=key)["Body"].read())
            cols = ", ".join(f'"{c}"' for c in table.column_names)
            source = f"read_parquet('{tmp_path / name}/*/*', hive_partitioning = true)"
            con = duckdb.connect()
            described = con.execute(f"DESCRIBE SELECT {cols} FROM {source}").fetchall()
            # then: the warehouse's columns, in its order, with its types (Parquet
            # timestamps may come back at another precision)
            got_types = [(r[0], r[1]) for r in described]
            want_types = [(c.name, c.duckdb_type) for c in table.columns]
            for (got_name, got_type), (want_name, want_type) in zip(
                got_types, want_types, strict=True
            ):
                assert got_name == want_name, name
                if want_type == "TIMESTAMP":
                    assert got_type.startswith("TIMESTAMP"), (name, got_name, got_type)
                else:
                    assert got_type == want_type, (name, got_name, got_type)
            # and: the rows the warehouse holds for the run
            cur = con.execute(f"SELECT {cols} FROM {source}")
            names = [d[0] for d in cur.description or []]
            parquet = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            want = wh.query(f"SELECT {cols} FROM {name} WHERE run_id = ?", [run_id])
            assert sorted(map(repr, _plain(parquet))) == sorted(map(repr, _plain(want))), name
            con.close()


def test_runs_ingested_before_decision_46_keep_their_bins_beside_the_new_layout(
    e2e_run: dict[str, Any], local_stack: LocalStack, trino_server: Any, tmp_path: Path
) -> None:
    """Runs ingested before decision 46 keep their json+ bins in the per-bin Glue tables
    of that time (`fio_latency_bins_landing`, and `_parquet` once compacted), which the
    stack keeps; the Athena view `fio_latency_histograms` folds them in beside the arrays
    of runs ingested since, counting a record ingested both ways once."""
    import uuid as _uuid

    from iofleet.aws.compact import (
        _drop_parquet_partition,
        compact_table,
        drop_landing_partition,
        ensure_landing_partition,
        landing_prefix,
    )
    from iofleet.aws.curate import jsonl
    from iofleet.results.ingest import expand_bin_blocks, rows_and_bin_blocks
    from iofleet.results.schema import LEGACY_FIO_LATENCY_BINS, TABLES

    run_id = e2e_run["run_id"]
    stem = run_id[: run_id.rfind("-") + 1]  # same day, other runs
    landed, compacted, both = (stem + _uuid.uuid4().hex[:8] for _ in range(3))
    old_runs = (landed, compacted, both)
    s3, glue = local_stack.client("s3"), local_stack.client("glue")
    bucket, database = local_stack.d.bucket, local_stack.d.database
    legacy = LEGACY_FIO_LATENCY_BINS.name
    fio = {rel: key for rel, key in local_stack.raw_objects(run_id).items() if "-fio-" in rel}
    assert fio
    raw = tmp_path / "raw"  # the DuckDB side: the same fio artifacts under each run id
    try:
        for old in old_runs:
            for rel, key in fio.items():
                body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
                relpath = rel.replace(run_id, old, 1)
                (raw / relpath).parent.mkdir(parents=True, exist_ok=True)
                (raw / relpath).write_bytes(body)
                # given: the bins as the ingest Lambda wrote them before decision 46, one
                # JSON line per bin in the per-bin landing table, its partition registered
                _, blocks = rows_and_bin_blocks(relpath, body.decode())
                bins = expand_bin_blocks(blocks or [])
                assert bins
                s3.put_object(
                    Bucket=bucket,
                    Key=keys.curated_key(legacy, old, relpath),
                    Body=jsonl(legacy, bins),
                )
                ensure_landing_partition(glue, database, legacy, old, bucket=bucket)
                if old == both:  # and ingested again since: histogram rows too
                    s3.put_object(Bucket=bucket, Key=keys.raw_key(relpath), Body=body)
        local_stack.esm.wait_drained()
        # and: one old run compacted as Summarize compacted it then (INSERT INTO the
        # per-bin Parquet table, the landing partition deregistered)
        objects = compact_table(
            LEGACY_FIO_LATENCY_BINS,
            compacted,
            athena=_athena(local_stack),
            glue=glue,
            s3=s3,
            bucket=bucket,
            workgroup=local_stack.d.workgroup,
            database=database,
        )
        assert objects >= 1
        assert compacted in _partitions(local_stack, f"{legacy}_parquet")
        assert compacted not in _partitions(local_stack, f"{legacy}_landing")
        assert {landed, both} <= _partitions(local_stack, f"{legacy}_landing")
        assert both in _partitions(local_stack, "fio_latency_histograms_landing")
        # when: the views are queried over the new run and the old ones together
        trino = TrinoClient(trino_server.endpoint, catalog="awsdatacatalog", schema="iofleet")
        runs = (run_id, *old_runs)
        listed = ", ".join(f"'{r}'" for r in runs)
        with Warehouse(":memory:") as wh:
            wh.ingest_dir(e2e_run["raw"])
            wh.ingest_dir(raw)
            for view in ("fleet_latency", "fio_latency_bins", "fio_latency_histograms"):
                cloud = trino.execute(f"SELECT * FROM {view} WHERE run_id IN ({listed})").dicts()
                local = wh.query(
                    f"SELECT * FROM {view} WHERE run_id IN ({', '.join('?' * len(runs))})",
                    list(runs),
                )
                # then: every run's rows, exactly as DuckDB gives them from the raw
                # artifacts: the new run's, the old runs' from the per-bin tables, and
                # the run held both ways counted once
                assert {r["run_id"] for r in cloud} == set(runs), view
                assert sorted(map(repr, _plain(cloud))) == sorted(map(repr, _plain(local))), view
            # and: the old runs' merged percentiles are the new run's (the same artifacts)
            same = trino.execute(
                "SELECT run_id, cell_id, job, direction, slots, total_count, p50_ns, p99_ns, "
                f"p99_9_ns, p100_ns FROM fleet_latency WHERE run_id IN ({listed})"
            ).rows
            by_run: dict[str, list[tuple[Any, ...]]] = {}
            for row in same:
                by_run.setdefault(row[0], []).append(tuple(row[1:]))
            assert by_run[run_id]
            for old in old_runs:
                assert sorted(by_run[old]) == sorted(by_run[run_id]), old
    finally:  # the session's other tests query unfiltered: leave none of these runs
        for old in old_runs:
            _drop_parquet_partition(glue, s3, database, legacy, old, bucket=bucket)
            drop_landing_partition(glue, database, legacy, old)
            prefixes = [f"raw/{old}/", landing_prefix(legacy, old)]
            for t in TABLES:
                _drop_parquet_partition(glue, s3, database, t.name, old, bucket=bucket)
                drop_landing_partition(glue, database, t.name, old)
                prefixes.append(landing_prefix(t.name, old))
            for prefix in prefixes:
                for key in local_stack.keys(prefix):
                    s3.delete_object(Bucket=bucket, Key=key)
