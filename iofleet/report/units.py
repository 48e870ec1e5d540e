"""Human units for report cells; machine formats keep the raw numbers."""

from __future__ import annotations

import math


def fmt_ns(ns: float) -> str:
    """850 ns, 12.3 us, 4.56 ms, 1.23 s."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= scale:
            return f"{_sig(ns / scale)} {unit}"
    return f"{ns:.0f} ns"


def fmt_rate(bytes_per_s: float) -> str:
    """Binary units, like fio: 512 B/s, 12.0 KiB/s, 123 MiB/s, 1.50 GiB/s."""
    for scale, unit in ((2**30, "GiB/s"), (2**20, "MiB/s"), (2**10, "KiB/s")):
        if abs(bytes_per_s) >= scale:
            return f"{_sig(bytes_per_s / scale)} {unit}"
    return f"{bytes_per_s:.0f} B/s"


def fmt_iops(iops: float) -> str:
    """40,123 or 12.5 (IOPS)."""
    return f"{iops:,.0f}" if abs(iops) >= 100 else f"{iops:.1f}"


def fmt_duration(seconds: float) -> str:
    """97m 42s for a minute or more (build times, seed 004); 12.3s below."""
    if abs(seconds) < 60:
        return f"{seconds:.1f}s" if abs(seconds) >= 1 else f"{seconds:.3f}s"
    total = math.floor(seconds + 0.5)  # half up: 60.5 s -> 1m 01s
    return f"{total // 60}m {total % 60:02d}s"


def fmt_value(value: float | None, unit: str | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit == "ns":
        return fmt_ns(value)
    if unit == "B/s":
        return fmt_rate(value)
    if unit == "iops":
        return fmt_iops(value)
    if unit == "s":
        return fmt_duration(value)
    return _sig(value)


def _sig(x: float) -> str:
    """Three significant figures, no exponent for the ranges used here."""
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"
