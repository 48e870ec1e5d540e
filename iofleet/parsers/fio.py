"""fio `--output-format=json` / `json+` output: one record per (jobs[] entry, direction).

fio may print text before its JSON document (notes such as "note: both iodepth
>= 1 and synchronous I/O engine...", and "fio: pid=..., err=..." error lines) and,
rarely, after it; that text is kept as warnings. A direction with total_ios == 0
gives no record, except for a job that failed (error != 0) before doing any I/O:
it gets one record per direction its `rw` asked for, with zero I/O and null
latencies, so its error code reaches the tables instead of vanishing.

Completion-latency percentiles are exact, never interpolated:
- from json+ histogram bins when present: the smallest bin value whose cumulative
  count reaches ceil(p/100 x total) (`percentile_from_bins`, the rule fio itself uses);
- else from fio's `percentile` list when it holds exactly that percentile;
- else null.

Handles fio 3.x (`clat_ns`) and, for old files, fio 2.x (`clat` in microseconds).
Stdlib only.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from iofleet.parsers import ParseError

DIRECTIONS = ("read", "write", "trim")
# record key -> percentile; the warehouse columns clat_p*_ns
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("clat_p50_ns", 50.0),
    ("clat_p75_ns", 75.0),
    ("clat_p90_ns", 90.0),
    ("clat_p98_ns", 98.0),
    ("clat_p99_ns", 99.0),
    ("clat_p99_9_ns", 99.9),
    ("clat_p99_99_ns", 99.99),
)
_PERCENTILE_VALUES = tuple(p for _, p in PERCENTILES)
RECORD_KEYS = (
    "job",
    "job_index",
    "direction",
    "iops",
    "bw_bytes",
    "io_bytes",
    "runtime_ms",
    "error",
    "clat_min_ns",
    "clat_max_ns",
    "clat_mean_ns",
    *(key for key, _ in PERCENTILES),
)
BIN_KEYS = ("job", "job_index", "direction", "bin_ns", "count")

_JSON_START = re.compile(r"^\{", re.MULTILINE)
_MAX_QUOTE = 120


# (job, job_index, direction, [(bin value ns, count > 0)] by value) of one record
Histogram = tuple[str, int, str, list[tuple[int, int]]]


@dataclass
class FioOutput:
    records: list[dict] = field(default_factory=list)
    # one entry per record that has json+ bins; `bins` lists them as rows
    histograms: list[Histogram] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fio_version: str | None = None

    @property
    def bins(self) -> list[dict]:
        """Every histogram bin as a row (BIN_KEYS), ordered by record, then bin value."""
        return [
            {"job": job, "job_index": index, "direction": direction, "bin_ns": value, "count": n}
            for job, index, direction, hist in self.histograms
            for value, n in hist
        ]


def percentile_from_bins(
    bins: Mapping[int, int] | Iterable[tuple[int, int]], p: float
) -> int | None:
    """The smallest bin value whose cumulative count reaches ceil(p/100 x total).

    `bins` maps a bin value (ns, as fio reports it) to its count; bins from several
    jobs or slots can be merged by adding counts first. The threshold is computed
    with the same double arithmetic as fio (p / 100.0 * total), so the result equals
    fio's own percentile figure. None when there are no samples.
    """
    return percentiles_from_bins(bins, (p,))[0]


def percentiles_from_bins(
    bins: Mapping[int, int] | Iterable[tuple[int, int]], ps: Sequence[float]
) -> list[int | None]:
    """`percentile_from_bins` for each of `ps` (in that order), sorting the bins once."""
    items = bins.items() if isinstance(bins, Mapping) else bins
    ordered = sorted((int(value), int(count)) for value, count in items if int(count) > 0)
    return _percentiles_of_sorted(ordered, ps)


def _percentiles_of_sorted(ordered: list[tuple[int, int]], ps: Sequence[float]) -> list[int | None]:
    """The rule over (value, count > 0) pairs already sorted by value.

    One pass builds the cumulative counts; each percentile is then the first bin
    whose cumulative count reaches its threshold (a binary search).
    """
    cumulative = list(accumulate(count for _, count in ordered))
    if not cumulative or cumulative[-1] == 0:
        return [None] * len(ps)
    total = cumulative[-1]
    last = len(ordered) - 1
    return [
        ordered[min(bisect_left(cumulative, max(1, math.ceil(p / 100.0 * total))), last)][0]
        for p in ps
    ]


def _quote(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _MAX_QUOTE else text[: _MAX_QUOTE - 3] + "..."


def _text_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _decode(text: str) -> tuple[dict, list[str]]:
    """The fio JSON document and the non-empty text lines around it."""
    if not text.strip():
        raise ParseError("empty fio output")
    # candidate starts are found lazily: the first one nearly always decodes
    starts = (m.start() for m in _JSON_START.finditer(text))
    decoder = json.JSONDecoder()
    first_error: json.JSONDecodeError | None = None
    for start in starts:
        try:
            doc, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            continue
        if isinstance(doc, dict):
            return doc, _text_lines(text[:start]) + _text_lines(text[end:])
    if first_error is None:  # no line starts with "{"
        first = _text_lines(text)[0]
        raise ParseError(f"no fio JSON document in the output (first line: {_quote(first)!r})")
    kind = "truncated" if first_error.pos >= len(text.rstrip()) else "invalid"
    raise ParseError(
        f"{kind} fio JSON at line {first_error.lineno} column {first_error.colno}: "
        f"{first_error.msg}"
    )


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: expected a number, got {_quote(repr(value))}")
    return int(value)


def _float(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: expected a number, got {_quote(repr(value))}")
    return float(value)


def _optional_int(stats: Mapping, key: str, where: str, scale: int = 1) -> int | None:
    value = stats.get(key)
    return None if value is None else _int(value, f"{where}.{key}") * scale


def _clat(stats: Mapping, where: str) -> tuple[Mapping, int, str]:
    """The completion-latency object, the factor to nanoseconds, and its path."""
    clat = stats.get("clat_ns")
    if isinstance(clat, Mapping):
        return clat, 1, f"{where}.clat_ns"
    clat = stats.get("clat")  # fio 2.x: microseconds
    if isinstance(clat, Mapping):
        return clat, 1000, f"{where}.clat"
    return {}, 1, f"{where}.clat_ns"


def _bins(clat: Mapping, scale: int, where: str) -> dict[int, int]:
    raw = clat.get("bins")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ParseError(f"{where}.bins: expected an object")
    # fast path, what fio writes: integer keys and integer counts, no key twice
    counts = list(raw.values())
    try:
        values = list(map(int, raw))
    except ValueError:
        values = []
    if len(values) == len(counts) and set(map(type, counts)) <= {int}:
        if scale != 1:
            values = [value * scale for value in values]
        if len(set(values)) == len(values):
            return {value: n for value, n in zip(values, counts, strict=True) if n > 0}
    bins: dict[int, int] = {}
    for key, count in raw.items():
        try:
            value = int(key) * scale
        except ValueError:
            raise ParseError(f"{where}.bins: bin {_quote(key)!r} is not a number") from None
        number = _int(count, f"{where}.bins[{key}]")
        if number > 0:
            bins[value] = bins.get(value, 0) + number
    return bins


def _listed(clat: Mapping, scale: int, where: str) -> dict[float, int]:
    raw = clat.get("percentile")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ParseError(f"{where}.percentile: expected an object")
    listed: dict[float, int] = {}
    for key, value in raw.items():
        try:
            p = float(key)
        except ValueError:
            continue
        listed[p] = _int(value, f"{where}.percentile[{key}]") * scale
    return listed


def _direction_record(
    out: FioOutput, job: str, index: int, direction: str, stats: Mapping, error: int
) -> None:
    where = f"jobs[{index}].{direction}"
    clat, scale, clat_where = _clat(stats, where)
    bins = _bins(clat, scale, clat_where)
    listed = _listed(clat, scale, clat_where)
    if "bw_bytes" in stats:
        bw_bytes = _int(stats["bw_bytes"], f"{where}.bw_bytes")
    else:  # fio 2.x: KiB/s
        bw_bytes = _int(stats.get("bw", 0), f"{where}.bw") * 1024
    if "io_bytes" in stats:
        io_bytes = _int(stats["io_bytes"], f"{where}.io_bytes")
    else:
        io_bytes = _int(stats.get("io_kbytes", 0), f"{where}.io_kbytes") * 1024
    mean = clat.get("mean")
    record: dict[str, object] = {
        "job": job,
        "job_index": index,
        "direction": direction,
        "iops": _float(stats.get("iops", 0), f"{where}.iops"),
        "bw_bytes": bw_bytes,
        "io_bytes": io_bytes,
        "runtime_ms": _int(stats.get("runtime", 0), f"{where}.runtime"),
        "error": error,
        "clat_min_ns": _optional_int(clat, "min", clat_where, scale),
        "clat_max_ns": _optional_int(clat, "max", clat_where, scale),
        "clat_mean_ns": None if mean is None else _float(mean, f"{clat_where}.mean") * scale,
    }
    missing: list[str] = []
    ordered = sorted(bins.items())
    if ordered:
        found = _percentiles_of_sorted(ordered, _PERCENTILE_VALUES)
        record.update(zip((key for key, _ in PERCENTILES), found, strict=True))
    else:
        for key, p in PERCENTILES:
            record[key] = listed.get(p)
            if record[key] is None:
                missing.append(f"p{p:g}")
    if missing:
        out.warnings.append(
            f"job {job!r} (jobs[{index}]) {direction}: no json+ bins and fio's percentile "
            f"list lacks {', '.join(missing)}; left null"
        )
    out.records.append(record)
    if ordered:
        out.histograms.append((job, index, direction, ordered))


def parse_fio(text: str) -> FioOutput:
    """Parse fio's stdout (json or json+, any fio 3.x); ParseError with a one-line reason."""
    doc, around = _decode(text)
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise ParseError('fio JSON has no "jobs" array (not fio --output-format=json output?)')
    version = doc.get("fio version")
    out = FioOutput(warnings=around, fio_version=version if isinstance(version, str) else None)
    if not jobs:
        out.warnings.append("fio reported no jobs")
    for index, entry in enumerate(jobs):
        if not isinstance(entry, Mapping):
            raise ParseError(f"jobs[{index}]: expected an object")
        name = entry.get("jobname")
        if not isinstance(name, str):
            raise ParseError(f"jobs[{index}]: no jobname")
        error = _int(entry.get("error", 0), f"jobs[{index}].error")
        before = len(out.records)
        for direction in DIRECTIONS:
            stats = entry.get(direction)
            if not isinstance(stats, Mapping):
                continue
            where = f"jobs[{index}].{direction}"
            if "total_ios" in stats:
                ios = _int(stats["total_ios"], f"{where}.total_ios")
            else:  # very old fio: no total_ios; did the direction move any bytes?
                ios = _int(stats.get("io_bytes", stats.get("io_kbytes", 0)), f"{where}.io_bytes")
            if ios > 0:
                _direction_record(out, name, index, direction, stats, error)
        if error and len(out.records) == before:
            out.warnings.append(
                f"job {name!r} (jobs[{index}]) failed with fio error {error} and did no I/O"
            )
            rw = _job_option(entry, doc, "rw") or "read"
            for direction in _RW_DIRECTIONS.get(rw.split(":")[0], ("read",)):
                out.records.append(_failed_record(name, index, direction, error))
    return out


