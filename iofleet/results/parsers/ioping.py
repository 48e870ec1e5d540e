"""ioping `-J` output: one row per timed request, plus an exact percentile summary.

ioping 1.3 prints a JSON array: one object per request (`io`: request,
operation, size, time in ns, `ignored` true for the warm-up requests) and a
final object with `stat` and `load`. Warm-up requests are dropped, as ioping
itself does in its statistics.

Stdlib only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from iofleet.results.parsers import ParseError
from iofleet.results.schema import value_problem

SUMMARY_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("lat_p0_ns", 0.0),
    ("lat_p50_ns", 50.0),
    ("lat_p75_ns", 75.0),
    ("lat_p90_ns", 90.0),
    ("lat_p98_ns", 98.0),
    ("lat_p100_ns", 100.0),
)


def percentile_linear(sorted_values: Sequence[float], p: float) -> float:
    """Exact percentile with linear interpolation (numpy's default method).

    Computed in rationals and rounded once, so 107690.42 is not 107690.42000000001.
    """
    if not sorted_values:
        raise ValueError("no values")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile {p} outside 0..100")
    position = (len(sorted_values) - 1) * Fraction(p) / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    low, high = Fraction(sorted_values[lower]), Fraction(sorted_values[upper])
    return float(low + (high - low) * (position - lower))


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


@dataclass
class IopingOutput:
    requests: list[dict] = field(default_factory=list)
    warmup_requests: int = 0
    stat: dict | None = None

    def summary(self) -> dict:
        """One record: operation, requests and exact latency percentiles over the requests."""
        operations = sorted({r["operation"] for r in self.requests})
        times = sorted(r["time_ns"] for r in self.requests)
        record: dict[str, object] = {
            "operation": "+".join(operations) if operations else None,
            "requests": len(times),
        }
        for key, p in SUMMARY_PERCENTILES:
            record[key] = _number(percentile_linear(times, p)) if times else None
        return record


def _decode(text: str) -> list:
    stripped = text.strip()
    if not stripped:
        raise ParseError("empty ioping output")
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"invalid ioping JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise ParseError(f"ioping JSON: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise ParseError("ioping JSON: nested too deeply") from None
    if not isinstance(doc, list):
        raise ParseError("ioping JSON is not an array (expected ioping -J output)")
    return doc


def _int_field(io: dict, key: str, where: str) -> int:
    value = io.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: io.{key} missing or not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParseError(f"{where}: io.{key} is not a finite number")
    if value < 0:
        raise ParseError(f"{where}: io.{key} is negative")
    problem = value_problem("bigint", int(value))  # what its ioping_requests column holds
    if problem:
        raise ParseError(f"{where}: io.{key}: {problem}")
    return int(value)


def parse_ioping(text: str) -> IopingOutput:
    """Parse ioping `-J` stdout. Raises ParseError (one line) when malformed."""
    doc = _decode(text)
    out = IopingOutput()
    for position, entry in enumerate(doc):
        where = f"entry {position}"
        if not isinstance(entry, dict):
            raise ParseError(f"{where}: not an object")
        if "stat" in entry:
            stat = entry["stat"]
            out.stat = stat if isinstance(stat, dict) else None
            continue
        io = entry.get("io")
        if not isinstance(io, dict):
            raise ParseError(f"{where}: neither an 'io' request nor a 'stat' summary")
        if io.get("ignored") is True:
            out.warmup_requests += 1
            continue
        operation = io.get("operation")
        if not isinstance(operation, str) or not operation:
            raise ParseError(f"{where}: io.operation missing")
        ts = entry.get("timestamp")
        out.requests.append(
            {
                "request": _int_field(io, "request", where),
                "operation": operation,
                "size_bytes": _int_field(io, "size", where),
                "time_ns": _int_field(io, "time", where),
                "ts": float(ts)
                if isinstance(ts, int | float) and not isinstance(ts, bool)
                else None,
            }
        )
    if not out.requests and out.warmup_requests == 0:
        raise ParseError("no ioping requests in the output")
    return out
