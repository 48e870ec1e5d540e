"""Shared helpers for the benchmark figures: statistics, timing, machine info.

Every figure returns a plain dict (JSON-ready). Measured quantities are
`Stat` dicts: `{"min", "median", "max", "n", "unit"}` over the repeats of one
run; a figure that could not be measured says so with `status` and `reason`
and carries no numbers.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024

MEASURED = "measured"
NOT_MEASURED = "not measured"
ERROR = "error"


def stat(values: Iterable[float], unit: str, digits: int = 4) -> dict[str, Any]:
    """min / median / max (and n) of a series, rounded for reading."""
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("stat() of no values")
    return {
        "min": round(min(vals), digits),
        "median": round(statistics.median(vals), digits),
        "max": round(max(vals), digits),
        "n": len(vals),
        "unit": unit,
    }


def not_measured(reason: str, **extra: Any) -> dict[str, Any]:
    return {"status": NOT_MEASURED, "reason": reason, **extra}


@dataclass
class Scale:
    """Sizes of one bench run; `smoke()` is the seconds-long CI version."""

    # fidelity: rounds of (bare, bare, iofleet); the RAM-backed target is the primary row
    fidelity_ram_rounds: int = 24  # 4 of each (order, reference) pair: fidelity.DESIGN
    fidelity_ram_runtime_s: int = 3
    fidelity_ram_size: str = "64m"
    fidelity_ram_device_mib: int = 256
    fidelity_pairs: int = 6  # rounds on the work directory's real disk (second row)
    fidelity_runtime_s: int = 4
    fidelity_size: str = "256m"
    overhead_repeats: int = 3
    overhead_runtime_s: int = 10
    overhead_size: str = "256m"
    ingest_results: int = 1000
    ingest_repeats: int = 3
    ingest_source_runtime_s: int = 1
    ingest_source_jobs: int | None = None  # None: every job of the library
    query_runs: int = 100
    query_cells_per_run: int = 20
    query_slots_per_cell: int = 50
    query_results_per_slot: int = 10  # 5 workloads x 2 directions
    query_bins_per_result: int = 10
    query_repeats: int = 3
    trino: bool = True
    trino_runs: int = 10  # Trino's shape: 10 runs x 4 cells x 50 slots (2,000 slots),
    trino_cells_per_run: int = 4  # so a one-run query has 1/10 of the data to itself
    trino_repeats: int = 5
    cold_start_repeats: int = 5
    orchestration_slots: int = 200
    orchestration_repeats: int = 3
    fleet_sizes: tuple[int, ...] = (200, 1000)  # figure fleet_scale
    fleet_repeats: int = 3

    @classmethod
    def smoke(cls) -> Scale:
        return cls(
            fidelity_ram_rounds=2,
            fidelity_ram_runtime_s=1,
            fidelity_ram_size="8m",
            fidelity_ram_device_mib=64,
            fidelity_pairs=1,
            fidelity_runtime_s=1,
            fidelity_size="8m",
            overhead_repeats=1,
            overhead_runtime_s=1,
            overhead_size="8m",
            ingest_results=12,
            ingest_source_jobs=2,
            ingest_repeats=1,
            query_runs=2,
            query_cells_per_run=2,
            query_slots_per_cell=3,
            query_bins_per_result=4,
            query_repeats=1,
            trino=False,
            cold_start_repeats=1,
            orchestration_slots=3,
            orchestration_repeats=1,
            fleet_sizes=(3, 6),
            fleet_repeats=1,
        )


@dataclass
class Context:
    work: Path  # scratch (bench/work/ by default, gitignored)
    scale: Scale = field(default_factory=Scale)
    log: Callable[[str], None] = lambda message: print(message, file=sys.stderr, flush=True)

    def scratch(self, name: str, fresh: bool = True) -> Path:
        path = self.work / name
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        return path


class Timer:
    """`with Timer() as t: ...` then `t.seconds` (monotonic wall time)."""

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def settle() -> None:
    """Before a timed run, untimed: write back what earlier runs left dirty (`sync`), so
    that no run pays for its predecessor's writeback. `iofleet local` leaves its
    warehouse, raw files and report dirty in the page cache, and a bare fio run started
    right after one was measured 2.5 % slower than one started after bare fio
    (docs/benchmarks.md, "How each figure is measured")."""
    os.sync()


def iofleet_argv() -> list[str]:
    """The `iofleet` command of the running interpreter (its console script when present)."""
    script = Path(sys.executable).parent / "iofleet"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "iofleet.cli"]


def compile_iofleet(package: Path | None = None) -> int:
    """Compile iofleet's modules to bytecode (`__pycache__`, as `pip install` does), so
    that the figures that start `iofleet` processes time what an installed iofleet does
    and not Python compiling its sources at every start: with PYTHONDONTWRITEBYTECODE
    set (as in this project's shells), a module without bytecode is compiled again by
    every process that imports it. `package`: iofleet's folder (default: the one
    imported here). Returns how many files were (re)compiled."""
    import compileall
    import importlib.util

    if package is None:
        import iofleet

        package = Path(iofleet.__file__).resolve().parent

    def stale(src: Path) -> bool:
        pyc = Path(importlib.util.cache_from_source(str(src)))
        return not pyc.is_file() or pyc.stat().st_mtime < src.stat().st_mtime

    count = sum(1 for src in package.rglob("*.py") if stale(src))
    compileall.compile_dir(str(package), quiet=1)
    return count


def run(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """subprocess.run with text output captured; raises with stderr's last line on failure."""
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, **kwargs)  # noqa: S603
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(
            f"{Path(argv[0]).name} exited {done.returncode}: {tail[-1] if tail else 'no output'}"
        )
    return done


