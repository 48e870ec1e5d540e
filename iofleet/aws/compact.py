"""Columnar results for Athena: per-run Parquet compaction of the landing JSON lines.

Layout (docs/decisions.md, "Columnar results for Athena"), per table `t` of
`iofleet.results.schema`:

- `t_landing`: the JSON lines the ingest Lambda writes, one small object per raw
  artifact, `curated/t/dt=<date>/<run>/...` (unchanged). Partitioned by `run_id`;
  ingest registers the run's partition in Glue the first time it writes a row of
  that run (no crawler, no MSCK REPAIR), so a run's rows are queryable while it runs.
- `t_parquet`: the same columns as Parquet, one folder per run,
  `curated/parquet/t/run_id=<run>/`, a few objects per run. Written by Athena
  itself (`INSERT INTO t_parquet SELECT ... FROM t_landing`) at Summarize, which
  registers the partition in the same statement.
- `t`: an Athena view, `t_parquet UNION ALL t_landing`. A run is in one of the
  two: its landing partition is deregistered once its Parquet partition is
  written, and ingest does not register it again for a compacted run. Every
  view of iofleet/results/sql reads `t` exactly as DuckDB reads its table.

Kept from before decision 46, read-only: the per-bin pair `fio_latency_bins_landing` and
`fio_latency_bins_parquet` (`schema.LEGACY_TABLES`), where the runs ingested before it
have their json+ bins; the view `fio_latency_histograms` folds them in
(`legacy_bins_sql`). Nothing writes or compacts them any more.

Compaction of one run, per table (each step idempotent, so a retried Summarize
gives the same rows): if the run has no landing objects, leave the table alone;
drop the run's Parquet partition and objects (a retry); make sure the landing
partition is registered; INSERT the run's landing rows (a new partition);
deregister the landing partition (its objects stay: they are the source a later
compaction rebuilds from). Between the INSERT and the deregistration (one Glue
call) the view counts the run twice; during a retry the run is read from landing. A one-run query
(`WHERE run_id = ?`, pushed through the views) then lists one Parquet
partition and no landing partition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from iofleet.aws import keys
from iofleet.aws.athena import run_query
from iofleet.results import schema

log = logging.getLogger(__name__)

DATABASE_ENV = "GLUE_DATABASE"
PARTITION_KEY = "run_id"
LANDING_SUFFIX = "_landing"
PARQUET_SUFFIX = "_parquet"
PARQUET_PREFIX = f"{keys.CURATED_PREFIX}parquet/"

JSON_FORMAT = {
    "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.apache.hive.hcatalog.data.JsonSerDe"},
}
PARQUET_FORMAT = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "SerdeInfo": {
        "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    },
}


def landing_table(table: str) -> str:
    return table + LANDING_SUFFIX


def parquet_table(table: str) -> str:
    return table + PARQUET_SUFFIX


def data_columns(table: schema.Table) -> list[schema.Column]:
    """The table's columns stored in the files: all but the partition key `run_id`."""
    return [c for c in table.columns if c.name != PARTITION_KEY]


def landing_prefix(table: str, run_id: str) -> str:
    """The key prefix of a run's landing objects (what `keys.curated_key` writes)."""
    return f"{keys.CURATED_PREFIX}{table}/dt={keys.run_date(run_id)}/{run_id}/"


def parquet_location(bucket: str, table: str) -> str:
    return f"s3://{bucket}/{PARQUET_PREFIX}{table}/"


def parquet_prefix(table: str, run_id: str) -> str:
    """Where INSERT INTO writes a run's partition (Hive's `key=value` folder)."""
    return f"{PARQUET_PREFIX}{table}/{PARTITION_KEY}={run_id}/"


def storage_descriptor(table: schema.Table, location: str, fmt: dict[str, Any]) -> dict[str, Any]:
    """A Glue StorageDescriptor (boto3 spelling) for `table`'s data columns at `location`."""
    return {
        "Columns": [{"Name": c.name, "Type": c.type} for c in data_columns(table)],
        "Location": location,
        **fmt,
    }


