"""fio `--output-format=json` / `json+` output: one record per (jobs[] entry, direction).

fio may print text before its JSON document (notes such as "note: both iodepth
>= 1 and synchronous I/O engine...", and "fio: pid=..., err=..." error lines) and,
rarely, after it; that text is kept as warnings, except fio's progress lines
("Jobs: 1 (f=1): ...", ended by carriage returns, with --eta=always). A direction
with total_ios == 0 gives no record, except for a job that failed (error != 0) before
doing any I/O:
it gets one record per direction its `rw` asked for (`mixed` under
unified_rw_reporting, as fio reports it), with zero I/O and null latencies, so its
error code reaches the tables instead of vanishing. A job with no I/O and no error
(fio could not create its file) is named in a warning. fio's `sync` direction
(fsync/fdatasync latency) is not a data direction and gives no record.

Completion-latency percentiles are exact, never interpolated:
- from json+ histogram bins when present: the smallest bin value whose cumulative
  count reaches ceil(p/100 x total), computed exactly as fio's long double does
  (`percentile_from_bins`, the rule fio itself uses);
- else from fio's `percentile` list when it holds exactly that percentile;
- else null.
fio 3.14+ lists the figures the bin rule gives. Earlier fio computed p / 100.0 x N in
double under -ffast-math and, where that product is an integer, can list the next
sample (fio commit 298d751e); iofleet keeps the exact rule over the bins it stores.

fio's format across its versions (each shape has a fixture made by that fio,
tests/fixtures/fio/versions/README.md):
- fio 3.0+ reports completion latency as `clat_ns` (ns); fio 2.x as `clat` (usec).
- fio before 2.21 writes `io_bytes` in KiB (no `io_kbytes` key; fio commit c12d597a
  made it bytes and added `io_kbytes`); `bw` is KiB/s in every version, `bw_bytes`
  exists from fio 3.2; before, bw_bytes is computed as fio 3.2+ does (1000 x io_bytes
  / runtime ms, integer arithmetic), not bw x 1024, which lost up to 1023 B/s.
- json+ `bins` (fio 2.2.12+): fio 2.2.12 to 2.19 key them by histogram index, with
  the FIO_IO_U_PLAT_BITS / _VAL / _NR constants beside them; each index decodes to
  fio's own bucket value (`plat_idx_to_val` of stat.c). fio 2.20+ key them by value.
- lat_percentiles (fio 3.1+; in fio 3.1-3.12 also turned on by clat_percentiles=0 alone):
  fio 3.1 to 3.12 write the total-latency percentile list under clat_ns (fio 3.1 its
  json+ bins too), so those jobs get null clat percentiles and no histogram, with a
  warning; fio 3.13+ put them under lat_ns, where they belong.
- unified_rw_reporting: every I/O is reported under `mixed` (direction "mixed");
  with `unified_rw_reporting=both` (fio 3.27+) `mixed` comes beside read and write.
- a direction with I/O but no completion-latency samples (disable_clat, ...) has null
  clat figures: fio writes zeros there (its calc_lat found no samples), which are no
  measurement. The sample count is fio's `N` (3.18+), else the json+ bin total, else
  min = max = mean = 0 (fio's no-sample output; in fio 2.x's microseconds an
  all-sub-microsecond run looks the same and is also left null).
- client/server (`fio --client`): `client_stats` instead of `jobs`, each entry a
  job of one server (`host` = hostname:port) and a last "All clients" total (host null);
  `global options` is one object, or one per server (with its hostname and port).
- fio prints an empty jobs[] entry (no jobname, groupid -1, no I/O) when group_reporting
  is set on only some jobs of a group or a job has stats=0 (`_unused_slot`): it is left
  out with a warning.
- strings: fio escapes only '"' and '\\' in them, so raw control characters (a tab in a
  job's description) are accepted.
Anything else that is not fio's JSON is a ParseError with a one-line reason.

Stdlib only; orjson, when installed, decodes the common case (the document runs to
the end of the output) about three times faster than `json`, and anything it
refuses (text after the document, NaN, integers beyond 64 bits, lone surrogates,
...) goes through the stdlib decoder exactly as before, so results and errors are
the same with or without it. The agent and the Lambdas run without it.
"""

from __future__ import annotations

import json
import math
import operator
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, overload

from iofleet.quote import clip, quote
from iofleet.results.parsers import ParseError
from iofleet.results.schema import FIO_LATENCY_BINS, FIO_RESULTS, INT_RANGES, value_problem

try:
    import orjson as _orjson
except ImportError:  # the agent and the Lambdas: the stdlib decoder alone
    _orjson = None  # type: ignore[assignment]

DIRECTIONS = ("read", "write", "trim", "mixed")  # mixed: unified_rw_reporting
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
# fio client/server output: records also carry the server that ran the job
CLIENT_RECORD_KEYS = (*RECORD_KEYS, "host")
ALL_CLIENTS = "All clients"  # the jobname of fio's summed entry in client_stats

