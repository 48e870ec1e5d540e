"""fio's own figures for one jobs[] (or client_stats[]) entry and direction, read from its
JSON by key, for tests that compare iofleet's parser with them (no iofleet code)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def direct_figures(entry: Mapping[str, Any], stats: Mapping[str, Any]) -> dict[str, Any]:
    """The figures iofleet copies from fio as they are: job, iops, bandwidth, bytes,
    runtime, error, and clat min/max/mean (None when fio took no latency samples)."""
    clat = stats["clat_ns"]
    sampled = clat["N"] > 0
    return {
        "job": entry["jobname"],
        "iops": stats["iops"],
        "bw_bytes": stats["bw_bytes"],
        "io_bytes": stats["io_bytes"],
        "runtime_ms": stats["runtime"],
        "error": entry["error"],
        "clat_min_ns": clat["min"] if sampled else None,
        "clat_max_ns": clat["max"] if sampled else None,
        "clat_mean_ns": clat["mean"] if sampled else None,
    }
