"""Figure 4 on Trino: the same views over data in moto S3, Glue catalog in moto.

The local-cloud engines come from `scripts/engines/engines.py` (moto server,
Trino 476 with the hive connector on Glue + S3 in moto). The tables are the
stack's own Glue tables, synthesized as tests/cloud does (format, SerDe,
partition keys, partition projection and its location template): rows
generated in DuckDB (same expressions as the DuckDB figure, `bench/queries.py`)
are written in that format (JSON lines or Parquet), one object per partition,
at the keys the projection names; the views are created from the Trino SQL
in `iofleet/results/sql/`, unchanged. So the figure follows the curated
layout the stack deploys, whichever it is.

Timed per view: `all` = the whole view materialised into Trino's memory
catalog (CTAS), `one_run` = the view for one run, rows fetched over HTTP.
Bytes: Trino's own query statistics (`physicalInputBytes`, what Athena bills
as data scanned, and `processedBytes`) from the statement protocol. A one-run
query "scans only that run" when it reads at most 1.5x that run's share of
what the all-runs query reads.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import sys
import uuid
from typing import Any

from bench.common import MEASURED, ROOT, Context, Timer, run, stat
from bench.queries import TRINO_TARGET_S, VIEWS, add_view_times, generation_sql, shape

TABLES_FROM_DATA = ("slots", "fio_results", "fio_latency_bins")
VIEWS_NEEDED = ("cells", "slot_metrics", "cell_percentiles", "fleet_latency")


def _engines() -> Any:
    path = str(ROOT / "scripts" / "engines")
    if path not in sys.path:
        sys.path.insert(0, path)
    import engines

    return engines


def _tables_for_views() -> list[str]:
    """Results tables the needed views read (from their SQL text)."""
    from iofleet.results import sql as view_files
    from iofleet.results.schema import TABLES

    texts = " ".join(view_files.view_sql(v) for v in VIEWS_NEEDED)
    named = {m.lower() for m in re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", texts, re.IGNORECASE)}
    return [t.name for t in TABLES if t.name in named]


def _client(base: type) -> type:
    """TrinoClient with session properties: moto's Glue has no column-statistics API."""

    class Client(base):  # type: ignore[misc, valid-type]
        def _headers(self) -> dict[str, str]:
            headers: dict[str, str] = super()._headers()
            headers["X-Trino-Session"] = "hive.collect_column_statistics_on_write=false"
            return headers

    return Client


GLUE_TO_DUCKDB = {
    "string": "VARCHAR",
    "bigint": "BIGINT",
    "int": "INTEGER",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
}


def synth_tables(ctx: Context) -> dict[str, dict[str, Any]]:
    """The Glue TableInputs of the stack, synthesized as the local-cloud tests do.

    The bench reads the same table definitions (format, SerDe, partition keys,
    projection, location template) that tests/cloud deploys into moto's Glue, so
    its Trino figure follows the stack's curated layout whatever it is. The
    projection starts yesterday, as in tests/cloud (a `dt` projection from
    2024-01-01 lists ~1,000 empty S3 prefixes per unfiltered scan against moto).
    """
    yesterday = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).strftime("%Y-%m-%d")
    out = ctx.scratch("cdk.out-trino")
    code = (
        "import json, sys\n"
        "from tests.cloud.localcloud.deploy import synth\n"
        "from pathlib import Path\n"
        "t = synth(Path(sys.argv[1]), {'projection_start': sys.argv[2]})\n"
        "json.dump(t, open(sys.argv[3], 'w'))\n"
    )
    target = out / "template.json"
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    run([sys.executable, "-c", code, str(out), yesterday, str(target)], cwd=ROOT, env=env)
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


def _file_format(table_input: dict[str, Any]) -> str:
    sd = table_input.get("StorageDescriptor", {})
    text = " ".join(
        str(x)
        for x in (
            sd.get("InputFormat"),
            (sd.get("SerdeInfo") or {}).get("SerializationLibrary"),
            (table_input.get("Parameters") or {}).get("classification"),
        )
    ).lower()
    if "parquet" in text:
        return "parquet"
    if "json" in text:
        return "json"
    raise RuntimeError(
        f"table {table_input.get('Name')}: the bench writes JSON or Parquet, not {text}"
    )