# the document starts a line; fio's progress (ETA) lines end in a carriage return, and
# with --eta=always and a normal output format beside json the last one precedes "{"
_JSON_START = re.compile(r"(?:^|(?<=\r))\{", re.MULTILINE)
_ETA_LINE = re.compile(r"Jobs: \d+ \(")
_MAX_QUOTE = 120
# a job's block of the normal report (stat.c show_thread_status_normal) and its group
# summary (show_group_stats)
_NORMAL_REPORT = re.compile(
    r": \(groupid=\d+, jobs=\d+\): err=|^Run status group \d+ \(all jobs\):"
)
_FIO_MESSAGE = ("fio: ", "note: ")
# a job's line of `--output-format=terse` (stat.c show_thread_status_terse_all): terse
# version 2 starts `2;jobname;groupid;error;`, versions 3 to 5 `N;fio-VERSION;jobname;`
_TERSE_LINE = re.compile(r"^(?:2;[^;]*;\d+;\d+;|[345];fio-[^;]*;)")
_MAX_NOTE = 200  # a note longer than this is clipped (head ... tail)
# what `fio --client` prints beside the JSON: text relayed from a server (`<server> `
# before each line, client.c handle_text), a server's probe reply (`hostname=..., be=0,
# 64-bit, os=...`, before fio 3.1) and an empty disk stats header
_SERVER_TEXT = re.compile(r"<[^<>\s]+>(?: |$)")
_CLIENT_TEXT = re.compile(r"hostname=[^,]*, be=\d+, \d+-bit, os=|Disk stats \(read/write\):$")


class Bins(Sequence[tuple[int, int]]):
    """A histogram's (bin value ns, count > 0) pairs sorted by value, held as two lists.

    A sequence of pairs to its readers; a loader takes `values` and `counts` as
    columns without building a tuple per bin (a json+ record has hundreds).
    """

    __slots__ = ("values", "counts")

    def __init__(self, values: list[int], counts: list[int]) -> None:
        self.values = values
        self.counts = counts

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[int, int]]) -> Bins:
        if isinstance(pairs, Bins):
            return pairs
        items = list(pairs)
        return cls([v for v, _ in items], [n for _, n in items])

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.values, self.counts, strict=True)

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(zip(self.values[index], self.counts[index], strict=True))
        return (self.values[index], self.counts[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Bins):
            return self.values == other.values and self.counts == other.counts
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Bins({list(self)!r})"


# (job, job_index, direction, bins: (bin value ns, count > 0) by value) of one record
Histogram = tuple[str, int, str, Bins]


@dataclass
class FioOutput:
    records: list[dict] = field(default_factory=list)
    # one entry per record that has json+ bins; `bins` lists them as rows
    histograms: list[Histogram] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fio_version: str | None = None
    # when fio ended the run (its "timestamp_ms", epoch ms on the host's clock) and each
    # jobs[] entry's stonewall group ("groupid"): where a job's window lies in time
    ended_ms: int | None = None
    groups: dict[int, int] = field(default_factory=dict)
    # each jobs[] entry's "job_start" (fio 3.36 and later): when the job began its measured
    # I/O (taken again as a ramp_time ends), epoch ms on the host's clock (CLOCK_REALTIME,
    # fio's default job_start_clock_id)
    started_ms: dict[int, int] = field(default_factory=dict)

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
    jobs or slots can be merged by adding counts first. fio (calc_clat_percentiles,
    stat.c) compares the running count with `(long double) p / 100.0 * N`; here the
    threshold is the exact value of p / 100 x total for the double p (see
    `_samples_needed`), which is what fio's long double gives for the warehouse's
    percentiles, so the result equals fio's own percentile figure there. A double
    computation would not: 99.9 / 100.0 * 33000 rounds to 32967.0 in doubles, where
    fio needs sample 32968. None when there are no samples.
    """
    return percentiles_from_bins(bins, (p,))[0]


def percentiles_from_bins(
    bins: Mapping[int, int] | Iterable[tuple[int, int]], ps: Sequence[float]
) -> list[int | None]:
    """`percentile_from_bins` for each of `ps` (in that order), sorting the bins once."""
    items = bins.items() if isinstance(bins, Mapping) else bins
    ordered = sorted((int(value), int(count)) for value, count in items if int(count) > 0)
    return _percentiles_of_sorted(
        [value for value, _ in ordered], [count for _, count in ordered], ps
    )


def _percentiles_of_sorted(
    values: Sequence[int], counts: Sequence[int], ps: Sequence[float]
) -> list[int | None]:
    """The rule over bin values sorted ascending and their counts (> 0).

    One pass builds the cumulative counts; each percentile is then the first bin
    whose cumulative count reaches its threshold (a binary search).
    """
    fractions = _PERCENTILE_FRACTIONS if ps is _PERCENTILE_VALUES else _fractions(ps)
    cumulative = list(accumulate(counts))
    if not cumulative or cumulative[-1] == 0:
        return [None] * len(ps)
    total = cumulative[-1]
    last = len(values) - 1
    # max(1, ceil(num x total / den)): `_samples_needed`, its fraction worked out once
    return [
        values[min(bisect_left(cumulative, max(1, -(-num * total // den))), last)]
        for num, den in fractions
    ]


def _fractions(ps: Sequence[float]) -> tuple[tuple[int, int], ...]:
    """p / 100 as an exact fraction (numerator, denominator) for each p (a double)."""
    out = []
    for p in ps:
        num, den = float(p).as_integer_ratio()
        out.append((num, den * 100))
    return tuple(out)


_PERCENTILE_FRACTIONS = _fractions(_PERCENTILE_VALUES)


def _samples_needed(p: float, total: int) -> int:
    """ceil(p / 100 x total), exactly, for p as the double fio parsed (at least 1).

    fio computes the threshold in long double (80-bit on x86-64, 128-bit on arm64).
    For the warehouse's percentiles (PERCENTILES) both give this exact ceiling (checked
    for every sample count up to 3 million); a double computation does not. For some
    other percentiles fio itself differs by platform: x86-64 rounds 30.0 / 100 x 50 to
    just above 15 and needs sample 16, arm64 (and this function) sample 15.
    """
    ((num, den),) = _fractions((p,))
    return max(1, -(-num * total // den))


def _quote(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _MAX_QUOTE else text[: _MAX_QUOTE - 3] + "..."


def _text_lines(text: str) -> list[str]:
    """The notes around the document: non-empty lines, fio's progress lines left out."""
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not _ETA_LINE.match(line)]


