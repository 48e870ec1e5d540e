"""Figure 4 on Trino: the same views over data in moto S3, Glue catalog in moto.

The local-cloud engines come from `scripts/engines/engines.py` (moto server,
Trino 476 with the hive connector on Glue + S3 in moto). The tables are the
stack's own Glue tables, synthesized as tests/cloud does: per results table
`t`, `t_landing` (JSON lines) and `t_parquet` (Parquet), both partitioned by
`run_id` with registered partitions (iofleet/aws/compact.py). Rows generated in
DuckDB (same expressions as the DuckDB figure, `bench/queries.py`) land where
ingest puts them (one JSON lines object per table and run at the run's landing
prefix, its landing partition registered as ingest does); then every run is
compacted by the stack's own code, `compact.compact_run` (Summarize's call):
Athena `INSERT INTO t_parquet ... FROM t_landing`, run through the local
cloud's Athena stand-in on the same Trino, and the landing partition
deregistered. The views are the stack's: `compact.table_views()` (`t` =
`t_parquet UNION ALL t_landing`), then the Trino SQL in `iofleet/results/sql/`,
unchanged.

Timed per view: `all` = the whole view materialised into Trino's memory
catalog (CTAS), `one_run` = the view for one run, rows fetched over HTTP.
Bytes: Trino's own query statistics (`physicalInputBytes`, what Athena bills
as data scanned, and `processedBytes`) from the statement protocol. A one-run
query "scans only that run" when it reads at most 1.5x that run's share of
what the all-runs query reads (reading a second run would be twice it).
`read_amplification` = bytes the all-runs query reads / Parquet bytes stored
(above 1 when the view reads a table in several branches).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import sys
import uuid
from typing import Any

from bench.common import MEASURED, ROOT, Context, Timer, run, stat
from bench.queries import TRINO_TARGET_S, VIEWS, add_view_times, generation_sql, shape

TABLES_FROM_DATA = ("slots", "fio_results", "fio_latency_histograms")


def _engines() -> Any:
    path = str(ROOT / "scripts" / "engines")
    if path not in sys.path:
        sys.path.insert(0, path)
    import engines

    return engines


def _client(base: type) -> type:
    """TrinoClient with session properties: moto's Glue has no column-statistics API."""

    class Client(base):  # type: ignore[misc, valid-type]
        def _headers(self) -> dict[str, str]:
            headers: dict[str, str] = super()._headers()
            headers["X-Trino-Session"] = "hive.collect_column_statistics_on_write=false"
            return headers

    return Client


def synth_tables(ctx: Context) -> dict[str, dict[str, Any]]:
    """The Glue TableInputs of the stack, synthesized as the local-cloud tests do.

    The bench creates the same table definitions (the `t_landing` JSON and
    `t_parquet` Parquet tables per results table, partitioned by `run_id`) that
    tests/cloud deploys into moto's Glue, so its Trino figure reads the layout
    the stack deploys.
    """
    out = ctx.scratch("cdk.out-trino")
    code = (
        "import json, sys\n"
        "from tests.cloud.localcloud.deploy import synth\n"
        "from pathlib import Path\n"
        "t = synth(Path(sys.argv[1]), {})\n"
        "json.dump(t, open(sys.argv[2], 'w'))\n"
    )
    target = out / "template.json"
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    run([sys.executable, "-c", code, str(out), str(target)], cwd=ROOT, env=env)
    template = json.loads(target.read_text())
    tables = {}
    for res in template["Resources"].values():
        if res.get("Type") == "AWS::Glue::Table":
            table_input = res["Properties"]["TableInput"]
            tables[table_input["Name"]] = table_input
    return tables


