"""App timing artifacts (written by the agent)."""

from __future__ import annotations

import json

import pytest

from iofleet.results.parsers import ParseError, detect_kind
from iofleet.results.parsers.app import parse_app

GOOD = {
    "app": "c-build",
    "phase": "run",
    "exit_code": 0,
    "wall_seconds": 12.5,
    "started_at": "2026-11-21T05:12:00.000001Z",
    "finished_at": "2026-11-21T05:12:12.500001Z",
    "stdout_tail": "ok\n",
    "stderr_tail": "",
}


def _text(**changes: object) -> str:
    doc = dict(GOOD)
    for key, value in changes.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return json.dumps(doc)


def test_record_has_timing_fields_only() -> None:
    assert parse_app(_text()) == {
        "app": "c-build",
        "phase": "run",
        "exit_code": 0,
        "wall_seconds": 12.5,
        "started_at": "2026-11-21T05:12:00.000001Z",
        "finished_at": "2026-11-21T05:12:12.500001Z",
    }


def test_offset_timestamps_are_normalised_to_utc() -> None:
    record = parse_app(_text(started_at="2026-11-21T07:12:00+02:00"))

    assert record["started_at"] == "2026-11-21T05:12:00.000000Z"


def test_failed_run_keeps_its_exit_code() -> None:
    assert parse_app(_text(exit_code=3))["exit_code"] == 3


def test_unknown_phase_is_rejected() -> None:
    with pytest.raises(ParseError, match="phase: must be one of populate, run"):
        parse_app(_text(phase="build"))


def test_missing_wall_seconds_is_rejected() -> None:
    with pytest.raises(ParseError, match="wall_seconds"):
        parse_app(_text(wall_seconds=None))


def test_boolean_exit_code_is_rejected() -> None:
    with pytest.raises(ParseError, match="exit_code"):
        parse_app(_text(exit_code=True))


def test_bad_timestamp_is_rejected() -> None:
    with pytest.raises(ParseError, match="finished_at: not an ISO-8601 timestamp"):
        parse_app(_text(finished_at="yesterday"))


@pytest.mark.parametrize("field", ["finished_at", "phase"])
def test_a_long_bad_value_is_clipped_in_the_error(field: str) -> None:
    # an app artifact is written by the agent, but read back from a tree anyone can edit
    with pytest.raises(ParseError) as caught:
        parse_app(_text(**{field: "y\u2028" * 3000}))

    message = str(caught.value)
    assert "(6000 characters)" in message and len(message) < 200, message  # before: 18 KB
    assert "\u2028" not in message  # escaped, as every quoted value is


def test_truncated_json_is_a_one_line_error() -> None:
    with pytest.raises(ParseError) as caught:
        parse_app(_text()[:40])

    assert "\n" not in str(caught.value)


def test_app_timing_is_detected_as_app() -> None:
    assert detect_kind(_text()) == "app"