def table_view_sql(table: schema.Table) -> str:
    """The Athena view `t`: compacted runs from Parquet, the others from the landing table
    (a run has a partition in one of them; see the module docstring).

    Columns in schema order, so `SELECT *` on the view matches the DuckDB table.
    """
    cols = ", ".join(f'"{c.name}"' for c in table.columns)
    return (
        f"SELECT {cols} FROM {parquet_table(table.name)}\n"
        f"UNION ALL\n"
        f"SELECT {cols} FROM {landing_table(table.name)}"
    )


def legacy_bins_sql() -> str:
    """The histograms of runs ingested before decision 46, from the per-bin Glue tables of
    that time (`schema.LEGACY_FIO_LATENCY_BINS`: `fio_latency_bins_parquet` UNION ALL
    `_landing`, the view `fio_latency_bins` was then), folded as a local warehouse of that
    time is folded on open (`Warehouse._migrate_bins_table`): one row per key, bins
    ascending, a bin listed twice added up, rows with a NULL bin value or count left out.

    A key (run, cell, slot, workload, job, job index, direction: one fio record) that
    `fio_latency_histograms` holds already is not taken from there: an old run whose raw
    objects are ingested again after the update (or a run that was being ingested while
    the stack was updated) is counted once, from its histograms.
    """
    legacy = schema.LEGACY_FIO_LATENCY_BINS
    hist = schema.FIO_LATENCY_HISTOGRAMS
    key = [c.name for c in hist.columns if c.name not in ("bins_ns", "counts")]
    cols = ", ".join(f'"{c}"' for c in legacy.column_names)
    keys_ = ", ".join(f'"{c}"' for c in key)
    b_keys = ", ".join(f'b."{c}"' for c in key)
    same = "\n    AND ".join(
        f'h."{c}" = b."{c}"' if c == PARTITION_KEY else f'h."{c}" IS NOT DISTINCT FROM b."{c}"'
        for c in key
    )
    return (
        f"SELECT {b_keys}, array_agg(b.bin_ns ORDER BY b.bin_ns) AS bins_ns, "
        f'array_agg(b."count" ORDER BY b.bin_ns) AS counts\n'
        f'FROM (\n  SELECT {keys_}, bin_ns, CAST(sum("count") AS bigint) AS "count"\n'
        f"  FROM (\n    SELECT {cols} FROM {parquet_table(legacy.name)}\n"
        f"    UNION ALL\n    SELECT {cols} FROM {landing_table(legacy.name)}\n  ) AS old\n"
        f'  WHERE bin_ns IS NOT NULL AND "count" IS NOT NULL\n'
        f"  GROUP BY {keys_}, bin_ns\n) AS b\n"
        f"WHERE NOT EXISTS (\n  SELECT 1 FROM (\n"
        f"    SELECT {keys_} FROM {parquet_table(hist.name)}\n"
        f"    UNION ALL\n    SELECT {keys_} FROM {landing_table(hist.name)}\n  ) AS h\n"
        f"  WHERE {same}\n)\n"
        f"GROUP BY {b_keys}"
    )


def table_views() -> dict[str, str]:
    """Every table's view (name -> SELECT), created before the views of iofleet/results/sql.

    `fio_latency_histograms` also gives the runs ingested before decision 46, from the
    per-bin Glue tables kept for them (`legacy_bins_sql`), so the views over it
    (`fio_latency_bins`, `fleet_latency`) give those runs' bins and percentiles as before.
    """
    views = {t.name: table_view_sql(t) for t in schema.TABLES}
    name = schema.FIO_LATENCY_HISTOGRAMS.name
    views[name] += "\nUNION ALL\n" + legacy_bins_sql()
    return views


def insert_sql(table: schema.Table) -> str:
    """One run's landing rows into its Parquet partition (`?` is the run id literal)."""
    cols = ", ".join(f'"{c.name}"' for c in data_columns(table)) + f', "{PARTITION_KEY}"'
    return (
        f"INSERT INTO {parquet_table(table.name)} ({cols})\n"
        f"SELECT {cols} FROM {landing_table(table.name)} WHERE {PARTITION_KEY} = ?"
    )


