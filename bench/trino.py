"""Figure 4 on Trino: the same views over data in moto S3, Glue catalog in moto.

The local-cloud engines come from `scripts/engines/engines.py` (moto server,
Trino 476 with the hive connector on Glue + S3 in moto). Tables are created
with the results schema's columns as JSON text tables (the format the ingest
Lambda writes: JSON lines), filled with `INSERT ... SELECT` generated inside
Trino (same expressions as the DuckDB data, `bench/queries.py`), and the
views are created from the Trino SQL in `iofleet/results/sql/`, unchanged.

Timed per view: `all` = the whole view materialised into Trino's memory
catalog (CTAS), `one_run` = the view for one run, rows fetched over HTTP.
"""

from __future__ import annotations

import re
import sys
import uuid
from typing import Any

from bench.common import MEASURED, ROOT, Context, Timer
from bench.queries import VIEWS, add_view_times, generation_sql, shape

TABLES_FROM_DATA = ("slots", "fio_results", "fio_latency_bins")
TRINO_TYPES = {
    "string": "varchar",
    "bigint": "bigint",
    "int": "integer",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "timestamp(3)",
}
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


def _glue_table(name: str, location: str) -> dict[str, Any]:
    """The Glue table the stack defines (Hive JsonSerDe text), without its date partitions."""
    from iofleet.results.schema import BY_NAME

    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "json"},
        "StorageDescriptor": {
            "Columns": [
                {"Name": c["name"], "Type": c["type"]} for c in BY_NAME[name].glue_columns()
            ],
            "Location": location,
            "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            "SerdeInfo": {"SerializationLibrary": "org.apache.hive.hcatalog.data.JsonSerDe"},
        },
    }


def upload_tables(
    ctx: Context, sh: dict[str, int], s3: Any, glue: Any, bucket: str, database: str
) -> None:
    """Generate the rows in DuckDB, write JSON lines, put them in moto S3, register in Glue."""
    import duckdb

    from iofleet.results.schema import BY_NAME

    work = ctx.scratch("queries-trino")
    generated = generation_sql(sh, "duckdb")
    con = duckdb.connect()
    try:
        for name in _tables_for_views():
            prefix = f"curated/{name}/"
            if name in generated:
                names, select = generated[name]
                path = work / f"{name}.json"
                con.execute(f"COPY ({select}) TO '{path}' (FORMAT JSON)")
                s3.upload_file(str(path), bucket, prefix + "part-00000.json")
                path.unlink()
            elif name not in BY_NAME:
                raise RuntimeError(f"view reads unknown table {name}")
            glue.create_table(
                DatabaseName=database, TableInput=_glue_table(name, f"s3://{bucket}/{prefix}")
            )
    finally:
        con.close()


def measure(ctx: Context) -> dict[str, Any]:
    import boto3

    from iofleet.results import sql as view_files

    engines = _engines()
    from trino_client import TrinoClient

    scale = ctx.scale
    sh = shape(scale, scale.trino_scale_divisor)
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
        s3 = boto3.client(
            "s3",
            endpoint_url=moto.endpoint,
            region_name=engines.AWS_REGION,
            aws_access_key_id=engines.AWS_ACCESS_KEY,
            aws_secret_access_key=engines.AWS_SECRET_KEY,
        )
        s3.create_bucket(Bucket=bucket)
        client = _client(TrinoClient)(trino_engine.endpoint, catalog="hive", schema=schema_name)
        client.timeout_s = 1800
        glue = boto3.client(
            "glue",
            endpoint_url=moto.endpoint,
            region_name=engines.AWS_REGION,
            aws_access_key_id=engines.AWS_ACCESS_KEY,
            aws_secret_access_key=engines.AWS_SECRET_KEY,
        )
        glue.create_database(DatabaseInput={"Name": schema_name})
        with Timer() as t_gen:
            upload_tables(ctx, sh, s3, glue, bucket, schema_name)
        counts = {
            name: client.execute(f"SELECT count(*) FROM {name}").scalar()
            for name in TABLES_FROM_DATA
        }
        for name, value in counts.items():
            if value != sh[name]:
                raise RuntimeError(f"Trino holds {value} {name} rows, expected {sh[name]}")
        ctx.log(f"queries/trino: {counts} written to moto S3 in {t_gen.seconds:.0f} s")
        for view in VIEWS_NEEDED:
            client.execute(f"CREATE OR REPLACE VIEW {view} AS {view_files.view_sql(view)}")
        one_run = client.execute("SELECT max(run_id) FROM slots").scalar()
        times: dict[str, dict[str, list[float]]] = {v: {"all": [], "one_run": []} for v in VIEWS}
        rows_out: dict[str, dict[str, int]] = {v: {} for v in VIEWS}
        for r in range(scale.trino_repeats):
            for view in VIEWS:
                out = f"memory.default.bench_{view}_{r}"
                with Timer() as t:
                    client.execute(f"CREATE TABLE {out} AS SELECT * FROM {view}")
                times[view]["all"].append(t.seconds)
                rows_out[view]["all"] = client.execute(f"SELECT count(*) FROM {out}").scalar()
                client.execute(f"DROP TABLE {out}")
                with Timer() as t:
                    got = client.execute(f"SELECT * FROM {view} WHERE run_id = '{one_run}'")
                times[view]["one_run"].append(t.seconds)
                rows_out[view]["one_run"] = len(got.rows)
            ctx.log(
                f"queries/trino repeat {r + 1}/{scale.trino_repeats}: "
                + ", ".join(
                    f"{v} {times[v]['all'][-1]:.1f} s (all) "
                    f"{times[v]['one_run'][-1]:.1f} s (one run)"
                    for v in VIEWS
                )
            )
        version = client.execute("SELECT version()").scalar()
    finally:
        trino_engine.stop()
        moto.stop()
    result: dict[str, Any] = {
        "status": MEASURED,
        "engine": f"trino {version} (single node, hive connector: Glue + S3 in moto, JSON tables)",
        "shape": sh,
        "scale_note": (
            "same shape as DuckDB"
            if scale.trino_scale_divisor == 1
            else f"runs divided by {scale.trino_scale_divisor}: "
            f"{sh['fio_results']} results, {sh['fio_latency_bins']} bins"
        ),
        "startup_s": round(t_start.seconds, 1),
        "generate_s": round(t_gen.seconds, 1),
        "rows_out": rows_out,
    }
    return add_view_times(result, times)
