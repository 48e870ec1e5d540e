"""ioping `-J` output: one row per timed request, plus an exact percentile summary.

ioping 1.2 and later print a JSON array (ioping.c, json_request/json_statistics):
one object per request (`io`: request, operation, size, time in ns, `ignored`;
1.3 adds `localtime`, later ioping `io.offset` and `io.notice`) and an object
with `stat` and `load` after every `-p`/`-P` period and at the end (the last one
is the total). Ignored requests (the warm-up, `-a`; outside `-t`/`-T`; failed
ones, size 0) are dropped, as ioping itself does in its statistics.

ioping prints its strings with printf("%s") unescaped: a path or mount source
holding a backslash or a quote, or a `-I` time format, makes the text invalid
JSON. Those lines are re-quoted from the literal text between the quotes, which
is what ioping wrote. Its other outputs (human-readable lines, `-B` statistics,
`-J` with `-q`/`-R`: statistics only) hold no exact per-request times and are
refused with a one-line reason; a failed run saved with its stderr (only
`ioping: ...` lines) is refused with ioping's last message. Saved with `2>&1`,
ioping's warnings can land inside its JSON, after a request's closing brace:
they are removed (decision 56).

Stdlib only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from iofleet.results.parsers import ParseError
from iofleet.results.schema import IOPING_REQUESTS, value_problem

# the warehouse column each request field goes to: a value it cannot hold is refused
# here, never a row that breaks a load (ioping prints io.request as a long long; the
# column is an int, which 2^31 requests, some 600 GB of -J output, would outgrow)
_COLUMN_TYPES = {c.name: c.type for c in IOPING_REQUESTS.columns}

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
    # requests ioping leaves out of its statistics (`"ignored": true`), by reason:
    # its `notice` when printed (warmup, too fast, too slow, EIO, ...), else
    # "failed" for a request that moved no bytes, else "warm-up or outside -t/-T"
    ignored: dict[str, int] = field(default_factory=dict)
    stat: dict | None = None

    @property
    def ignored_requests(self) -> int:
        return sum(self.ignored.values())

    def ignored_text(self) -> str:
        """'1 warmup', '2 warm-up or outside -t/-T, 1 EIO'."""
        return ", ".join(f"{n} {reason}" for reason, n in self.ignored.items())

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


# a line ioping prints as `"key": "%s"` (json_request, json_statistics)
_STRING_LINE = re.compile(
    r'^(?P<head>[ \t]*"(?:path|fstype|device|localtime|notice)": ")(?P<raw>.*)(?P<tail>",?[ \t]*)$'
)
# printf("%f") of a NaN or infinity (e.g. mdev as the root of a tiny negative variance)
_NON_FINITE = re.compile(r'^(?P<head>[ \t]*"\w+": )-?(?:nan|inf)(?P<tail>,?[ \t]*)$', re.IGNORECASE)
# how each of ioping's messages on stderr starts: err()/warn() put the program's name
# (as it was run, maybe a path) first
_SAYS = r"(?:\S*/)?ioping: "
# ioping's warnings on stderr ("ioping: nowait without cached or direct I/O is supposed
# to fail"), printed before the JSON when both streams went to one file
_LEADING_WARNINGS = re.compile(rf"(?:{_SAYS}[^\n]*\n)+(?=\[)")
# one message of ioping's err()/errx() (or warn), as a failed run prints it on stderr
_MESSAGE_LINE = re.compile(rf"{_SAYS}\S")
# ioping's messages inside its JSON, in a file holding stdout and stderr (`2>&1`): stdout
# goes out when ioping sleeps between requests, so a warnx ("request returned less than
# expected") lands just after a request's closing brace, or starts a line
_MESSAGE_IN_JSON = re.compile(rf"(?:(?<=\}})|^){_SAYS}[^\n]*", re.MULTILINE)

# `ioping -B`: valid sum iops speed min avg max mdev count load_time (1.0 and later, ns);
# ioping 0.9: requests sum iops speed min avg max mdev (us); %.0f of a NaN is nan
_FIGURE = r"(?:\d+|-?nan|-?inf)"
_BATCH_LINE = re.compile(rf"^{_FIGURE}(?: {_FIGURE}){{7}}(?: {_FIGURE} {_FIGURE})?$", re.IGNORECASE)
_HUMAN_LINE = re.compile(r"request=\d+ time=|ioping statistics ---|^min/avg/max/mdev = ")
_NOT_JSON = {
    "batch": "ioping -B statistics, no per-request times",
    "human": "ioping human-readable output, its times rounded for display",
}

# io.size of a request pread/pwrite failed with EINTR: ioping 1.3 prints ret_size -1
# (and times it as a request), 1.2 prints it as an unsigned long
_INTERRUPTED_SIZES = (-1, 2**64 - 1)


def non_json_kind(text: str) -> str | None:
    """'batch' or 'human' when text is ioping's raw statistics or human-readable output,
    'json' for -J output after ioping's warnings, 'error' for ioping's own messages
    alone (a failed run saved with its stderr)."""
    stripped = text.strip()
    if _LEADING_WARNINGS.match(stripped):
        return "json"
    lines = [line.strip() for line in stripped[:65536].splitlines()[:50] if line.strip()]
    if lines and all(_MESSAGE_LINE.match(line) for line in lines):
        return "error"
    if lines and all(_BATCH_LINE.match(line) for line in lines):
        return "batch"
    if any(_HUMAN_LINE.search(line) for line in lines):
        return "human"
    return None


def _requote(text: str) -> str:
    """ioping's JSON with its unescaped strings escaped and non-finite numbers as null."""
    lines = []
    for line in text.split("\n"):
        m = _STRING_LINE.match(line)
        if m:
            line = m["head"] + json.dumps(m["raw"], ensure_ascii=False)[1:-1] + m["tail"]
        else:
            m = _NON_FINITE.match(line)
            if m:
                line = m["head"] + "null" + m["tail"]
        lines.append(line)
    return "\n".join(lines)


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # ioping's messages removed (each leaves its line, maybe empty) and its strings
        # re-quoted: the same lines, so a problem left (the output cut short, as when
        # ioping stopped on an error) keeps its line number
        repaired = _requote(_MESSAGE_IN_JSON.sub("", text))
        if repaired == text:
            raise
    return json.loads(repaired)