def _notes(lines: list[str]) -> list[str]:
    """The notes worth a warning each: with `--output-format=json,normal` fio's normal
    report (its job headers, `(groupid=N, jobs=N)` blocks, run status and disk stats)
    is one note, not a warning per line; so is what `fio --client` prints beside it
    (`_CLIENT_TEXT`, and each server's text: job headers, `Starting N processes`).
    fio's own messages (`fio: ...`, `note: ...`, log_err/log_info, a server's too) stay
    one warning each."""
    terse = [line for line in lines if _TERSE_LINE.match(line)]
    if terse:
        note = f"fio's terse output beside the JSON ({_lines(len(terse))}) not read"
        return [note, *_notes([line for line in lines if not _TERSE_LINE.match(line)])]
    normal = any(_NORMAL_REPORT.search(line) for line in lines)
    others = [line for line in lines if not _relayed_text(line, normal)]
    if len(others) < len(lines):
        note = f"fio --client's text beside the JSON ({_lines(len(lines) - len(others))}) not read"
        return [note, *_notes(others)]
    if not normal:
        return [clip(line, _MAX_NOTE) for line in lines]
    kept = [clip(line, _MAX_NOTE) for line in lines if line.startswith(_FIO_MESSAGE)]
    folded = len(lines) - len(kept)
    return [f"fio's normal report beside the JSON ({_lines(folded)}) not read", *kept]


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


def _relayed_text(line: str, normal: bool = False) -> bool:
    """A line `fio --client` prints beside the JSON that is not one of fio's messages.
    Beside a normal report (`normal`), its `Disk stats` header is the report's."""
    if _CLIENT_TEXT.match(line):
        return not (normal and line.startswith("Disk stats"))
    m = _SERVER_TEXT.match(line)
    return m is not None and not line[m.end() :].startswith(_FIO_MESSAGE)


def _decode(text: str) -> tuple[dict, list[str]]:
    """The fio JSON document and the non-empty text lines around it."""
    if not text or text.isspace():  # not text.strip(): that copies the whole output
        raise ParseError("empty fio output")
    text = text.removeprefix("\ufeff")  # a byte-order mark an editor may have added
    if _orjson is not None:
        # the usual output: notes (if any), then one document running to the end
        head = _JSON_START.search(text)
        if head is not None:
            try:
                doc = _orjson.loads(text[head.start() :])
            except (ValueError, RecursionError):  # orjson.JSONDecodeError is a ValueError
                pass  # the stdlib path below decides, with its own error messages
            else:
                if isinstance(doc, dict):
                    return doc, _notes(_text_lines(text[: head.start()]))
    # candidate starts are found lazily: the first one nearly always decodes
    starts = (m.start() for m in _JSON_START.finditer(text))
    # strict=False: fio's JSON printer (json.c) escapes only '"' and '\\', so a tab in a
    # job name, description or option value reaches the output as a raw control character
    decoder = json.JSONDecoder(strict=False)
    first_error: json.JSONDecodeError | None = None
    for start in starts:
        try:
            doc, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            continue
        except ValueError as exc:  # e.g. an integer literal longer than Python converts
            raise ParseError(f"fio JSON: {str(exc).split(';')[0]}") from None
        except RecursionError:
            raise ParseError("fio JSON: nested too deeply") from None
        if isinstance(doc, dict):
            after = text[end:]
            more = after.count('"fio version"')
            if more:
                raise ParseError(
                    f"{1 + more} fio JSON documents in one output "
                    "(fio --status-interval, or several runs in one file); expected one"
                )
            return doc, _notes(_text_lines(text[:start]) + _text_lines(after))
    if first_error is None:  # no line starts with "{"
        first = _text_lines(text)[0]
        raise ParseError(f"no fio JSON document in the output (first line: {_quote(first)!r})")
    # cut short: the decoder stopped at the end of the text, or a string or number
    # ran into it ("0." then the end: "Expecting ',' delimiter" at the ".")
    rest = text[first_error.pos :].strip()
    cut = len(rest) <= 2 and "\n" not in rest
    kind = "truncated" if cut or first_error.msg.startswith("Unterminated string") else "invalid"
    raise ParseError(
        f"{kind} fio JSON at line {first_error.lineno} column {first_error.colno}: "
        f"{first_error.msg}"
    )


