"""Results tables, defined once.

Every consumer derives from these definitions: the DuckDB warehouse DDL,
`iofleet parse` output keys, the Glue table columns (AWS) and the curated
objects written by ingest. Types are given in Athena/Hive terms; helpers map
them to DuckDB and Glue spellings.

Stdlib only: this module is imported by the agent, the Lambdas and the CDK app.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from iofleet.quote import quote

# Athena (Hive DDL) type -> DuckDB type
_DUCKDB_TYPES = {
    "string": "VARCHAR",
    "bigint": "BIGINT",
    "int": "INTEGER",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "array<bigint>": "BIGINT[]",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # one of _DUCKDB_TYPES keys (Glue/Hive spelling; Trino reads array<bigint>
    # as array(bigint))
    doc: str = ""

    @property
    def duckdb_type(self) -> str:
        return _DUCKDB_TYPES[self.type]


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def duckdb_ddl(self) -> str:
        cols = ",\n  ".join(f'"{c.name}" {c.duckdb_type}' for c in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"

    def glue_columns(self) -> list[dict[str, str]]:
        return [{"name": c.name, "type": c.type, "comment": c.doc} for c in self.columns]

    def row(self, **values: object) -> dict[str, object]:
        """A row dict with exactly this table's columns (missing ones None).

        Unknown keys are a programming error and raise, so a typo can't
        silently drop a value.
        """
        unknown = set(values) - set(self.column_names)
        if unknown:
            raise KeyError(f"{self.name}: unknown columns {sorted(unknown)}")
        return {name: values.get(name) for name in self.column_names}

    def row_problem(self, row: dict[str, object]) -> str | None:
        """`column: why` for the first value of `row` its column cannot hold, else None."""
        for col in self.columns:
            problem = value_problem(col.type, row.get(col.name))
            if problem:
                return f"{col.name}: {problem}"
        return None


def _c(name: str, type_: str, doc: str = "") -> Column:
    return Column(name, type_, doc)


# Columns that identify where a row came from; every result table starts with them.
SLOT_KEY = (
    _c("run_id", "string", "run identifier (matrix name + UTC start stamp)"),
    _c("cell_id", "string", "cell identifier, unique within the run"),
    _c("slot_index", "int", "0-based slot number within the cell"),
)
WORKLOAD_KEY = SLOT_KEY + (
    _c("workload_index", "int", "position of the workload in the matrix's workloads[]"),
)

RUNS = Table(
    "runs",
    "one row per run",
    (
        _c("run_id", "string"),
        _c("matrix_name", "string"),
        _c("description", "string"),
        _c("mode", "string", "local | aws"),
        _c("status", "string", "RUNNING | SUCCEEDED | PARTIAL | FAILED | ABORTED"),
        _c("started_at", "timestamp"),
        _c("finished_at", "timestamp"),
        _c("total_instances", "int"),
        _c("matrix_json", "string", "the matrix as submitted"),
    ),
)

SLOTS = Table(
    "slots",
    "one row per slot (an instance or a local agent process), with its cell's fields",
    SLOT_KEY
    + (
        _c("cell_index", "int", "position of the cell in the plan"),
        _c("instance_type", "string", "EC2 type, or 'local'"),
        _c("storage_label", "string"),
        _c(
            "storage_type",
            "string",
            "ebs | efs | fsx-openzfs | fsx-lustre | instance-store | local | s3-mountpoint"
            " | s3express-mountpoint",
        ),
        _c("storage_detail", "string", "e.g. gp3 3000 IOPS 125 MiB/s 100 GiB xfs"),
        _c("fleet_size", "int", "slots in this cell"),
        _c("repeat", "int", "1-based repeat number"),
        _c("status", "string", "SUCCEEDED | FAILED"),
        _c("exit_code", "int"),
        _c("error", "string", "why the slot failed, if it did"),
        _c("started_at", "timestamp"),
        _c("finished_at", "timestamp"),
        _c("hostname", "string"),
        _c("kernel", "string"),
        _c("fio_version", "string"),
        _c("ioping_version", "string"),
        _c("cpus", "int"),
        _c("memory_bytes", "bigint"),
        _c("target_path", "string"),
        _c("target_fstype", "string"),
        _c("target_device", "string"),
        _c("mount_options", "string"),
        _c("instance_id", "string"),
        _c("volume_id", "string", "EBS volume id of a block target (burst_metrics.resource_id)"),
        _c("az_id", "string"),
        _c("barrier_released_at", "timestamp", "the start barrier's agreed release instant (UTC)"),
        _c("barrier_passed_at", "timestamp", "when this slot passed the start barrier (UTC)"),
        _c(
            "barrier_passed_us",
            "bigint",
            "barrier_passed_at in microseconds since the Unix epoch (exact on every engine)",
        ),
        _c(
            "barrier_late_us",
            "bigint",
            "how long after the release instant this slot first saw it (0: in time)",
        ),
        _c("clock_synced", "boolean", "the kernel said the wall clock is synchronised"),
        _c("clock_max_error_us", "bigint", "the kernel's maximum clock error (adjtimex maxerror)"),
        _c("clock_est_error_us", "bigint", "the kernel's estimated clock error (esterror)"),
        _c("iofleet_version", "string", "the iofleet version the slot's agent ran (manifest)"),
        _c("distro", "string", "the host's os-release ID, e.g. ubuntu"),
        _c("distro_release", "string", "the host's os-release VERSION_ID, e.g. 22.04"),
        _c(
            "fio_jobs",
            "string",
            "the text each fio workload ran, as planned: 'w00=<the first 16 hex digits of "
            "the job's sha256>', one per fio workload, joined by ',' (manifest workloads' "
            "job_sha256; null without one)",
        ),
    ),
)

FIO_RESULTS = Table(
    "fio_results",
    "one row per (fio jobs[] entry, direction) with total_ios > 0",
    WORKLOAD_KEY
    + (
        _c("workload", "string", "fio job file name from fio-jobs/"),
        _c("job", "string", "fio job name (jobname)"),
        _c("job_index", "int", "position in fio's jobs array"),
        _c("direction", "string", "read | write | trim | mixed (unified_rw_reporting)"),
        _c("iops", "double"),
        _c("bw_bytes", "bigint", "bytes per second"),
        _c("io_bytes", "bigint"),
        _c("runtime_ms", "bigint"),
        _c("error", "int", "fio's error code for the job (0 = ok)"),
        _c("clat_min_ns", "bigint"),
        _c("clat_max_ns", "bigint"),
        _c("clat_mean_ns", "double"),
        _c("clat_p50_ns", "bigint"),
        _c("clat_p75_ns", "bigint"),
        _c("clat_p90_ns", "bigint"),
        _c("clat_p98_ns", "bigint"),
        _c("clat_p99_ns", "bigint"),
        _c("clat_p99_9_ns", "bigint"),
        _c("clat_p99_99_ns", "bigint"),
        _c("host", "string", "fio --client output: the server (host:port) that ran the job"),
        _c("groupid", "int", "fio's stonewall group of the job (its groupid)"),
        _c(
            "fio_ended_ms",
            "bigint",
            "when fio ended the run (its timestamp_ms): epoch milliseconds on the slot's clock",
        ),
        _c(
            "fio_started_ms",
            "bigint",
            "when the job began its measured I/O (fio's job_start, fio 3.36 and later; after "
            "a ramp_time): epoch milliseconds on the slot's clock",
        ),
    ),
)

FIO_LATENCY_HISTOGRAMS = Table(
    "fio_latency_histograms",
    "fio json+ completion-latency histograms, one row per fio record (job, direction) "
    "with bins: its non-empty bins as two arrays of the same length, ascending by bin "
    "value; the view fio_latency_bins gives one row per bin",
    WORKLOAD_KEY
    + (
        _c("workload", "string"),
        _c("job", "string"),
        _c("job_index", "int"),
        _c("direction", "string"),
        _c("bins_ns", "array<bigint>", "bin values in ns as fio reports them, ascending"),
        _c("counts", "array<bigint>", "the count of each bin of bins_ns (same position)"),
    ),
)

FIO_LATENCY_BINS = Table(
    "fio_latency_bins",
    "a view (iofleet/results/sql/fio_latency_bins.sql), not a table: "
    "fio_latency_histograms unnested, one row per non-empty bin (the table of that name "
    "before decision 46)",
    WORKLOAD_KEY
    + (
        _c("workload", "string"),
        _c("job", "string"),
        _c("job_index", "int"),
        _c("direction", "string"),
        _c("bin_ns", "bigint", "bin value in ns as fio reports it"),
        _c("count", "bigint"),
    ),
)

# On AWS the Glue tables of the per-bin layout stay (fio_latency_bins_landing and
# _parquet, the same names, locations, formats and columns as before decision 46,
# described as then): runs ingested before it keep their bins there, and the Athena view
# fio_latency_histograms folds them in (iofleet/aws/compact.py). Nothing writes them.
LEGACY_FIO_LATENCY_BINS = Table(
    FIO_LATENCY_BINS.name,
    "fio json+ completion-latency histogram bins, one row per non-empty bin",
    FIO_LATENCY_BINS.columns,
)

IOPING_REQUESTS = Table(
    "ioping_requests",
    "one row per timed ioping request (requests ioping leaves out of its own statistics: the warm-up, outside -t/-T, failed or interrupted, are dropped)",
    WORKLOAD_KEY
    + (
        _c("request", "int", "ioping's request number"),
        _c("operation", "string", "read | write"),
        _c("size_bytes", "bigint"),
        _c("time_ns", "bigint"),
        _c("ts", "double", "unix time of the request"),
    ),
)

APP_RUNS = Table(
    "app_runs",
    "timed application phases (populate once per cell, run on every slot)",
    WORKLOAD_KEY
    + (
        _c("app", "string"),
        _c("phase", "string", "populate | run"),
        _c("exit_code", "int"),
        _c("wall_seconds", "double"),
        _c("started_at", "timestamp"),
        _c("finished_at", "timestamp"),
    ),
)

INGEST_ERRORS = Table(
    "ingest_errors",
    "raw objects that could not be parsed, with the reason; raw is kept as is",
    (
        _c("run_id", "string"),
        _c("object_key", "string", "raw artifact path or S3 key"),
        _c("reason", "string"),
        _c("ingested_at", "timestamp"),
    ),
)

EXPECTATIONS = Table(
    "expectations",
    "the plan's expected ceiling per (cell, fio workload, job, direction), from run.json "
    "(docs/expectations.md); fio_results_expected joins it to every fio row",
    (
        _c("run_id", "string"),
        _c("cell_id", "string"),
        _c("workload_index", "int"),
        _c("workload", "string", "fio job file name from fio-jobs/"),
        _c("job", "string", "fio job name (jobname)"),
        _c("direction", "string", "read | write | trim"),
        _c("block_size", "bigint", "bytes per I/O in this direction"),
        _c("expected_iops", "double", "average over the job's run; NULL if unknown"),
        _c("expected_bw_bytes", "bigint", "bytes per second; NULL if unknown"),
        _c("limited_by", "string", "volume | instance | burst-bucket | job-rate | unknown"),
        _c("upper_bound", "boolean", "a figure is missing: the known ones are an upper bound"),
        _c("seconds_to_exhaust", "double", "when the first burst bucket empties; NULL: none"),
        _c("burst_source", "string", "volume | instance: whose bucket empties first"),
        _c("runtime_s", "double", "the job's expected run length"),
        _c("burst_policy", "string", "as-is | refill | drain"),
    ),
)

BURST_METRICS = Table(
    "burst_metrics",
    "CloudWatch burst/credit metrics of a slot's volume, file system or instance for "
    "the run window (AWS only; iofleet/aws/metrics.py)",
    SLOT_KEY
    + (
        _c("namespace", "string", "AWS/EBS | AWS/EFS | AWS/EC2"),
        _c("metric", "string", "BurstBalance | BurstCreditBalance | PercentIOLimit | ..."),
        _c("resource_id", "string", "volume id, file system id or instance id"),
        _c("stat", "string", "CloudWatch statistic (Minimum, Average, ...)"),
        _c("unit", "string", "Percent | Bytes | ..."),
        _c("ts", "timestamp", "start of the CloudWatch period"),
        _c("period_s", "int"),
        _c("value", "double"),
    ),
)

CELL_COSTS = Table(
    "cell_costs",
    "the plan's cost estimate per cell, from run.json (iofleet/plan/cost.py; AWS runs priced, "
    "local runs 0); the decision table reads it",
    (
        _c("run_id", "string"),
        _c("cell_id", "string"),
        _c("estimated_cost_usd", "double", "the whole cell: fleet_size slots, known prices only"),
        _c("slot_seconds", "double", "billable seconds per slot the estimate assumes"),
        _c("instance_hour_usd", "double", "the EC2 price per instance-hour (NULL: unknown)"),
        _c("cost_complete", "boolean", "false: some items have no price (a lower bound)"),
    ),
)

TABLES: tuple[Table, ...] = (
    RUNS,
    SLOTS,
    FIO_RESULTS,
    FIO_LATENCY_HISTOGRAMS,
    IOPING_REQUESTS,
    APP_RUNS,
    INGEST_ERRORS,
    EXPECTATIONS,
    BURST_METRICS,
    CELL_COSTS,
)
BY_NAME = {t.name: t for t in TABLES}
# Glue tables kept on AWS for what was written before a layout change, read-only
LEGACY_TABLES: tuple[Table, ...] = (LEGACY_FIO_LATENCY_BINS,)
LEGACY_BY_NAME = {t.name: t for t in LEGACY_TABLES}


# --- what a column of each type can hold ------------------------------------------
# One check for both stores: the DuckDB warehouse and the curated JSON lines that
# Athena reads (Hive's JSON SerDe: int is 32-bit, bigint 64-bit, strings UTF-8).
INT_RANGES = {"int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}
_TIMESTAMP_TEXT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?")


def value_problem(type_: str, value: object) -> str | None:
    """Why a column of this type cannot hold `value` (one short phrase); None if it can.

    None (SQL NULL) fits every column. Values are as `Table.row` rows carry them:
    int for int/bigint, float or int for double, bool, str (timestamps as
    'YYYY-MM-DD HH:MM:SS[.ffffff]' UTC, or a naive datetime), a list of ints for
    array<bigint>.
    """
    if value is None:
        return None
    if type_ == "array<bigint>":
        if not isinstance(value, list | tuple):
            return f"expected a list of integers, got {type(value).__name__}"
        for i, item in enumerate(value):
            problem = value_problem("bigint", item)
            if problem or item is None:
                return f"[{i}]: {problem or 'null in a list'}"
        return None
    if type_ in INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected an integer, got {type(value).__name__}"
        low, high = INT_RANGES[type_]
        if not low <= value <= high:
            return f"{_short(value)} is outside the {type_} range [{low}, {high}]"
        return None
    if type_ == "double":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected a number, got {type(value).__name__}"
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an int too large for a double
            finite = False
        return None if finite else f"{_short(value)} is not a finite double"
    if type_ == "boolean":
        return (
            None if isinstance(value, bool) else f"expected a boolean, got {type(value).__name__}"
        )
    if type_ == "string":
        if not isinstance(value, str):
            return f"expected a string, got {type(value).__name__}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"not valid UTF-8 (lone surrogate {value[exc.start]!a} at character {exc.start})"
        return None
    if type_ == "timestamp":
        if isinstance(value, datetime):
            return None if value.tzinfo is None else "expected a UTC timestamp without a zone"
        if not isinstance(value, str) or not _TIMESTAMP_TEXT.fullmatch(value):
            return f"not a timestamp 'YYYY-MM-DD HH:MM:SS.ffffff': {_short(value)}"
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return f"not a valid date and time: {_short(value)}"
        return None
    raise KeyError(f"unknown column type {type_!r}")


def _short(value: object) -> str:
    return quote(value, ascii_only=True)