def _partition_values(keys: list[str], run_id: str, table: str) -> dict[str, str]:
    from iofleet.aws.keys import run_date

    values = {}
    for key in keys:
        if key == "dt":
            values[key] = run_date(run_id)
        elif key == "run_id":
            values[key] = run_id
        else:
            raise RuntimeError(f"table {table}: partition key {key!r} unknown to the bench")
    return values


def _object_prefix(table_input: dict[str, Any], values: dict[str, str]) -> str:
    """Where one partition's objects go: the projection's location template, else Hive style."""
    params = table_input.get("Parameters") or {}
    location = params.get("storage.location.template")
    if location is None:
        base = table_input["StorageDescriptor"]["Location"].rstrip("/")
        location = base + "".join(f"/{k}=${{{k}}}" for k in values)
    for key, value in values.items():
        location = location.replace("${" + key + "}", value)
    return location.rstrip("/") + "/"


def upload_tables(
    ctx: Context,
    sh: dict[str, int],
    tables: dict[str, dict[str, Any]],
    s3: Any,
    glue: Any,
    bucket: str,
    database: str,
) -> dict[str, Any]:
    """Generated rows written in the stack's curated layout, put in moto S3, tables in Glue.

    Per table of the template: its format (JSON lines or Parquet), one object per
    partition (the run's `dt` and/or `run_id`, at the partition projection's
    location template); Glue partitions are registered only when the table has
    partition keys without projection (as Athena would need). Run ids carry a
    date stamp (`bench-q-<today>t000000z-NNNN`) so their `dt` (iofleet.aws.keys.run_date)
    falls inside the projection's range. Returns per-run and total object bytes.
    """
    import duckdb

    work = ctx.scratch("queries-trino")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dt000000z")
    generated = generation_sql(sh, "duckdb")
    bytes_by_run: dict[str, int] = {}
    formats: dict[str, str] = {}
    objects = 0
    con = duckdb.connect()
    try:
        for name in _tables_for_views():
            if name not in tables:
                raise RuntimeError(f"the stack defines no Glue table {name}")
            table_input = _resolve_bucket(tables[name], bucket)
            fmt = formats[name] = _file_format(table_input)
            part_keys = [k["Name"] for k in table_input.get("PartitionKeys") or []]
            projected = (table_input.get("Parameters") or {}).get("projection.enabled") == "true"
            glue.create_table(DatabaseName=database, TableInput=table_input)
            if name not in generated:
                continue  # a table the views read that the bench leaves empty
            _, select = generated[name]
            columns = table_input["StorageDescriptor"]["Columns"]
            gen_cols = set(generated[name][0])
            exprs = ", ".join(
                (
                    "replace(run_id, 'bench-q-', 'bench-q-" + stamp + "-') AS run_id"
                    if c["Name"] == "run_id"
                    else f'"{c["Name"]}"'
                )
                if c["Name"] in gen_cols
                else f'CAST(NULL AS {GLUE_TO_DUCKDB.get(c["Type"], "VARCHAR")}) AS "{c["Name"]}"'
                for c in columns
                if c["Name"] in gen_cols or fmt == "parquet"
            )
            con.execute(f"CREATE OR REPLACE TABLE gen AS SELECT {exprs} FROM ({select})")
            runs = [
                r[0] for r in con.execute("SELECT DISTINCT run_id FROM gen ORDER BY 1").fetchall()
            ]
            groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
            for run_id in runs:
                key = tuple(_partition_values(part_keys, run_id, name).items())
                groups.setdefault(key, []).append(run_id)
            for n, (key, members) in enumerate(groups.items()):
                values = dict(key)
                prefix = _object_prefix(table_input, values)
                object_key = prefix.split(f"s3://{bucket}/", 1)[1] + f"part-{n:05d}.{fmt}"
                path = work / f"{name}-{n}.{fmt}"
                run_list = ", ".join(f"'{r}'" for r in members)
                copy = "(FORMAT PARQUET)" if fmt == "parquet" else "(FORMAT JSON)"
                con.execute(
                    f"COPY (SELECT * FROM gen WHERE run_id IN ({run_list})) TO '{path}' {copy}"
                )
                size = path.stat().st_size
                s3.upload_file(str(path), bucket, object_key)
                path.unlink()
                objects += 1
                for r in members:  # an object shared by runs counts for each
                    bytes_by_run[r] = bytes_by_run.get(r, 0) + size // len(members)
                if part_keys and not projected:
                    sd = {**table_input["StorageDescriptor"], "Location": prefix}
                    glue.create_partition(
                        DatabaseName=database,
                        TableName=name,
                        PartitionInput={
                            "Values": [values[k] for k in part_keys],
                            "StorageDescriptor": sd,
                        },
                    )
            con.execute("DROP TABLE gen")
    finally:
        con.close()
    return {
        "formats": formats,
        "objects": objects,
        "bytes_total": sum(bytes_by_run.values()),
        "bytes_by_run": bytes_by_run,
    }