def _int(value: object, where: str) -> int:
    if type(value) is int:  # the usual value, as int() would return it
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: expected a number, got {_quote(repr(value))}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParseError(f"{where}: {quote(value)} is not a finite number")
    return int(value)


def _float(value: object, where: str) -> float:
    if type(value) is float and math.isfinite(value):  # as float() would return it
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: expected a number, got {_quote(repr(value))}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ParseError(f"{where}: {_quote(repr(value))} is not a finite number")
    return number


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


_PLAT_KEYS = ("FIO_IO_U_PLAT_BITS", "FIO_IO_U_PLAT_VAL", "FIO_IO_U_PLAT_NR")


def plat_idx_to_val(idx: int, bits: int, val: int) -> int:
    """fio's `plat_idx_to_val` (stat.c, fio 2.x): the value of histogram bucket `idx`.

    Buckets below 2 x FIO_IO_U_PLAT_VAL hold one value each; above, each group
    doubles the bucket width and a bucket stands for the middle of its range,
    truncated to an integer as fio's unsigned int return does.
    """
    if idx < (val << 1):
        return idx
    error_bits = (idx >> bits) - 1
    base = 1 << (error_bits + bits)
    k = idx % val
    return base + int((k + 0.5) * (1 << error_bits))


def _index_keyed_bins(raw: Mapping, scale: int, where: str) -> dict[int, int]:
    """json+ bins of fio 2.2.12 to 2.19: keyed by bucket index, constants alongside."""
    consts = {}
    for key in _PLAT_KEYS:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ParseError(f"{where}.bins: index-keyed bins need {key}, got {quote(value)}")
        consts[key] = value
    bits, val, nr = (consts[k] for k in _PLAT_KEYS)
    if val != 1 << bits or bits > 16 or nr > 1 << 20:
        raise ParseError(
            f"{where}.bins: FIO_IO_U_PLAT_BITS {bits}, _VAL {val}, _NR {nr} are not fio's layout"
        )
    bins: dict[int, int] = {}
    for key, count in raw.items():
        if key in consts:
            continue
        try:
            idx = int(key)
        except ValueError:
            raise ParseError(f"{where}.bins: bin {_quote(key)!r} is not an index") from None
        if not 0 <= idx < nr:
            raise ParseError(f"{where}.bins: index {idx} is outside 0..{nr - 1}")
        number = _int(count, f"{where}.bins[{key}]")
        if number > 0:
            value = plat_idx_to_val(idx, bits, val) * scale
            bins[value] = bins.get(value, 0) + number
    return bins


def _int_keys(raw: Mapping) -> list[int]:
    """The bin keys as integers when every key is a plain decimal integer; [] (or a list
    of another length) when some key is not, for `_bins`' key-by-key path to judge.

    With orjson, the keys are decoded as one JSON array of numbers (a C loop instead of
    an `int()` call per bin: most of the bins' cost). JSON's integer syntax is a subset
    of what `int()` takes (no '+', no leading zeros, no '_', no spaces inside, no other
    digits): a key outside it fails or decodes to something other than one int per key,
    and falls back to `int()`, key by key, which gives what it always gave.
    """
    if _orjson is not None:
        try:
            values = _orjson.loads("[" + ",".join(raw) + "]")
        except ValueError:  # orjson.JSONDecodeError is a ValueError
            pass
        else:
            if len(values) == len(raw) and set(map(type, values)) <= {int}:
                return values
    try:
        return list(map(int, raw))
    except ValueError:
        return []


def _sorted_bins(bins: Mapping[int, int]) -> Bins:
    ordered = sorted(bins.items())
    return Bins([value for value, _ in ordered], [count for _, count in ordered])


def _bins(clat: Mapping, scale: int, where: str) -> Bins:
    raw = clat.get("bins")
    if raw is None:
        return Bins([], [])
    if not isinstance(raw, Mapping):
        raise ParseError(f"{where}.bins: expected an object")
    if any(key in raw for key in _PLAT_KEYS):
        return _sorted_bins(_index_keyed_bins(raw, scale, where))
    # fast path, what fio writes: integer keys and integer counts, no key twice
    counts = list(raw.values())
    values = _int_keys(raw)
    if len(values) == len(counts) and set(map(type, counts)) <= {int}:
        if scale != 1:
            values = [value * scale for value in values]
        if counts and min(counts) <= 0:  # only counted bins are kept
            kept = [(v, n) for v, n in zip(values, counts, strict=True) if n > 0]
            values, counts = [v for v, _ in kept], [n for _, n in kept]
        if all(map(operator.lt, values, values[1:])):  # ascending, no key twice: fio's order
            return Bins(values, counts)
        if len(set(values)) == len(values):
            return _sorted_bins(dict(zip(values, counts, strict=True)))
    bins: dict[int, int] = {}
    for key, count in raw.items():
        try:
            value = int(key) * scale
        except ValueError:
            raise ParseError(f"{where}.bins: bin {_quote(key)!r} is not a number") from None
        number = _int(count, f"{where}.bins[{key}]")
        if number > 0:
            bins[value] = bins.get(value, 0) + number
    return _sorted_bins(bins)


