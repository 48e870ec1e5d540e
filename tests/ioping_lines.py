"""ioping -J output read the way ioping writes it, for tests: no JSON decoder, no iofleet.

ioping prints each request and statistics object with one key per line
(ioping.c json_request/json_statistics). Reading those lines gives the figures
independently of iofleet's parser, even where ioping's text is not valid JSON.
"""

from __future__ import annotations

import math
import re

_IO_FIELD = re.compile(r'"(request|operation|size|time|ignored)": "?(-?\w+)"?')
_STAT_FIELD = re.compile(r'"(count|time|min|max|avg|mdev)": (\d+)')


def requests_by_lines(text: str) -> list[dict]:
    """Every request ioping printed: request, operation, size, time, ignored."""
    out = []
    for block in text.split('"io": {')[1:]:
        field = dict(_IO_FIELD.findall(block.split("}")[0]))
        out.append(
            {
                "request": int(field["request"]),
                "operation": field["operation"],
                "size": int(field["size"]),
                "time": int(field["time"]),
                "ignored": field["ignored"] == "true",
            }
        )
    return out


def stats_by_lines(text: str) -> list[dict]:
    """Every `stat` object ioping printed (one per -p period, the total last)."""
    return [
        {k: int(v) for k, v in _STAT_FIELD.findall(block.split("}")[0])}
        for block in text.split('"stat": {')[1:]
    ]


def ioping_statistics(times: list[int]) -> dict:
    """ioping's own finish_statistics over timed requests: sums, avg and mdev in
    double precision, printed with %.0f."""
    total = total2 = 0.0
    for t in times:
        total += t
        total2 += float(t) * t
    avg = total / len(times)
    return {
        "count": len(times),
        "time": int(f"{total:.0f}"),
        "min": min(times),
        "max": max(times),
        "avg": int(f"{avg:.0f}"),
        "mdev": int(f"{math.sqrt(total2 / len(times) - avg * avg):.0f}"),
    }