def _resolve_bucket(value: Any, bucket: str) -> Any:
    """The template's table input with the results bucket's intrinsic replaced by `bucket`."""
    if isinstance(value, list):
        return [_resolve_bucket(v, bucket) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return bucket
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(str(_resolve_bucket(p, bucket)) for p in parts)
        return {k: _resolve_bucket(v, bucket) for k, v in value.items()}
    return value


def upload_tables(
    ctx: Context,
    sh: dict[str, int],
    tables: dict[str, dict[str, Any]],
    s3: Any,
    glue: Any,
    bucket: str,
    database: str,
) -> dict[str, Any]:
    """Generated rows put where ingest puts them: the landing tables, one run per partition.

    Every Glue table of the template (`t_landing` JSON lines and `t_parquet`
    Parquet per results table) is created in moto's Glue; per generated table
    and run, one JSON lines object at the run's landing prefix
    (`compact.landing_prefix`) and its landing partition registered as ingest
    does (`compact.ensure_landing_partition`). Compaction to Parquet is
    `compact_runs`. Run ids carry a date stamp (`bench-q-<today>t000000z-NNNN`)
    as real run ids do (the landing prefix holds the run's date). Returns the
    run ids and the number of landing objects.
    """
    import duckdb

    from iofleet.aws import compact
    from iofleet.results.schema import BY_NAME

    work = ctx.scratch("queries-trino")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dt000000z")
    generated = generation_sql(sh, "duckdb")
    for table_input in tables.values():
        glue.create_table(DatabaseName=database, TableInput=_resolve_bucket(table_input, bucket))
    runs: set[str] = set()
    objects = 0
    con = duckdb.connect()
    try:
        for name in TABLES_FROM_DATA:
            landing = compact.landing_table(name)
            if landing not in tables:
                raise RuntimeError(f"the stack defines no Glue table {landing}")
            _, select = generated[name]
            gen_cols = set(generated[name][0])
            data_cols = [c.name for c in compact.data_columns(BY_NAME[name])]
            exprs = ", ".join(
                [f'"{c}"' for c in data_cols if c in gen_cols]
                + ["replace(run_id, 'bench-q-', 'bench-q-" + stamp + "-') AS run_id"]
            )
            con.execute(f"CREATE OR REPLACE TABLE gen AS SELECT {exprs} FROM ({select})")
            table_runs = [
                r[0] for r in con.execute("SELECT DISTINCT run_id FROM gen ORDER BY 1").fetchall()
            ]
            for run_id in table_runs:
                path = work / f"{name}.jsonl"
                cols = ", ".join(f'"{c}"' for c in data_cols if c in gen_cols)
                con.execute(
                    f"COPY (SELECT {cols} FROM gen WHERE run_id = '{run_id}') "
                    f"TO '{path}' (FORMAT JSON)"
                )
                key = compact.landing_prefix(name, run_id) + "bench/part-00000.jsonl"
                s3.upload_file(str(path), bucket, key)
                path.unlink()
                objects += 1
                compact.ensure_landing_partition(glue, database, name, run_id, bucket=bucket)
                runs.add(run_id)
            con.execute("DROP TABLE gen")
    finally:
        con.close()
    return {"runs": sorted(runs), "landing_objects": objects}


def compact_runs(
    runs: list[str], *, athena: Any, glue: Any, s3: Any, bucket: str, database: str
) -> dict[str, Any]:
    """Every run compacted by the stack's own code (`compact.compact_run`, what Summarize
    calls): Athena `INSERT INTO t_parquet ... FROM t_landing` per table (through the
    local cloud's Athena stand-in on Trino), the landing partition deregistered.
    Returns the Parquet objects and bytes per run, read back from S3."""
    from iofleet.aws import compact

    objects = 0
    bytes_by_run: dict[str, int] = {}
    for run_id in runs:
        got = compact.compact_run(
            run_id,
            athena=athena,
            glue=glue,
            s3=s3,
            bucket=bucket,
            workgroup="primary",
            database=database,
        )
        for name in TABLES_FROM_DATA:
            if not got.get(name):
                raise RuntimeError(f"compaction of {run_id} wrote no Parquet for {name}: {got}")
        objects += sum(got.values())
        size = 0
        for t in TABLES_FROM_DATA:
            prefix = compact.parquet_prefix(t, run_id)
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                size += sum(o["Size"] for o in page.get("Contents", []))
        bytes_by_run[run_id] = size
    return {
        "parquet_objects": objects,
        "bytes_total": sum(bytes_by_run.values()),
        "bytes_by_run": bytes_by_run,
    }


def _bytes(result: Any) -> dict[str, int]:
    stats = result.stats or {}
    return {
        "physical_input_bytes": int(stats.get("physicalInputBytes") or 0),
        "processed_bytes": int(stats.get("processedBytes") or 0),
    }


# The query's own timing, from Trino: the statement protocol's final stats (elapsed,
# queued, CPU) and `system.runtime.queries` (analysis and planning, which the protocol
# does not return). `execution_ms` = elapsed - queued - analysis - planning: scheduling
# the stages, reading S3, computing, writing the result.
COMPONENTS = ("elapsed_ms", "queued_ms", "analysis_ms", "planning_ms", "execution_ms", "cpu_ms")


def _stages(stage: Any) -> int:
    """Stages in the statement protocol's stage tree (`rootStage` and its `subStages`)."""
    if not isinstance(stage, dict):
        return 0
    return 1 + sum(_stages(s) for s in stage.get("subStages") or [])


def _components(client: Any, result: Any) -> dict[str, int]:
    stats = result.stats or {}
    row = client.execute(
        "SELECT queued_time_ms, analysis_time_ms, planning_time_ms FROM system.runtime.queries "
        f"WHERE query_id = '{result.query_id}'"
    ).rows
    queued, analysis, planning = (int(v or 0) for v in row[0]) if row else (0, 0, 0)
    elapsed = int(stats.get("elapsedTimeMillis") or 0)
    return {
        "elapsed_ms": elapsed,
        "queued_ms": int(stats.get("queuedTimeMillis") or queued),
        "analysis_ms": analysis,
        "planning_ms": planning,
        "execution_ms": max(
            0, elapsed - int(stats.get("queuedTimeMillis") or queued) - analysis - planning
        ),
        "cpu_ms": int(stats.get("cpuTimeMillis") or 0),
        "stages": _stages(stats.get("rootStage")),
    }


# the Glue operations Trino's metastore calls per query, counted apart (the rest: glue_other)
GLUE_OPS = {
    "AWSGlue.GetTable": "glue_get_table",
    "AWSGlue.GetPartitions": "glue_get_partitions",
    "AWSGlue.BatchGetPartition": "glue_batch_get_partition",
}
REQUESTS = ("glue_requests", *GLUE_OPS.values(), "glue_other", "s3_requests")


class GlueCalls:
    """Requests moto served during one query, read from its log as a delta since `mark()`:
    Glue requests by operation from `bench.motolog`'s `TARGET AWSGlue.<op>` lines, S3
    requests from werkzeug's access-log lines for a path under the bucket."""

    def __init__(self, log_path: Any, bucket: str) -> None:
        self.log_path = log_path
        self.bucket = bucket
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.log_path.stat().st_size

    def since_mark(self) -> dict[str, int]:
        with open(self.log_path, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode("utf-8", "replace")
        got = dict.fromkeys(REQUESTS, 0)
        for line in text.splitlines():
            if line.startswith("TARGET AWSGlue."):
                got["glue_requests"] += 1
                got[GLUE_OPS.get(line.split()[1], "glue_other")] += 1
            elif f" /{self.bucket}" in line and "HTTP/" in line:
                got["s3_requests"] += 1
        return got


def glue_call_ms(glue: Any, database: str, table: str, repeats: int = 20) -> dict[str, Any]:
    """moto's Glue alone: how long one request takes (boto3 against the same moto server,
    a table's GetTable and its GetPartitions, the two calls Trino's Glue metastore makes per
    table read), so the queries' Glue request counts can be priced apart from Trino."""
    import time

    per_call: list[float] = []
    for _ in range(repeats):
        for call in (
            lambda: glue.get_table(DatabaseName=database, Name=table),
            lambda: glue.get_partitions(DatabaseName=database, TableName=table),
        ):
            start = time.perf_counter()
            call()
            per_call.append((time.perf_counter() - start) * 1000)
    return stat(per_call, "ms", 1)


def _check_counts(client: Any, sh: dict[str, int], stage: str) -> None:
    """Rows the table views (`t` = `t_parquet UNION ALL t_landing`) give: each run once."""
    for name in TABLES_FROM_DATA:
        value = client.execute(f"SELECT count(*) FROM {name}").scalar()
        if value != sh[name]:
            raise RuntimeError(f"{stage}: Trino's view {name} gives {value} rows, not {sh[name]}")


def measure(ctx: Context) -> dict[str, Any]:
    import boto3

    from iofleet.aws import compact
    from iofleet.results import sql as view_files

    engines = _engines()
    from trino_client import TrinoClient

    from tests.cloud.localcloud.athena import AthenaOnTrino

    scale = ctx.scale
    sh = shape(
        dataclasses.replace(
            scale, query_runs=scale.trino_runs, query_cells_per_run=scale.trino_cells_per_run
        )
    )
    with Timer() as t_synth:
        tables = synth_tables(ctx)
    ctx.log(
        f"queries/trino: stack synthesized ({len(tables)} Glue tables) in {t_synth.seconds:.0f} s"
    )
    with Timer() as t_start:
        moto = engines.start_moto(module="bench.motolog", cwd=ROOT)
        try:
            trino_engine = engines.start_trino(moto.endpoint)
        except BaseException:
            moto.stop()
            raise
    ctx.log(f"queries/trino: moto + Trino up in {t_start.seconds:.0f} s")
    try:
        bucket = f"iofleet-bench-{uuid.uuid4().hex[:8]}"
        schema_name = "bench_" + uuid.uuid4().hex[:8]
        aws = {
            "endpoint_url": moto.endpoint,
            "region_name": engines.AWS_REGION,
            "aws_access_key_id": engines.AWS_ACCESS_KEY,
            "aws_secret_access_key": engines.AWS_SECRET_KEY,
        }
        s3 = boto3.client("s3", **aws)
        s3.create_bucket(Bucket=bucket)
        client = _client(TrinoClient)(trino_engine.endpoint, catalog="hive", schema=schema_name)
        client.timeout_s = 1800
        glue = boto3.client("glue", **aws)
        glue.create_database(DatabaseInput={"Name": schema_name})
        with Timer() as t_gen:
            landed = upload_tables(ctx, sh, tables, s3, glue, bucket, schema_name)
        for name, select in compact.table_views().items():
            client.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
        # the views the timed two are built on (VIEW_NAMES is in the order they are made)
        for view in view_files.VIEW_NAMES[: view_files.VIEW_NAMES.index("fleet_latency") + 1]:
            client.execute(f"CREATE OR REPLACE VIEW {view} AS {view_files.view_sql(view)}")
        _check_counts(client, sh, "landing")
        ctx.log(
            f"queries/trino: {len(landed['runs'])} runs landed as JSON lines "
            f"({landed['landing_objects']} objects) in {t_gen.seconds:.0f} s"
        )
        athena_api = AthenaOnTrino(trino_engine.endpoint).start()
        try:
            athena = boto3.client("athena", **{**aws, "endpoint_url": athena_api.endpoint})
            with Timer() as t_compact:
                stored = compact_runs(
                    landed["runs"],
                    athena=athena,
                    glue=glue,
                    s3=s3,
                    bucket=bucket,
                    database=schema_name,
                )
        finally:
            athena_api.stop()
        _check_counts(client, sh, "compacted")
        for name in TABLES_FROM_DATA:  # every run is served by Parquet, none by landing
            left = client.execute(f"SELECT count(*) FROM {compact.landing_table(name)}").scalar()
            if left:
                raise RuntimeError(f"{left} {name} rows still read from landing after compaction")
        ctx.log(
            f"queries/trino: compacted to Parquet ({stored['parquet_objects']} objects, "
            f"{stored['bytes_total'] / 2**20:.1f} MiB) in {t_compact.seconds:.0f} s"
        )
        one_run = client.execute("SELECT max(run_id) FROM slots").scalar()
        times: dict[str, dict[str, list[float]]] = {v: {"all": [], "one_run": []} for v in VIEWS}
        scanned: dict[str, dict[str, list[dict[str, int]]]] = {
            v: {"all": [], "one_run": []} for v in VIEWS
        }
        rows_out: dict[str, dict[str, int]] = {v: {} for v in VIEWS}
        parts: dict[str, dict[str, list[dict[str, int]]]] = {
            v: {"all": [], "one_run": []} for v in VIEWS
        }
        calls = GlueCalls(moto.log_path, bucket)
        for r in range(scale.trino_repeats):
            for view in VIEWS:
                out = f"memory.default.bench_{view}_{r}"
                calls.mark()
                with Timer() as t:
                    got = client.execute(f"CREATE TABLE {out} AS SELECT * FROM {view}")
                times[view]["all"].append(t.seconds)
                scanned[view]["all"].append(_bytes(got))
                parts[view]["all"].append({**_components(client, got), **calls.since_mark()})
                rows_out[view]["all"] = client.execute(f"SELECT count(*) FROM {out}").scalar()
                client.execute(f"DROP TABLE {out}")
                calls.mark()
                with Timer() as t:
                    got = client.execute(f"SELECT * FROM {view} WHERE run_id = '{one_run}'")
                times[view]["one_run"].append(t.seconds)
                scanned[view]["one_run"].append(_bytes(got))
                parts[view]["one_run"].append({**_components(client, got), **calls.since_mark()})
                rows_out[view]["one_run"] = len(got.rows)
            ctx.log(
                f"queries/trino repeat {r + 1}/{scale.trino_repeats}: "
                + ", ".join(
                    f"{v} {times[v]['all'][-1]:.1f} s (all) "
                    f"{times[v]['one_run'][-1]:.1f} s (one run, "
                    f"{scanned[v]['one_run'][-1]['physical_input_bytes'] / 2**20:.1f} MiB read)"
                    for v in VIEWS
                )
            )
        version = client.execute("SELECT version()").scalar()
        glue_ms = glue_call_ms(glue, schema_name, compact.parquet_table("fio_results"))
    finally:
        trino_engine.stop()
        moto.stop()
    run_share = stored["bytes_by_run"].get(one_run, 0)
    result: dict[str, Any] = {
        "status": MEASURED,
        "engine": (
            f"trino {version} (single node, hive connector: Glue + S3 in moto, the stack's "
            "Glue tables: runs compacted to Parquet by iofleet.aws.compact)"
        ),
        "shape": sh,
        "scale_note": (
            f"{sh['runs']} runs x {sh['cells_per_run']} cells x {sh['slots_per_cell']} slots: "
            f"{sh['fio_results']} results, {sh['fio_latency_bins']} bins "
            "(DuckDB's shape has 100 runs x 20 cells)"
        ),
        "layout": {
            "landing_json_objects": landed["landing_objects"],
            "parquet_objects": stored["parquet_objects"],
            "stored_mib": round(stored["bytes_total"] / 2**20, 2),
            "one_run_stored_mib": round(run_share / 2**20, 3),
        },
        "synth_s": round(t_synth.seconds, 1),
        "startup_s": round(t_start.seconds, 1),
        "generate_s": round(t_gen.seconds, 1),
        "compact_s": round(t_compact.seconds, 1),
        "rows_out": rows_out,
        "glue_call_ms": glue_ms,
    }
    result = add_view_times(result, times, TRINO_TARGET_S)
    only_that_run = {}
    for view in VIEWS:
        for kind, key in (("all", "all_runs_scanned_mib"), ("one_run", "one_run_scanned_mib")):
            got = scanned[view][kind]
            result[view][key] = stat((b["physical_input_bytes"] / 2**20 for b in got), "MiB", 3)
            result[view][key.replace("scanned", "processed")] = stat(
                (b["processed_bytes"] / 2**20 for b in got), "MiB", 3
            )
        # one run's query reads no more than that run's share of what all runs' query reads
        # (+50 %: footers, dictionary pages; reading a second run would be +100 %); a layout
        # that makes it read every run (or a landing table left registered) fails
        share = max(b["physical_input_bytes"] for b in scanned[view]["one_run"])
        whole = min(b["physical_input_bytes"] for b in scanned[view]["all"])
        only_that_run[view] = whole > 0 and 0 < share <= 1.5 * whole / sh["runs"]
        # how many times the view reads its Parquet bytes (a table read in several branches)
        result[view]["read_amplification"] = round(whole / stored["bytes_total"], 2)
        # where the time goes, per query kind: Trino's own components (ms) and the
        # requests moto served during the query (median over the repeats)
        for kind, key in (("all", "all_runs_parts"), ("one_run", "one_run_parts")):
            got_parts = parts[view][kind]
            result[view][key] = {
                c: stat((p[c] for p in got_parts), "ms" if c.endswith("_ms") else "n", 0)
                for c in (*COMPONENTS, "stages", *REQUESTS)
            }
            # moto's share: the query's Glue requests at moto's median request time
            result[view][key]["moto_glue_ms_estimate"] = round(
                result[view][key]["glue_requests"]["median"] * glue_ms["median"]
            )
    result["met"]["one_run_scans_only_that_run"] = all(only_that_run.values())
    result["one_run_scans_only_that_run"] = only_that_run
    return result