def _listed(clat: Mapping, scale: int, where: str) -> dict[float, int]:
    raw = clat.get("percentile")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ParseError(f"{where}.percentile: expected an object")
    plain = _plain_listed(raw, scale)
    if plain is not None:
        return plain
    listed: dict[float, int] = {}
    for key, value in raw.items():
        try:
            p = float(key)
        except ValueError:
            continue
        listed[p] = _int(value, f"{where}.percentile[{key}]") * scale
    return listed


def _check_listed(clat: Mapping, where: str) -> dict[float, int]:
    """{} when `_listed` would return without a ParseError, else its ParseError: for a
    record whose percentiles come from its bins (the list is not read, only checked).
    A list of integers is quickly passed (no key is converted: `_listed` skips a key
    that is no number, and its integers raise nothing)."""
    raw = clat.get("percentile")
    if isinstance(raw, Mapping) and set(map(type, raw.values())) <= {int}:
        return {}
    _listed(clat, 1, where)
    return {}


def _plain_listed(raw: Mapping, scale: int) -> dict[float, int] | None:
    """`_listed` in one pass for what fio writes (every key a number, every value an
    integer); None for anything else, which `_listed` reads key by key."""
    values = list(raw.values())
    if not set(map(type, values)) <= {int}:
        return None
    try:
        ps = list(map(float, raw))
    except ValueError:  # a key that is no percentile: _listed skips it
        return None
    if scale != 1:
        values = [value * scale for value in values]
    return dict(zip(ps, values, strict=True))


def _falls(listed: Mapping[float, int]) -> bool:
    """Whether a percentile list has a value below that of a lower percentile (fio's
    values are a histogram's: they never fall as the percentile rises)."""
    values = [listed[p] for p in sorted(listed)]
    return any(map(operator.gt, values, values[1:]))


def _has_samples(clat: Mapping, bins: Bins, where: str) -> bool:
    """Did fio record completion-latency samples? (It writes zeros when it has none.)"""
    if "N" in clat:  # fio 3.18+
        return _int(clat["N"], f"{where}.N") > 0
    if "bins" in clat:  # json+: the histogram total
        return bool(bins)
    zero = (clat.get("min"), clat.get("max"), clat.get("mean"))
    return not all(isinstance(v, int | float) and not isinstance(v, bool) and v == 0 for v in zero)


class _NoHost:
    pass


_NO_HOST = _NoHost()  # not client/server output: records carry no "host" key