def _decode(text: str) -> list:
    stripped = text.strip()
    if not stripped:
        raise ParseError("empty ioping output")
    warnings = _LEADING_WARNINGS.match(stripped)
    messages = []
    if warnings:
        messages = warnings[0].splitlines()
        stripped = stripped[warnings.end() :]
    kind = non_json_kind(stripped) if not stripped.startswith("[") else None
    if kind == "error":  # ioping failed before printing its JSON: its last message says why
        last = stripped.splitlines()[-1]
        raise ParseError(f"ioping printed no JSON, only its message: {_quote(last)}")
    if kind in _NOT_JSON:
        raise ParseError(
            f"{_NOT_JSON[str(kind)]}: iofleet reads ioping -J output (ioping 1.2 or later)"
        )
    try:
        doc = _loads(stripped)
    except json.JSONDecodeError as exc:
        # ioping stopped on an error (err(3, "request failed: ...")) with its JSON unfinished:
        # its last message, before or inside the JSON, says why
        messages += _MESSAGE_IN_JSON.findall(stripped)
        why = f" (ioping's last message: {_quote(messages[-1])})" if messages else ""
        raise ParseError(
            f"invalid ioping JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{why}"
        ) from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise ParseError(f"ioping JSON: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise ParseError("ioping JSON: nested too deeply") from None
    if not isinstance(doc, list):
        raise ParseError("ioping JSON is not an array (expected ioping -J output)")
    return doc


def _quote(message: str) -> str:
    message = message.strip()
    return message if len(message) <= 200 else message[:197] + "..."


def _int_field(io: dict, key: str, where: str, column: str) -> int:
    value = io.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}: io.{key} missing or not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParseError(f"{where}: io.{key} is not a finite number")
    if value < 0:
        raise ParseError(f"{where}: io.{key} is negative")
    problem = value_problem(_COLUMN_TYPES[column], int(value))
    if problem:
        raise ParseError(f"{where}: io.{key}: {problem}")
    return int(value)


def _timestamp(entry: dict, where: str) -> float | None:
    """The request's unix time, None when ioping printed none (or no number)."""
    ts = entry.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return None
    problem = value_problem(_COLUMN_TYPES["ts"], ts)  # 1e400, NaN: no double holds it
    if problem:
        raise ParseError(f"{where}: timestamp: {problem}")
    return float(ts)


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
            reason = _ignored_reason(io)
            out.ignored[reason] = out.ignored.get(reason, 0) + 1
            continue
        if io.get("size") in _INTERRUPTED_SIZES:  # no I/O completed, no latency to keep
            out.ignored["EINTR"] = out.ignored.get("EINTR", 0) + 1
            continue
        operation = io.get("operation")
        if not isinstance(operation, str) or not operation:
            raise ParseError(f"{where}: io.operation missing")
        problem = value_problem(_COLUMN_TYPES["operation"], operation)
        if problem:  # a lone surrogate (JSON's "\ud800"): not UTF-8, no string column takes it
            raise ParseError(f"{where}: io.operation: {problem}")
        out.requests.append(
            {
                "request": _int_field(io, "request", where, "request"),
                "operation": operation,
                "size_bytes": _int_field(io, "size", where, "size_bytes"),
                "time_ns": _int_field(io, "time", where, "time_ns"),
                "ts": _timestamp(entry, where),
            }
        )
    if not out.requests and not out.ignored:
        if out.stat is not None:
            raise ParseError(
                "ioping -J statistics only, no per-request times (ioping ran with -q, -B or -R)"
            )
        raise ParseError("no ioping requests in the output")
    return out


def no_timed_request(out: IopingOutput) -> str:
    """Why an output that parsed yields no request row, in one line."""
    n = out.ignored_requests
    text = f"no timed request, {n} ignored by ioping ({out.ignored_text()})"
    if n == 1:
        text += ": ioping ignores its first request, use -c 2 or more"
    return text


def _ignored_reason(io: dict) -> str:
    notice = io.get("notice")
    if isinstance(notice, str) and notice:
        return notice
    if io.get("size") == 0:  # ioping 1.3: RWF_NOWAIT's EAGAIN; later: any error under -E
        return "failed"
    return "warm-up or outside -t/-T"