def is_compacted(glue: Any, database: str, table: str, run_id: str) -> bool:
    """Whether the run has a partition in `table`'s Parquet table."""
    try:
        glue.get_partition(
            DatabaseName=database, TableName=parquet_table(table), PartitionValues=[run_id]
        )
    except glue.exceptions.EntityNotFoundException:
        return False
    return True


def ensure_landing_partition(
    glue: Any, database: str, table: str, run_id: str, *, bucket: str
) -> bool:
    """Register the run's partition of `table`'s landing table; False if it already was."""
    t = schema.BY_NAME.get(table) or schema.LEGACY_BY_NAME[table]
    location = f"s3://{bucket}/{landing_prefix(table, run_id)}"
    try:
        glue.create_partition(
            DatabaseName=database,
            TableName=landing_table(table),
            PartitionInput={
                "Values": [run_id],
                "StorageDescriptor": storage_descriptor(t, location, JSON_FORMAT),
            },
        )
    except glue.exceptions.AlreadyExistsException:
        return False
    return True


def drop_landing_partition(glue: Any, database: str, table: str, run_id: str) -> None:
    try:
        glue.delete_partition(
            DatabaseName=database, TableName=landing_table(table), PartitionValues=[run_id]
        )
    except glue.exceptions.EntityNotFoundException:
        pass


def _drop_parquet_partition(
    glue: Any, s3: Any, database: str, table: str, run_id: str, *, bucket: str
) -> None:
    try:
        glue.delete_partition(
            DatabaseName=database, TableName=parquet_table(table), PartitionValues=[run_id]
        )
    except glue.exceptions.EntityNotFoundException:
        pass
    _delete(s3, bucket, _keys(s3, bucket, parquet_prefix(table, run_id)))


class LandingPartitions:
    """Ingest's side: register each (table, run) landing partition once per process."""

    def __init__(self, glue: Any, database: str, bucket: str) -> None:
        self.glue = glue
        self.database = database
        self.bucket = bucket
        self.known: set[tuple[str, str]] = set()

    def ensure(self, table: str, run_id: str) -> None:
        """Register the landing partition unless the run is compacted already: an object
        delivered again after compaction holds rows its Parquet partition has (the view
        would count them twice); a new one waits for the next compaction."""
        if (table, run_id) in self.known:
            return
        if not is_compacted(self.glue, self.database, table, run_id):
            ensure_landing_partition(self.glue, self.database, table, run_id, bucket=self.bucket)
        self.known.add((table, run_id))


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    out: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return out


def _delete(s3: Any, bucket: str, object_keys: list[str]) -> None:
    for i in range(0, len(object_keys), 1000):
        chunk = object_keys[i : i + 1000]
        s3.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
        )


def compact_table(
    table: schema.Table,
    run_id: str,
    *,
    athena: Any,
    glue: Any,
    s3: Any,
    bucket: str,
    workgroup: str,
    database: str,
) -> int:
    """Rebuild one run's Parquet partition of `table` from its landing rows.

    Returns the number of Parquet objects written (0: the run has no rows there).
    """
    if not _keys(s3, bucket, landing_prefix(table.name, run_id)):
        return 0
    # a retry: the old partition goes first (objects and Glue entry), so the INSERT
    # writes a new one rather than appending to it (appending also merges column
    # statistics, which moto's Glue cannot answer)
    _drop_parquet_partition(glue, s3, database, table.name, run_id, bucket=bucket)
    ensure_landing_partition(glue, database, table.name, run_id, bucket=bucket)
    try:
        run_query(
            athena,
            insert_sql(table),
            workgroup=workgroup,
            database=database,
            params=[_literal(run_id)],
        )
    except Exception:
        # drop a half-written partition: the view serves the run from landing until a retry
        _drop_parquet_partition(glue, s3, database, table.name, run_id, bucket=bucket)
        raise
    drop_landing_partition(glue, database, table.name, run_id)
    return len(_keys(s3, bucket, parquet_prefix(table.name, run_id)))