def _direction_record(
    out: FioOutput,
    job: str,
    index: int,
    direction: str,
    stats: Mapping,
    error: int,
    host: str | None | _NoHost = _NO_HOST,
    where: str = "",
    total_latency_percentiles: bool = False,
) -> list[str]:
    """Append the direction's record (and histogram); return the standard percentiles
    that neither json+ bins nor fio's percentile list gave (the caller warns)."""
    where = where or f"jobs[{index}].{direction}"
    clat, scale, clat_where = _clat(stats, where)
    bins = _bins(clat, scale, clat_where)
    if (
        bins
        and "N" in clat
        and _bins_fit(bins)  # (else refused for the value no column holds: _check_columns)
        and sum(bins.counts) != _int(clat["N"], f"{clat_where}.N")
    ):
        # fio 3.33 writes this for group_reporting over jobs with and without
        # clat_percentiles: the bins hold some of the samples N counts
        out.warnings.append(
            f"job {quote(job)} (jobs[{index}]) {direction}: fio's json+ bins hold "
            f"{sum(bins.counts)} completion-latency samples, its N says {clat['N']}: the "
            "bins are not read (no percentile from them, no histogram)"
        )
        bins = Bins([], [])
    # fio's percentile list is read only without bins; with bins it is still checked
    listed = _listed(clat, scale, clat_where) if not bins else _check_listed(clat, clat_where)
    if listed and _falls(listed):
        out.warnings.append(
            f"job {quote(job)} (jobs[{index}]) {direction}: fio's percentile list falls "
            "as the percentile rises (fio's own inconsistent output): not read"
        )
        listed = {}
    if "io_bytes" in stats and "io_kbytes" in stats:  # fio 2.21+: bytes
        io_bytes = _int(stats["io_bytes"], f"{where}.io_bytes")
    elif "io_bytes" in stats:  # fio before 2.21: io_bytes is in KiB
        io_bytes = _int(stats["io_bytes"], f"{where}.io_bytes") * 1024
    else:
        io_bytes = _int(stats.get("io_kbytes", 0), f"{where}.io_kbytes") * 1024
    runtime = _int(stats.get("runtime", 0), f"{where}.runtime")
    if "bw_bytes" in stats:
        bw_bytes = _int(stats["bw_bytes"], f"{where}.bw_bytes")
    elif "io_bytes" in stats or "io_kbytes" in stats:
        # fio before 3.2 writes only bw, KiB/s truncated: computed as fio 3.2+ does
        bw_bytes = 1000 * io_bytes // runtime if runtime > 0 else 0
    else:
        bw_bytes = _int(stats.get("bw", 0), f"{where}.bw") * 1024
    mean = clat.get("mean")
    sampled = _has_samples(clat, bins, clat_where)
    if not sampled:
        out.warnings.append(
            f"job {quote(job)} (jobs[{index}]) {direction}: fio recorded no completion-latency "
            "samples; clat left null"
        )
        clat, bins, mean = {}, Bins([], []), None
    elif total_latency_percentiles:
        out.warnings.append(
            f"job {quote(job)} (jobs[{index}]) {direction}: fio {out.fio_version} lists total-latency "
            "(lat) percentiles under clat_ns for a job with lat_percentiles (or "
            "clat_percentiles=0); completion-latency percentiles left null"
        )
        bins = Bins([], [])
    record: dict[str, object] = {
        "job": job,
        "job_index": index,
        "direction": direction,
        "iops": _float(stats.get("iops", 0), f"{where}.iops"),
        "bw_bytes": bw_bytes,
        "io_bytes": io_bytes,
        "runtime_ms": runtime,
        "error": error,
        "clat_min_ns": _optional_int(clat, "min", clat_where, scale),
        "clat_max_ns": _optional_int(clat, "max", clat_where, scale),
        "clat_mean_ns": None if mean is None else _float(mean, f"{clat_where}.mean") * scale,
    }
    missing: list[str] = []
    if bins:
        found = _percentiles_of_sorted(bins.values, bins.counts, _PERCENTILE_VALUES)
        record.update(zip((key for key, _ in PERCENTILES), found, strict=True))
    elif not sampled or total_latency_percentiles:
        record.update((key, None) for key, _ in PERCENTILES)
    else:
        for key, p in PERCENTILES:
            record[key] = listed.get(p)
            if record[key] is None:
                missing.append(f"p{p:g}")
    if host is not _NO_HOST:
        record["host"] = host
    out.records.append(record)
    if bins:
        out.histograms.append((job, index, direction, bins))
    return missing


def parse_fio(text: str) -> FioOutput:
    """Parse fio's stdout (json or json+, fio 2.x and 3.x, local or --client output);
    ParseError with a one-line reason."""
    doc, around = _decode(text)
    jobs = doc.get("jobs")
    client = jobs is None and "client_stats" in doc
    if client:
        jobs = doc["client_stats"]
    if not isinstance(jobs, list):
        raise ParseError('fio JSON has no "jobs" array (not fio --output-format=json output?)')
    key = "client_stats" if client else "jobs"
    version = doc.get("fio version")
    out = FioOutput(warnings=around, fio_version=version if isinstance(version, str) else None)
    out.ended_ms = _epoch_ms(doc.get("timestamp_ms"))
    release = _release(out.fio_version)
    if not jobs:
        out.warnings.append("fio reported no jobs")
    grouped = _names_in_several_groups(jobs, out)
    for index, entry in enumerate(jobs):
        if not isinstance(entry, Mapping):
            raise ParseError(f"{key}[{index}]: expected an object")
        name = entry.get("jobname")
        if name in grouped:
            name = f"{name} (group {entry.get('groupid')})"
        if _unused_slot(entry):
            out.warnings.append(
                f"{key}[{index}]: fio's empty entry (no jobname, groupid -1, no I/O) left out: "
                "fio prints one when group_reporting is set on only some jobs of a group, "
                "or for a job with stats=0"
            )
            continue
        if not isinstance(name, str):
            raise ParseError(f"{key}[{index}]: no jobname")
        group = entry.get("groupid")
        if type(group) is int and 0 <= group < 2**31:
            out.groups[index] = group
        started = _epoch_ms(entry.get("job_start"))
        if started is not None and _job_option(entry, doc, "job_start_clock_id") in (None, "0"):
            out.started_ms[index] = started  # another clock's ms are not the host's time
        error = _int(entry.get("error", 0), f"{key}[{index}].error")
        host = _client_host(entry, name, f"{key}[{index}]") if client else _NO_HOST
        total_latency = release is not None and _lat_in_clat(release, entry, doc)
        before = len(out.records)
        unlisted: dict[str, list[str]] = {}  # direction -> percentiles left null
        for direction in DIRECTIONS:
            stats = entry.get(direction)
            if stats is None:
                continue
            where = f"{key}[{index}].{direction}"
            if not isinstance(stats, Mapping):
                raise ParseError(f"{where}: expected an object")
            if "total_ios" in stats:
                ios = _int(stats["total_ios"], f"{where}.total_ios")
            else:  # very old fio: no total_ios; did the direction move any bytes?
                ios = _int(stats.get("io_bytes", stats.get("io_kbytes", 0)), f"{where}.io_bytes")
            if ios > 0:
                missing = _direction_record(
                    out, name, index, direction, stats, error, host, where, total_latency
                )
                if missing:
                    unlisted[direction] = missing
        out.warnings.extend(_unlisted_notes(name, f"{key}[{index}]", host, unlisted))
        if error and len(out.records) == before:
            out.warnings.append(
                f"job {quote(name)} (jobs[{index}]) failed with fio error {error} and did no I/O"
            )
            rw = _job_option(entry, doc, "rw") or "read"
            directions = _RW_DIRECTIONS.get(rw.split(":")[0], ("read",))
            if "mixed" in entry:  # unified_rw_reporting: 1/mixed alone, or both beside read
                directions = (*directions, "mixed") if "read" in entry else ("mixed",)
            for direction in directions:
                record = _failed_record(name, index, direction, error)
                if host is not _NO_HOST:
                    record["host"] = host
                out.records.append(record)
        elif len(out.records) == before:
            # e.g. fio could not create the job's file: fio says error 0 (and exits 1)
            out.warnings.append(
                f"job {quote(name)} ({key}[{index}]) did no I/O, though fio reports no error for it"
            )
    _check_columns(out)
    return out


