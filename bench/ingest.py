"""Figure 3, ingest: 1,000 fio JSON+ results parsed and loaded into the warehouse.

Sources are real: every job of the fio job library is run once with fio
(1 s, small files) against a scratch directory. Their stdout is replicated
into a raw tree with distinct run / cell / slot paths (10 runs x 10 cells x
10 slots for 1,000), the layout ingest reads (docs/internals.md). Both sides
read warm files (just written; in the page cache).

- ingest: `Warehouse.ingest_dir(raw)` into a fresh DuckDB file whose tables
  and views were created beforehand (parse with iofleet's parsers, rows,
  bulk load, one transaction).
- floor: `json.loads` of the same texts, already in memory (the least work
  any loader must do); `read_and_loads` also reads the files.

Repeats alternate ingest and floor. ratio = ingest seconds / floor seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bench.common import MEASURED, MIB, Context, Timer, run, stat

TARGET_RATIO = 2.0


def make_sources(ctx: Context, runtime_s: int) -> list[tuple[str, str]]:
    """(job name, fio json+ stdout) for every job of the library, from real fio runs."""
    from iofleet.plan.fiojobs import list_jobs, render_command

    work = ctx.scratch("ingest-sources")
    sources: list[tuple[str, str]] = []
    for job in list_jobs()[: ctx.scale.ingest_source_jobs]:
        wanted = {
            "RUNTIME": str(runtime_s),
            "SIZE": "16m",
            "NUM_JOBS": "4",
            "BURST_START": "0",
            "BURST_RUNTIME": str(runtime_s),
        }
        params = {k: v for k, v in wanted.items() if k in job.params}
        workdir = work / job.name
        workdir.mkdir()
        argv, text = render_command(job.name, params, str(workdir))
        done = run(argv, cwd=workdir, input=text)
        sources.append((job.name, done.stdout))
        shutil.rmtree(workdir, ignore_errors=True)
    return sources


def replicate(sources: list[tuple[str, str]], count: int, raw: Path) -> list[Path]:
    """`count` fio artifacts under raw/, 10 slots per cell and 10 cells per run."""
    paths = []
    for i in range(count):
        name, text = sources[i % len(sources)]
        run_id = f"bench-ingest-{i // 100:03d}"
        cell = f"c{(i // 10) % 10:03d}-local-x10-r1"
        path = raw / run_id / cell / f"slot-{i % 10:04d}" / f"w{i % 10 // 5:02d}-fio-{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def measure(ctx: Context) -> dict[str, Any]:
    from iofleet.results.warehouse import Warehouse

    scale = ctx.scale
    sources = make_sources(ctx, scale.ingest_source_runtime_s)
    work = ctx.scratch("ingest")
    raw = work / "raw"
    paths = replicate(sources, scale.ingest_results, raw)
    total_bytes = sum(p.stat().st_size for p in paths)
    texts = [p.read_text(encoding="utf-8") for p in paths]
    rows: list[dict[str, Any]] = []
    for i in range(scale.ingest_repeats):
        db = work / f"warehouse-{i}.duckdb"
        with Timer() as t_open:
            wh = Warehouse(db)
        try:
            with Timer() as t_ingest:
                stats = wh.ingest_dir(raw)
        finally:
            wh.close()
        if stats.errors:
            raise RuntimeError(f"ingest reported {stats.errors} errors on real fio output")
        with Timer() as t_floor:
            for text in texts:
                json.loads(text)
        with Timer() as t_read_floor:
            for p in paths:
                json.loads(p.read_text(encoding="utf-8"))
        db.unlink()
        table_rows = sum(stats.rows.values())
        row = {
            "ingest_s": round(t_ingest.seconds, 4),
            "warehouse_open_s": round(t_open.seconds, 4),
            "json_loads_s": round(t_floor.seconds, 4),
            "read_and_json_loads_s": round(t_read_floor.seconds, 4),
            "objects": stats.objects,
            "rows": stats.rows,
            "results_per_s": round(stats.objects / t_ingest.seconds, 1),
            "rows_per_s": round(table_rows / t_ingest.seconds, 1),
            "mb_per_s": round(total_bytes / MIB / t_ingest.seconds, 2),
            "ratio_to_json_loads": round(t_ingest.seconds / t_floor.seconds, 2),
            "ratio_to_read_and_json_loads": round(t_ingest.seconds / t_read_floor.seconds, 2),
        }
        rows.append(row)
        ctx.log(
            f"ingest {i + 1}/{scale.ingest_repeats}: {stats.objects} results in "
            f"{row['ingest_s']} s ({row['mb_per_s']} MiB/s), json.loads {row['json_loads_s']} s, "
            f"ratio {row['ratio_to_json_loads']}"
        )
    shutil.rmtree(raw, ignore_errors=True)
    ratio = stat((r["ratio_to_json_loads"] for r in rows), "x", 2)
    return {
        "status": MEASURED,
        "method": (
            f"{len(paths)} fio json+ artifacts replicated from {len(sources)} real fio runs (one per "
            "job of the library) into distinct run/cell/slot paths; Warehouse.ingest_dir into a "
            "fresh DuckDB file vs json.loads of the same texts in memory; warm page cache"
        ),
        "results": len(paths),
        "bytes": total_bytes,
        "mib": round(total_bytes / MIB, 2),
        "rows_per_ingest": rows[0]["rows"],
        "repeats": rows,
        "ingest_s": stat((r["ingest_s"] for r in rows), "s", 3),
        "results_per_s": stat((r["results_per_s"] for r in rows), "results/s", 1),
        "rows_per_s": stat((r["rows_per_s"] for r in rows), "rows/s", 0),
        "mb_per_s": stat((r["mb_per_s"] for r in rows), "MiB/s", 2),
        "json_loads_s": stat((r["json_loads_s"] for r in rows), "s", 4),
        "ratio_to_json_loads": ratio,
        "ratio_to_read_and_json_loads": stat(
            (r["ratio_to_read_and_json_loads"] for r in rows), "x", 2
        ),
        "targets": {"ratio_to_json_loads": TARGET_RATIO},
        "met": {"ratio_to_json_loads": ratio["median"] <= TARGET_RATIO},
    }