def _bytes(result: Any) -> dict[str, int]:
    stats = result.stats or {}
    return {
        "physical_input_bytes": int(stats.get("physicalInputBytes") or 0),
        "processed_bytes": int(stats.get("processedBytes") or 0),
    }


def measure(ctx: Context) -> dict[str, Any]:
    import boto3

    from iofleet.results import sql as view_files

    engines = _engines()
    from trino_client import TrinoClient

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
        moto = engines.start_moto()
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
            stored = upload_tables(ctx, sh, tables, s3, glue, bucket, schema_name)
        counts = {
            name: client.execute(f"SELECT count(*) FROM {name}").scalar()
            for name in TABLES_FROM_DATA
        }
        for name, value in counts.items():
            if value != sh[name]:
                raise RuntimeError(f"Trino holds {value} {name} rows, expected {sh[name]}")
        ctx.log(
            f"queries/trino: {counts} written to moto S3 ({stored['formats']}, "
            f"{stored['objects']} objects, {stored['bytes_total'] / 2**20:.1f} MiB) "
            f"in {t_gen.seconds:.0f} s"
        )
        for view in VIEWS_NEEDED:
            client.execute(f"CREATE OR REPLACE VIEW {view} AS {view_files.view_sql(view)}")
        one_run = client.execute("SELECT max(run_id) FROM slots").scalar()
        times: dict[str, dict[str, list[float]]] = {v: {"all": [], "one_run": []} for v in VIEWS}
        scanned: dict[str, dict[str, list[dict[str, int]]]] = {
            v: {"all": [], "one_run": []} for v in VIEWS
        }
        rows_out: dict[str, dict[str, int]] = {v: {} for v in VIEWS}
        for r in range(scale.trino_repeats):
            for view in VIEWS:
                out = f"memory.default.bench_{view}_{r}"
                with Timer() as t:
                    got = client.execute(f"CREATE TABLE {out} AS SELECT * FROM {view}")
                times[view]["all"].append(t.seconds)
                scanned[view]["all"].append(_bytes(got))
                rows_out[view]["all"] = client.execute(f"SELECT count(*) FROM {out}").scalar()
                client.execute(f"DROP TABLE {out}")
                with Timer() as t:
                    got = client.execute(f"SELECT * FROM {view} WHERE run_id = '{one_run}'")
                times[view]["one_run"].append(t.seconds)
                scanned[view]["one_run"].append(_bytes(got))
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
    finally:
        trino_engine.stop()
        moto.stop()
    run_share = stored["bytes_by_run"].get(one_run, 0)
    result: dict[str, Any] = {
        "status": MEASURED,
        "engine": (
            f"trino {version} (single node, hive connector: Glue + S3 in moto, the stack's "
            f"Glue tables: {', '.join(sorted(set(stored['formats'].values())))})"
        ),
        "shape": sh,
        "scale_note": (
            f"{sh['runs']} runs x {sh['cells_per_run']} cells x {sh['slots_per_cell']} slots: "
            f"{sh['fio_results']} results, {sh['fio_latency_bins']} bins "
            "(DuckDB's shape has 100 runs x 20 cells)"
        ),
        "layout": {
            "formats": stored["formats"],
            "objects": stored["objects"],
            "stored_mib": round(stored["bytes_total"] / 2**20, 2),
            "one_run_stored_mib": round(run_share / 2**20, 2),
        },
        "synth_s": round(t_synth.seconds, 1),
        "startup_s": round(t_start.seconds, 1),
        "generate_s": round(t_gen.seconds, 1),
        "rows_out": rows_out,
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
        # (+50 %: footers, dictionary pages); a layout that makes it read every run fails
        share = max(b["physical_input_bytes"] for b in scanned[view]["one_run"])
        whole = min(b["physical_input_bytes"] for b in scanned[view]["all"])
        only_that_run[view] = whole > 0 and share <= 1.5 * whole / sh["runs"]
    result["met"]["one_run_scans_only_that_run"] = all(only_that_run.values())
    result["one_run_scans_only_that_run"] = only_that_run
    return result