def fio_json(text: str) -> dict[str, Any]:
    """fio's JSON document from its stdout (notes may precede the JSON)."""
    start = text.find("{")
    if start < 0:
        raise ValueError("fio printed no JSON")
    doc: dict[str, Any] = json.loads(text[start:])
    return doc


def _first_line(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def _module_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def filesystem(path: Path) -> dict[str, str | None]:
    line = _first_line(["findmnt", "-n", "-o", "SOURCE,FSTYPE,OPTIONS", "-T", str(path)])
    if not line:
        return {"source": None, "fstype": None, "options": None}
    parts = line.split()
    return {
        "source": parts[0] if parts else None,
        "fstype": parts[1] if len(parts) > 1 else None,
        "options": parts[2] if len(parts) > 2 else None,
    }


def machine_info(work: Path) -> dict[str, Any]:
    """Where and with what the numbers were measured."""
    git = _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": git,
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "loadavg_at_start": load,
        "work_filesystem": filesystem(work),
        "versions": {
            "python": platform.python_version(),
            "fio": _first_line(["fio", "--version"]),
            "ioping": _first_line(["ioping", "-v"]),
            "iofleet": _module_version("iofleet"),
            "duckdb": _module_version("duckdb"),
            "sqlglot": _module_version("sqlglot"),
            "moto": _module_version("moto"),
            "boto3": _module_version("boto3"),
            "aws-lambda-powertools": _module_version("aws_lambda_powertools"),
            "aws-cdk-lib": _module_version("aws-cdk-lib"),
        },
    }


def dir_size(path: Path) -> int:
    """Total bytes of the regular files under path (symlinks not followed)."""
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def ratio_ci(ratios: Sequence[float], unit: str = "ratio", digits: int = 4) -> dict[str, Any]:
    """A series of per-pair ratios: `stat()` plus the geometric mean and its 95 % t-interval.

    Ratios are averaged on the log scale (a ratio of 0.5 and one of 2.0 cancel),
    so the interval is `exp(mean(log r) +- t(0.975, n-1) * sd(log r) / sqrt(n))`.
    With fewer than two pairs there is no interval (`ci95` is None).
    """
    import math

    vals = [float(r) for r in ratios]
    out = stat(vals, unit, digits)
    logs = [math.log(v) for v in vals]
    mean = statistics.fmean(logs)
    out["geomean"] = round(math.exp(mean), digits)
    if len(vals) < 2:
        out["ci95"] = None
        return out
    from scipy import stats as sstats

    half = float(sstats.t.ppf(0.975, len(vals) - 1)) * statistics.stdev(logs) / math.sqrt(len(vals))
    out["ci95"] = [round(math.exp(mean - half), digits), round(math.exp(mean + half), digits)]
    return out


def ci_within(series: dict[str, Any], low: float, high: float) -> bool:
    """True when the whole 95 % interval of a `ratio_ci` series lies in [low, high]."""
    ci = series.get("ci95")
    return bool(ci) and low <= ci[0] and ci[1] <= high