def _epoch_ms(value: object) -> int | None:
    """fio's timestamp_ms or job_start when it is a plausible epoch time in ms (2001 to
    2286), else None: it places the run in time only, so an odd one is dropped, never
    refused."""
    if type(value) is int and 10**12 <= value < 10**13:
        return value
    return None


# fio's groupid of a thread_stat no job was summed into (init_thread_stat sets -1; fio
# prints the uint32 as 4294967295)
_NO_GROUP = (-1, 2**32 - 1)


def _names_in_several_groups(jobs: Sequence[object], out: FioOutput) -> set[str]:
    """Job names fio reports in more than one group (its `groupid`): same-named jobs a
    `stonewall` ran one after the other (a block-size sweep), or `new_group` set apart.

    The warehouse adds up a slot's entries of one job name (fio_slot_metrics: the
    clones of `numjobs`, which share their job's group); entries of one name in
    separate groups are not those, so each such entry is named `NAME (group N)`."""
    groups: dict[str, set[int]] = {}
    for entry in jobs:
        if isinstance(entry, Mapping) and not _unused_slot(entry):
            name, group = entry.get("jobname"), entry.get("groupid")
            if isinstance(name, str) and isinstance(group, int) and not isinstance(group, bool):
                groups.setdefault(name, set()).add(group)
    several = {name for name, ids in groups.items() if len(ids) > 1}
    for name in sorted(several):
        ids = ", ".join(map(str, sorted(groups[name])))
        out.warnings.append(
            f"jobs named {quote(name)} ran in fio groups {ids} (stonewall or new_group): each "
            f"is reported as {quote(name + ' (group N)')}, not added to the others"
        )
    return several


def _unused_slot(entry: Mapping) -> bool:
    """A jobs[] entry fio prints for a thread_stat no job filled (stat.c __show_run_stats).

    fio counts one thread_stat per job without group_reporting and one per group for
    the jobs with it, then fills them walking the jobs, where a job with group_reporting
    joins the previous job's entry of its group and a job with stats=0 fills none: with
    group_reporting on only some jobs of a group (`--group_reporting` after the last
    `--name`, or in the last section of a job file), or with a stats=0 job, entries are
    left over at the end. They have groupid -1 and an empty name (fio 3.33 omits the
    key: its json.c drops empty strings), no job options and no I/O.
    """
    if entry.get("jobname") not in (None, "") or entry.get("groupid") not in _NO_GROUP:
        return False
    if "job options" in entry or entry.get("error", 0) != 0:
        return False
    for direction in DIRECTIONS:
        stats = entry.get(direction)
        if stats is None:
            continue
        if not isinstance(stats, Mapping) or stats.get("total_ios", 0) != 0:
            return False
        if stats.get("io_bytes", 0) != 0:
            return False
    return True


_RESULT_TYPES = {c.name: c.type for c in FIO_RESULTS.columns}
_BIN_TYPES = {c.name: c.type for c in FIO_LATENCY_BINS.columns}


def _check_columns(out: FioOutput) -> None:
    """Every figure fits its warehouse column (iofleet.results.schema.value_problem): a value
    no table can hold (an integer beyond int64, a lone surrogate in a job name) is a
    ParseError naming the field, never a row that breaks a load."""
    for job, index, direction, hist in out.histograms:
        # a histogram's values are sorted ascending: its first and last are min and max;
        # its counts are integers >= 1: if their sum fits a bigint, every count does
        if _bins_fit(hist):
            continue
        low, high = hist.values[0], hist.values[-1]
        firsts_lasts = (
            ("bin_ns", (low, high)),
            ("count", (min(hist.counts), max(hist.counts))),
        )
        for column, ends in firsts_lasts:
            for value in ends:
                problem = value_problem(_BIN_TYPES[column], value)
                if problem:
                    raise ParseError(
                        f"job {_quote(ascii(job))} (jobs[{index}]) {direction}: "
                        f"json+ bin {column}: {problem}"
                    )
    for record in out.records:
        for key, value in record.items():
            if value is None or _plainly_fits(_RESULT_TYPES[key], value):
                continue
            problem = value_problem(_RESULT_TYPES[key], value)
            if problem:
                raise ParseError(
                    f"job {_quote(ascii(record['job']))} (jobs[{record['job_index']}]) "
                    f"{record['direction']}: {key}: {problem}"
                )


