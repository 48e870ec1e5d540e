"""`make bench`: measure iofleet against its references; write JSON and the docs table.

    python -m bench.run                       # every figure, full scale
    python -m bench.run --only queries,ingest # some figures (merged into the existing JSON)
    python -m bench.run --smoke --out X.json --docs ''   # seconds-long CI smoke

Figures (each its own module): fidelity, overhead, ingest, queries (DuckDB
and Trino), cold_start, orchestration + fleet_step (one module, the same
local-cloud executions), fleet_scale (bench/fleet_scale.py: 200 and 1,000 slots). A figure that fails is recorded as
`{"status": "error", "reason": ...}` and the others still run; a figure
that cannot be measured here says `{"status": "not measured", "reason": ...}`.
Numbers are never invented.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import report
from bench.common import ERROR, ROOT, Context, Scale, machine_info, not_measured

FIGURES = (
    "fidelity",
    "overhead",
    "ingest",
    "queries",
    "cold_start",
    "orchestration",
    "fleet_step",
    "fleet_scale",
)
DEFAULT_OUT = ROOT / "bench" / "results" / "latest.json"
DEFAULT_DOCS = ROOT / "docs" / "benchmarks.md"
DEFAULT_WORK = ROOT / "bench" / "work"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _simple(name: str) -> Callable[[Context], dict[str, Any]]:
    module = __import__(f"bench.{name}", fromlist=["measure"])
    measure: Callable[[Context], dict[str, Any]] = module.measure
    return measure


def run_figures(ctx: Context, names: Sequence[str]) -> dict[str, Any]:
    """Measure the named figures; a failure becomes an `error` entry, never an exception."""
    out: dict[str, Any] = {}
    pending = [n for n in FIGURES if n in names]
    for name in pending:
        if name in out:
            continue
        ctx.log(f"== {name}")
        started = time.monotonic()
        try:
            if name in ("orchestration", "fleet_step"):
                from bench.orchestration import measure_both

                orchestration, fleet_step = measure_both(ctx)
                elapsed = round(time.monotonic() - started, 1)
                for key, value in (("orchestration", orchestration), ("fleet_step", fleet_step)):
                    if key in pending:
                        out[key] = {**value, "seconds": elapsed}
                continue
            result = _simple(name)(ctx)
        except Exception as exc:  # noqa: BLE001 - one figure's failure must not lose the rest
            reason = _one_line(exc)
            ctx.log(f"{name}: {reason}")
            result = {"status": ERROR, "reason": reason}
            if name == "orchestration" and "fleet_step" in pending:
                out["fleet_step"] = not_measured(f"the local-cloud execution failed: {reason}")
        result["seconds"] = round(time.monotonic() - started, 1)
        out[name] = result
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated figures (default: all of {FIGURES})")
    parser.add_argument("--smoke", action="store_true", help="tiny scale (CI smoke)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="results JSON path")
    parser.add_argument("--docs", default=str(DEFAULT_DOCS), help="markdown to update ('' = none)")
    parser.add_argument("--work", default=str(DEFAULT_WORK), help="scratch directory")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(FIGURES)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        print(
            f"bench: unknown figure(s) {', '.join(unknown)}; known: {', '.join(FIGURES)}",
            file=sys.stderr,
        )
        return 2
    if args.docs:  # found bad now, not after the whole bench has run
        problem = report.doc_problem(Path(args.docs))
        if problem:
            print(f"{args.docs}: {problem}", file=sys.stderr)
            return 2
    # SIGTERM unwinds like Ctrl-C does, so every figure's finally runs (unmount, detach
    # the fidelity figure's loop device, stop the engines)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    ctx = Context(work=work, scale=Scale.smoke() if args.smoke else Scale())
    out_path = Path(args.out)
    results: dict[str, Any] = {}
    if args.only and out_path.is_file():
        results = json.loads(out_path.read_text())  # keep the figures not re-measured
    started = time.monotonic()
    machine = machine_info(work)
    measured = run_figures(ctx, names)
    results.update(
        {
            "schema_version": 1,
            "scale": "smoke" if args.smoke else "full",
            "scale_parameters": ctx.scale.__dict__,
            "machine": machine,
            "duration_s": round(time.monotonic() - started, 1),
            **measured,
        }
    )
    if args.only:
        results["partial_update"] = names
    else:
        results.pop("partial_update", None)
    ordered = {k: v for k, v in results.items() if k not in FIGURES}
    ordered.update({k: results[k] for k in FIGURES if k in results})
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(ordered, indent=2) + "\n", encoding="utf-8")
    ctx.log(f"wrote {out_path}")
    if args.docs:
        report.update_doc(Path(args.docs), ordered)
        ctx.log(f"updated {args.docs}")
    failed = [n for n in names if (ordered.get(n) or {}).get("status") == ERROR]
    if failed:
        ctx.log(f"figures that failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