# fio's rw= values -> the directions the job does I/O in (fio's default is read)
_RW_DIRECTIONS: dict[str, tuple[str, ...]] = {
    "read": ("read",),
    "randread": ("read",),
    "write": ("write",),
    "randwrite": ("write",),
    "trim": ("trim",),
    "randtrim": ("trim",),
    "rw": ("read", "write"),
    "readwrite": ("read", "write"),
    "randrw": ("read", "write"),
    "trimwrite": ("trim", "write"),
    "randtrimwrite": ("trim", "write"),
}


def _job_option(entry: Mapping, doc: Mapping, name: str) -> str | None:
    """A job's option as fio reports it: its own `job options`, else `global options`."""
    for options in (entry.get("job options"), doc.get("global options")):
        if isinstance(options, Mapping) and isinstance(options.get(name), str):
            return str(options[name])
    return None


def _failed_record(job: str, index: int, direction: str, error: int) -> dict[str, object]:
    """The record of a direction a failed job never got to: zero I/O, its error code."""
    record: dict[str, object] = {
        "job": job,
        "job_index": index,
        "direction": direction,
        "iops": 0.0,
        "bw_bytes": 0,
        "io_bytes": 0,
        "runtime_ms": 0,
        "error": error,
        "clat_min_ns": None,
        "clat_max_ns": None,
        "clat_mean_ns": None,
    }
    record.update((key, None) for key, _ in PERCENTILES)
    return record