def _bins_fit(hist: Bins) -> bool:
    """A quick yes for bins whose values and counts fit their columns (ascending values:
    the first and last are min and max; counts >= 1: if their sum fits, each does)."""
    return (
        _plainly_fits(_BIN_TYPES["bin_ns"], hist.values[0])
        and _plainly_fits(_BIN_TYPES["bin_ns"], hist.values[-1])
        and _plainly_fits(_BIN_TYPES["count"], sum(hist.counts))
    )


def _plainly_fits(type_: str, value: object) -> bool:
    """A quick yes for the usual value (an int in range, a finite float, ASCII text);
    False leaves the verdict to schema.value_problem."""
    if type(value) is int:  # not bool
        limits = INT_RANGES.get(type_)
        return limits is not None and limits[0] <= value <= limits[1]
    if type(value) is float:
        return type_ == "double" and math.isfinite(value)
    if type(value) is str:
        return type_ == "string" and value.isascii()
    return False


def _unlisted_notes(
    job: str, where: str, host: str | None | _NoHost, unlisted: Mapping[str, list[str]]
) -> list[str]:
    """The warnings for percentiles left null: one per direction, but one for the whole
    All clients sum when fio printed no percentile list for it at all (it never does)."""
    if host is None and unlisted and all(len(m) == len(PERCENTILES) for m in unlisted.values()):
        return [
            f"job {quote(job)} ({where}): fio's sum over the servers lists no latency "
            f"percentiles; its {' and '.join(unlisted)} percentiles left null"
        ]
    return [
        f"job {quote(job)} ({where}) {direction}: no json+ clat bins and fio's percentile "
        f"list lacks {', '.join(missing)}; left null"
        for direction, missing in unlisted.items()
    ]


def _client_host(entry: Mapping, name: str, where: str) -> str | None:
    """The server (hostname:port) of a `client_stats` entry; None for the All clients sum
    (whose hostname fio fills with the last client's)."""
    if name == ALL_CLIENTS and "job options" not in entry:
        return None
    hostname = entry.get("hostname")
    if not isinstance(hostname, str) or not hostname:
        raise ParseError(f"{where}: a fio --client entry without a hostname")
    port = entry.get("port")
    return (
        f"{hostname}:{port}" if isinstance(port, int) and not isinstance(port, bool) else hostname
    )


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
    for options in (entry.get("job options"), _global_options(entry, doc)):
        if isinstance(options, Mapping) and isinstance(options.get(name), str):
            return str(options[name])
    return None


def _global_options(entry: Mapping, doc: Mapping) -> Mapping:
    """The `global options` that applied to a job. fio --client output talking to several
    servers holds one object per server (with its hostname and port: client.c)."""
    options = doc.get("global options")
    if isinstance(options, Mapping):
        return options
    if isinstance(options, list):
        for server in options:
            if (
                isinstance(server, Mapping)
                and server.get("hostname") == entry.get("hostname")
                and server.get("port") == entry.get("port")
            ):
                return server
    return {}


_RELEASE = re.compile(r"fio-(\d+)\.(\d+)")


def _release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a "fio version" string: "fio-3.12" and "fio-3.12-8-gabcdef" give
    (3, 12); None when it says no release."""
    m = _RELEASE.match(version or "")
    return (int(m[1]), int(m[2])) if m else None


def _flag(value: str) -> bool:
    """A boolean fio option's value as fio reads it (an integer, "0x" hex allowed; a bare
    option is on)."""
    m = re.match(r"\s*(0[xX][0-9a-fA-F]+|\d+)", value)
    return int(m[1], 0) != 0 if m else True


def _lat_in_clat(release: tuple[int, int], entry: Mapping, doc: Mapping) -> bool:
    """Are this job's clat_ns `percentile` (and fio 3.1's json+ `bins`) total latency?

    fio 3.1 added lat_percentiles: with it on, fio puts total-latency samples in the
    histogram its percentiles come from, and until fio 3.12 writes that percentile list
    under clat_ns (fio 3.1 its json+ bins too; fio 3.2 moved the bins to lat_ns, fio
    3.13 the list). fio 3.1-3.12 (init.c) also turn lat_percentiles on when only
    clat_percentiles=0 is given. Job options override the global ones.
    """
    if not (3, 0) <= release <= (3, 12):
        return False
    options: dict[str, object] = {}
    for scope in (_global_options(entry, doc), entry.get("job options")):
        if isinstance(scope, Mapping):
            options.update(scope)
    lat, clat = options.get("lat_percentiles"), options.get("clat_percentiles")
    if isinstance(lat, str):
        return _flag(lat)
    if isinstance(clat, str):
        return not _flag(clat)
    return False


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
