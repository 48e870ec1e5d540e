"""App timing artifacts written by the agent (`w{WI:02d}-app-{app}.json`).

Stdlib only.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

from iofleet.quote import quote
from iofleet.results.parsers import ParseError
from iofleet.results.schema import value_problem

PHASES = ("populate", "run")


def format_utc(moment: datetime) -> str:
    """ISO-8601 UTC with microseconds and a `Z`, the agent's timestamp spelling."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _timestamp(doc: dict, key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise ParseError(f"{key}: missing or not a string")
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return format_utc(moment)
    except (ValueError, OverflowError):  # OverflowError: year 1 east of UTC
        raise ParseError(f"{key}: not an ISO-8601 timestamp: {quote(value)}") from None


def parse_app(text: str) -> dict:
    """app, phase, exit_code, wall_seconds, started_at, finished_at (UTC `...Z` strings)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"invalid app timing JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise ParseError(f"app timing JSON: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise ParseError("app timing JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise ParseError("app timing JSON is not an object")
    app = doc.get("app")
    if not isinstance(app, str) or not app:
        raise ParseError("app: missing or not a string")
    phase = doc.get("phase")
    if phase not in PHASES:
        raise ParseError(f"phase: must be one of {', '.join(PHASES)}, got {quote(phase)}")
    exit_code = doc.get("exit_code")
    if isinstance(exit_code, bool) or not isinstance(exit_code, int):
        raise ParseError("exit_code: missing or not an integer")
    problem = value_problem("int", exit_code)  # what app_runs.exit_code holds
    if problem:
        raise ParseError(f"exit_code: {problem}")
    wall = doc.get("wall_seconds")
    try:
        seconds = math.nan if isinstance(wall, bool) else float(wall)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not isinstance(wall, int | float) or not math.isfinite(seconds) or seconds < 0:
        raise ParseError("wall_seconds: missing or not a finite non-negative number")
    started_at = _timestamp(doc, "started_at")
    finished_at = _timestamp(doc, "finished_at")
    return {
        "app": app,
        "phase": phase,
        "exit_code": exit_code,
        "wall_seconds": seconds,
        "started_at": started_at,
        "finished_at": finished_at,
    }
