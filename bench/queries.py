"""Figure 4, queries: `cell_percentiles` and `fleet_latency` at scale.

Data is generated inside the engine (`INSERT ... SELECT ... FROM range(n)`),
with the cardinalities of a busy warehouse: R runs x C cells x S slots,
10 fio result rows per slot (5 workloads x read/write) and a latency histogram
of B bins per result row (one `fio_latency_histograms` row, B bins in the
`fio_latency_bins` view), bin values shared across the slots of a cell so the merge in
`fleet_latency` really merges. The default scale is 100 x 20 x 50 = 100,000
slots, 1,000,000 `fio_results` rows and 10,000,000 `fio_latency_bins` rows.

Timed per view (DuckDB, through the warehouse's own views):
- `all`: the whole view over every run, materialised
  (`CREATE TEMP TABLE ... AS SELECT * FROM view`): every percentile of every
  cell of every run is computed.
- `one_run`: what `iofleet report` asks: the view for one run, rows fetched
  into Python (`Warehouse.cell_percentiles(run_id)` / `fleet_latency`).

Trino (bench/trino.py) runs the same Trino SQL from `iofleet/results/sql/` over the
same shape of data in moto S3 (Glue catalog) where the local-cloud engines
can be started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import MEASURED, Context, Scale, Timer, not_measured, stat

TARGET_S = 1.0  # DuckDB, issue 13
DUCKDB_TARGET_S = TARGET_S
TRINO_TARGET_S = 2.0  # Trino (Athena's engine), issue 13
VIEWS = ("cell_percentiles", "fleet_latency")
WORKLOADS = (
    "randread-16k-psync-16jobs",
    "randwrite-16k-psync-16jobs",
    "randrw-4k-80-20-qd64",
    "latency-4k-qd1-randread",
    "seq-read-1m-qd32",
)


def shape(scale: Scale, divisor: int = 1) -> dict[str, int]:
    runs = max(1, scale.query_runs // divisor)
    slots = runs * scale.query_cells_per_run * scale.query_slots_per_cell
    results = slots * scale.query_results_per_slot
    return {
        "runs": runs,
        "cells_per_run": scale.query_cells_per_run,
        "slots_per_cell": scale.query_slots_per_cell,
        "slots": slots,
        "results_per_slot": scale.query_results_per_slot,
        "fio_results": results,
        "bins_per_result": scale.query_bins_per_result,
        "fio_latency_histograms": results,
        "fio_latency_bins": results * scale.query_bins_per_result,
    }


def _workload_name(index_expr: str) -> str:
    """A portable CASE picking the workload name by index (DuckDB and Trino alike)."""
    whens = " ".join(f"WHEN {n} THEN '{w}'" for n, w in enumerate(WORKLOADS))
    return f"CASE {index_expr} {whens} END"


Select = tuple[list[str], str]  # (column names, SELECT producing them in that order)


def generation_sql(sh: dict[str, int], dialect: str = "duckdb") -> dict[str, Select]:
    """Per table, the columns and a SELECT producing generated rows.

    Written for DuckDB (`range`) or Trino (`UNNEST(sequence(...))`); the
    column expressions are the same. Deterministic: values come from integer
    arithmetic on the row number, not from random().
    """
    c, s, k, b = (
        sh["cells_per_run"],
        sh["slots_per_cell"],
        sh["results_per_slot"],
        sh["bins_per_result"],
    )
    div = "//" if dialect == "duckdb" else "/"  # integer division in each dialect

    def rows(n: int, var: str) -> str:
        if dialect == "duckdb":
            return f"range({n}) AS t({var})"
        # Trino: sequence() is limited to 10,000 elements, so cross two of them.
        hi = (n + 9999) // 10000
        return (
            f"(SELECT CAST(a * 10000 + bb AS BIGINT) AS {var} "
            f"FROM UNNEST(sequence(0, {hi - 1})) AS x(a) CROSS JOIN UNNEST(sequence(0, 9999)) "
            f"AS y(bb) WHERE a * 10000 + bb < {n})"
        )

    def fmt(expr: str, width: int) -> str:
        return f"lpad(CAST({expr} AS VARCHAR), {width}, '0')"

    def mod(a: str, m: int) -> str:
        return f"(({a}) % {m})"

    def run_of(slot: str) -> str:
        return "'bench-q-' || " + fmt(f"{slot} {div} {c * s}", 4)

    def cell_of(slot: str) -> str:
        return "'c' || " + fmt(mod(f"{slot} {div} {s}", c), 3) + f" || '-ebs-x{s}-r1'"

    def select(cols: list[tuple[str, str]], source: str) -> Select:
        names = [name for name, _ in cols]
        exprs = ", ".join(f'{expr} AS "{name}"' for name, expr in cols)
        return names, f"SELECT {exprs} FROM {source}"

    def key(slot: str, wi: str | None, i: str | None) -> list[tuple[str, str]]:
        cols = [
            ("run_id", run_of(slot)),
            ("cell_id", cell_of(slot)),
            ("slot_index", f"CAST({mod(slot, s)} AS INTEGER)"),
        ]
        if wi is not None and i is not None:
            cols += [
                ("workload_index", f"CAST({wi} AS INTEGER)"),
                ("workload", _workload_name(f"({wi}) % {len(WORKLOADS)}")),
                ("job", "'job'"),
                ("job_index", "CAST(0 AS INTEGER)"),
                ("direction", f"CASE WHEN {mod(i, 2)} = 0 THEN 'read' ELSE 'write' END"),
            ]
        return cols

    cell_index = mod(f"g {div} {s}", c)
    slots = select(
        key("g", None, None)
        + [
            ("cell_index", f"CAST({cell_index} AS INTEGER)"),
            ("instance_type", "'m6a.xlarge'"),
            ("storage_label", f"'gp3-' || CAST({mod(cell_index, 4)} AS VARCHAR)"),
            ("storage_type", "'ebs'"),
            ("storage_detail", "'gp3 3000 IOPS 125 MiB/s 100 GiB xfs'"),
            ("fleet_size", f"CAST({s} AS INTEGER)"),
            ("repeat", "CAST(1 AS INTEGER)"),
            ("status", "'SUCCEEDED'"),
            ("exit_code", "CAST(0 AS INTEGER)"),
        ],
        rows(sh["slots"], "g"),
    )
    # Result row i: slot g = i / k, workload w = (i % k) / 2, direction i % 2.
    g = f"(i {div} {k})"
    w = f"({mod('i', k)} {div} 2)"
    jit = mod("i * 7919", 1000)  # 0..999, deterministic
    results = select(
        key(g, w, "i")
        + [
            ("iops", f"CAST(3000 + {jit} AS DOUBLE)"),
            ("bw_bytes", f"CAST((3000 + {jit}) * 16384 AS BIGINT)"),
            ("io_bytes", f"CAST((3000 + {jit}) * 16384 * 60 AS BIGINT)"),
            ("runtime_ms", "CAST(60000 AS BIGINT)"),
            ("error", "CAST(0 AS INTEGER)"),
            ("clat_min_ns", f"CAST(50000 + {jit} AS BIGINT)"),
            ("clat_max_ns", f"CAST(9000000 + {jit} * 1000 AS BIGINT)"),
            ("clat_mean_ns", f"CAST(300000 + {jit} * 10 AS DOUBLE)"),
            ("clat_p50_ns", f"CAST(280000 + {jit} * 10 AS BIGINT)"),
            ("clat_p75_ns", f"CAST(400000 + {jit} * 20 AS BIGINT)"),
            ("clat_p90_ns", f"CAST(600000 + {jit} * 30 AS BIGINT)"),
            ("clat_p98_ns", f"CAST(900000 + {jit} * 40 AS BIGINT)"),
            ("clat_p99_ns", f"CAST(1200000 + {jit} * 50 AS BIGINT)"),
            ("clat_p99_9_ns", f"CAST(3000000 + {jit} * 100 AS BIGINT)"),
            ("clat_p99_99_ns", f"CAST(8000000 + {jit} * 500 AS BIGINT)"),
        ],
        rows(sh["fio_results"], "i"),
    )
    # One histogram per result row i, b bins: bin j = i * b + q at position q (the
    # fio_latency_bins view's row j); bin values overlap across the slots of a cell
    # (offset by i % 7), so merging really merges.
    if dialect == "duckdb":
        bins_ns = f"[CAST((q + {mod('i', 7)} + 8) * 16384 AS BIGINT) FOR q IN range({b})]"
        counts = f"[CAST(1 + {mod(f'(i * {b} + q) * 104729', 5000)} AS BIGINT) FOR q IN range({b})]"
    else:
        bins_ns = (
            f"transform(sequence(0, {b - 1}), q -> CAST((q + {mod('i', 7)} + 8) * 16384 AS BIGINT))"
        )
        counts = (
            f"transform(sequence(0, {b - 1}), "
            f"q -> CAST(1 + {mod(f'(i * {b} + q) * 104729', 5000)} AS BIGINT))"
        )
    histograms = select(
        key(g, w, "i") + [("bins_ns", bins_ns), ("counts", counts)],
        rows(sh["fio_latency_histograms"], "i"),
    )
    return {"slots": slots, "fio_results": results, "fio_latency_histograms": histograms}


def build_duckdb(path: Path, sh: dict[str, int]) -> None:
    from iofleet.results.warehouse import Warehouse

    with Warehouse(path) as wh:
        for table, (names, select) in generation_sql(sh, "duckdb").items():
            cols = ", ".join(f'"{n}"' for n in names)
            wh.con.execute(f"INSERT INTO {table} ({cols}) {select}")
        got = wh.query(
            "SELECT (SELECT count(*) FROM slots) AS slots, "
            "(SELECT count(*) FROM fio_results) AS fio_results, "
            "(SELECT count(*) FROM fio_latency_histograms) AS fio_latency_histograms, "
            "(SELECT count(*) FROM fio_latency_bins) AS fio_latency_bins"
        )[0]
    for key, value in got.items():
        if value != sh[key]:
            raise RuntimeError(f"generated {value} {key} rows, expected {sh[key]}")


def measure_duckdb(ctx: Context) -> dict[str, Any]:
    from iofleet.results.warehouse import Warehouse

    scale = ctx.scale
    sh = shape(scale)
    work = ctx.scratch("queries")
    db = work / "warehouse.duckdb"
    with Timer() as t_gen:
        build_duckdb(db, sh)
    ctx.log(
        f"queries: generated {sh['fio_results']} results, {sh['fio_latency_bins']} bins "
        f"in DuckDB in {t_gen.seconds:.1f} s"
    )
    times: dict[str, dict[str, list[float]]] = {v: {"all": [], "one_run": []} for v in VIEWS}
    out_rows: dict[str, dict[str, int]] = {v: {} for v in VIEWS}
    with Warehouse(db) as wh:
        one_run = wh.latest_run_id()
        assert one_run is not None
        for r in range(scale.query_repeats):
            for view in VIEWS:
                with Timer() as t:
                    wh.con.execute(
                        f"CREATE OR REPLACE TEMP TABLE bench_out AS SELECT * FROM {view}"
                    )
                times[view]["all"].append(t.seconds)
                out_rows[view]["all"] = wh.con.execute("SELECT count(*) FROM bench_out").fetchone()[
                    0
                ]  # type: ignore[index]
                with Timer() as t:
                    got = getattr(wh, view)(one_run)
                times[view]["one_run"].append(t.seconds)
                out_rows[view]["one_run"] = len(got)
            ctx.log(
                f"queries repeat {r + 1}/{scale.query_repeats}: "
                + ", ".join(
                    f"{v} {times[v]['all'][-1]:.2f} s (all) "
                    f"{times[v]['one_run'][-1]:.2f} s (one run)"
                    for v in VIEWS
                )
            )
        threads = wh.con.execute("SELECT current_setting('threads')").fetchone()[0]  # type: ignore[index]
    db.unlink()
    result: dict[str, Any] = {
        "status": MEASURED,
        "engine": "duckdb",
        "threads": threads,
        "generate_s": round(t_gen.seconds, 2),
        "rows_out": out_rows,
    }
    return add_view_times(result, times, DUCKDB_TARGET_S)


def add_view_times(
    result: dict[str, Any], times: dict[str, dict[str, list[float]]], target_s: float = TARGET_S
) -> dict[str, Any]:
    """Per view: all-runs and one-run timings, and whether the target was met."""
    for view in VIEWS:
        result[view] = {
            "all_runs_s": stat(times[view]["all"], "s", 3),
            "one_run_s": stat(times[view]["one_run"], "s", 3),
        }
    result["met"] = {v: result[v]["all_runs_s"]["median"] < target_s for v in VIEWS}
    return result


def measure(ctx: Context) -> dict[str, Any]:
    scale = ctx.scale
    out: dict[str, Any] = {
        "status": MEASURED,
        "method": (
            "data generated in the engine with INSERT ... SELECT FROM range(); each view "
            "timed over all runs (materialised into a temp table) and for one run (rows "
            "fetched, as the report does)"
        ),
        "shape": shape(scale),
        "targets": {
            "duckdb": {"cell_percentiles_s": TARGET_S, "fleet_latency_s": TARGET_S},
            "trino": {"cell_percentiles_s": TRINO_TARGET_S, "fleet_latency_s": TRINO_TARGET_S},
        },
    }
    out["duckdb"] = measure_duckdb(ctx)
    if scale.trino:
        from bench import trino

        try:
            out["trino"] = trino.measure(ctx)
        except Exception as exc:  # noqa: BLE001 - record why, keep the other figures
            out["trino"] = not_measured(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    else:
        out["trino"] = not_measured("Trino disabled at this scale (smoke run)")
    out["met"] = out["duckdb"]["met"]
    return out