def compact_run(
    run_id: str,
    *,
    athena: Any,
    glue: Any,
    s3: Any,
    bucket: str,
    workgroup: str,
    database: str,
    tables: Iterable[schema.Table] = schema.TABLES,
) -> dict[str, int]:
    """Compact every table of one run (tables in parallel); Parquet objects per table."""
    from concurrent.futures import ThreadPoolExecutor  # Summarize only: not on ingest's import

    todo = list(tables)

    def one(t: schema.Table) -> int:
        return compact_table(
            t,
            run_id,
            athena=athena,
            glue=glue,
            s3=s3,
            bucket=bucket,
            workgroup=workgroup,
            database=database,
        )

    with ThreadPoolExecutor(max_workers=max(1, min(len(todo), 6))) as pool:
        counts = list(pool.map(one, todo))
    out = {t.name: n for t, n in zip(todo, counts, strict=True)}
    log.info("compacted %s: %s", run_id, out)
    return out


def _stem(relpath: str) -> str:
    """The landing object stem of a raw artifact (`keys.curated_key`; manifest.json and
    slot.json fold into one `slot` object per slot)."""
    folder, _, name = relpath.rpartition("/")
    if folder and name in ("manifest.json", "slot.json"):
        return f"{folder}/slot"
    return relpath[: -len(".json")] if relpath.endswith(".json") else relpath


def ingest_pending(run_id: str, *, s3: Any, bucket: str) -> list[str]:
    """Raw objects of the run whose landing object is missing or older than they are.

    Every raw artifact gives at least one landing object (rows or an ingest_errors
    row), written after the raw object was; a raw object without a newer landing
    object under its stem is still in the ingest queue.
    """
    newest: dict[str, Any] = {}
    for t in schema.TABLES:
        prefix = landing_prefix(t.name, run_id)
        strip = len(prefix) - len(run_id) - 1  # keep `<run>/...` (the raw relpath)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                stem = o["Key"][strip:].removesuffix(".jsonl")
                if stem not in newest or newest[stem] < o["LastModified"]:
                    newest[stem] = o["LastModified"]
    pending = []
    raw_prefix = f"{keys.RAW_PREFIX}{run_id}/"
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=raw_prefix):
        for o in page.get("Contents", []):
            relpath = o["Key"][len(keys.RAW_PREFIX) :]
            name = relpath.rsplit("/", 1)[-1]
            if not name.endswith(".json") or name.startswith("."):
                continue  # what ingest curates (the warehouse loads the same)
            seen = newest.get(_stem(relpath))
            if seen is None or seen < o["LastModified"]:
                pending.append(relpath)
    return sorted(pending)


def wait_for_ingest(
    run_id: str,
    *,
    s3: Any,
    bucket: str,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Poll `ingest_pending` until nothing is pending or `timeout_s` passed; what is left."""
    deadline = clock() + timeout_s
    while True:
        pending = ingest_pending(run_id, s3=s3, bucket=bucket)
        if not pending or clock() >= deadline:
            return pending
        sleep(2.0)  # polling interval of a bounded wait, not synchronisation


def compaction_section(
    run_id: str,
    *,
    s3: Any,
    bucket: str,
    ingest_timeout_s: float = 180.0,
    sleep: Callable[[float], None] = time.sleep,
    **kw: Any,
) -> dict[str, Any]:
    """Summarize's call: wait (bounded) for ingest to have curated every raw object of
    the run, then `compact_run`. A run whose ingest has not caught up is not compacted
    (its landing rows keep serving the views; compacting it then would hide the late
    rows); a failure is recorded, never raised."""
    try:
        pending = wait_for_ingest(
            run_id, s3=s3, bucket=bucket, timeout_s=ingest_timeout_s, sleep=sleep
        )
        if pending:
            reason = (
                f"not compacted: {len(pending)} raw objects not ingested yet, e.g. {pending[0]}"
            )
            log.warning("%s: %s", run_id, reason)
            return {"objects": {}, "error": reason}
        return {"objects": compact_run(run_id, s3=s3, bucket=bucket, **kw), "error": None}
    except Exception as exc:  # noqa: BLE001 - the run's report is written regardless
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        log.warning("compaction of %s failed: %s", run_id, reason)
        return {"objects": {}, "error": reason}


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
