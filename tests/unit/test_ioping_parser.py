"""ioping -J parser, against fixtures made by the real ioping 1.3 (tests/fixtures/ioping/regenerate.sh)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from iofleet.results.parsers import ParseError, detect_kind, parse_file
from iofleet.results.parsers.ioping import no_timed_request, parse_ioping, percentile_linear
from tests.ioping_lines import ioping_statistics, requests_by_lines, stats_by_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ioping"


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _stat(name: str) -> dict:
    return next(e["stat"] for e in json.loads(_fixture(name)) if "stat" in e)


def _request(number: int, time_ns: int, operation: str = "read", ignored: bool = False) -> dict:
    return {
        "timestamp": 1795238402.0 + number,
        "io": {
            "request": number,
            "operation": operation,
            "size": 4096,
            "time": time_ns,
            "ignored": ignored,
        },
    }


def test_warmup_request_is_dropped() -> None:
    out = parse_ioping(_fixture("read-c21.json"))

    assert [r["request"] for r in out.requests] == list(range(2, 22))
    assert out.ignored_requests == 1


def test_request_rows_match_ioping_own_statistics() -> None:
    # given ioping's own stat object, computed over the non-warm-up requests
    stat = _stat("read-c21.json")

    out = parse_ioping(_fixture("read-c21.json"))

    assert len(out.requests) == stat["count"]
    assert sum(r["time_ns"] for r in out.requests) == stat["time"]
    assert sum(r["size_bytes"] for r in out.requests) == stat["size"]


def test_request_rows_carry_operation_size_and_timestamp() -> None:
    row = parse_ioping(_fixture("read-c21.json")).requests[0]

    assert set(row) == {"request", "operation", "size_bytes", "time_ns", "ts"}
    assert row["operation"] == "read"
    assert row["size_bytes"] == 4096
    assert row["ts"] > 1.7e9


def test_write_mode_requests_are_writes() -> None:
    out = parse_ioping(_fixture("write-c11.json"))

    assert {r["operation"] for r in out.requests} == {"write"}
    assert out.summary()["operation"] == "write"
    assert out.summary()["requests"] == 10


def test_summary_extremes_equal_ioping_min_and_max() -> None:
    stat = _stat("read-c21.json")

    summary = parse_ioping(_fixture("read-c21.json")).summary()

    assert summary["lat_p0_ns"] == stat["min"]
    assert summary["lat_p100_ns"] == stat["max"]


def test_summary_percentiles_match_statistics_inclusive_quantiles() -> None:
    # statistics.quantiles(method="inclusive") is linear interpolation, numpy's default
    out = parse_ioping(_fixture("read-c21.json"))
    cuts = statistics.quantiles([r["time_ns"] for r in out.requests], n=100, method="inclusive")

    summary = out.summary()

    for key, p in (("lat_p50_ns", 50), ("lat_p75_ns", 75), ("lat_p90_ns", 90), ("lat_p98_ns", 98)):
        assert summary[key] == pytest.approx(cuts[p - 1], abs=1e-6), key


def test_summary_interpolates_between_requests() -> None:
    # given four timed requests of 10, 20, 30, 40 ns (and a slow warm-up)
    doc = [_request(1, 999, ignored=True)] + [
        _request(i + 2, t) for i, t in enumerate([40, 10, 30, 20])
    ]

    summary = parse_ioping(json.dumps(doc)).summary()

    assert summary == {
        "operation": "read",
        "requests": 4,
        "lat_p0_ns": 10,
        "lat_p50_ns": 25,
        "lat_p75_ns": 32.5,
        "lat_p90_ns": pytest.approx(37.0),
        "lat_p98_ns": pytest.approx(39.4),
        "lat_p100_ns": 40,
    }


def test_mixed_operations_are_named_together() -> None:
    doc = [_request(1, 5, ignored=True), _request(2, 10), _request(3, 20, operation="write")]

    assert parse_ioping(json.dumps(doc)).summary()["operation"] == "read+write"


def test_warmup_only_output_has_no_percentiles() -> None:
    summary = parse_ioping(_fixture("warmup-only-c1.json")).summary()

    assert summary["requests"] == 0
    assert summary["lat_p50_ns"] is None


def test_truncated_output_is_a_one_line_parse_error() -> None:
    with pytest.raises(ParseError) as caught:
        parse_ioping(_fixture("truncated.json"))

    assert "invalid ioping JSON at line" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_empty_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="empty ioping output"):
        parse_ioping("  \n")


def test_object_instead_of_array_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not an array"):
        parse_ioping('{"jobs": []}')


def test_request_without_time_is_a_parse_error() -> None:
    doc = [_request(1, 5, ignored=True), _request(2, 10)]
    del doc[1]["io"]["time"]

    with pytest.raises(ParseError, match=r"entry 1: io.time missing"):
        parse_ioping(json.dumps(doc))


def test_percentile_linear_rejects_empty_input() -> None:
    with pytest.raises(ValueError):
        percentile_linear([], 50)


def test_fixture_is_detected_as_ioping() -> None:
    assert detect_kind(_fixture("read-c21.json")) == "ioping"


def test_parse_file_yields_one_summary_record() -> None:
    records = list(parse_file(FIXTURES / "write-c11.json"))

    assert len(records) == 1
    assert records[0]["requests"] == 10


def test_interpolation_is_rounded_once() -> None:
    # float steps give 162000.00000000012 here (position 18.62 is not exact in binary)
    values = [0] * 18 + [100000, 200000]

    assert percentile_linear(values, 98) == 162000.0


# --- other ioping versions and option sets (tests/fixtures/ioping/versions/regenerate.sh
# builds ioping 0.9, 1.2, 1.3 and master from ioping's own repository and runs them)

VERSIONS = FIXTURES / "versions"


@pytest.mark.parametrize(
    "name",
    [
        "versions/v1.2/read-c4.json",  # Ubuntu 22.04's ioping: no localtime
        "versions/master/read-c4.json",  # io.offset and io.notice
        "versions/v1.3/json-p2-c5.json",  # -p 2: a stat object after every 2 timed requests
        "versions/v1.3/path-backslash-quote-c3.json",  # a path ioping prints unescaped
        "read-c21.json",
    ],
)
def test_rows_are_the_timed_requests_and_reproduce_ioping_statistics(name: str) -> None:
    # given the requests read straight off ioping's lines, and ioping's final stat object
    text = _fixture(name)
    printed = requests_by_lines(text)
    timed = [(r["request"], r["size"], r["time"]) for r in printed if not r["ignored"]]

    out = parse_ioping(text)

    assert [(r["request"], r["size_bytes"], r["time_ns"]) for r in out.requests] == timed
    assert out.ignored_requests == len(printed) - len(timed) == 1
    # ioping's total statistics are exactly those of the rows
    total = stats_by_lines(text)[-1]
    assert ioping_statistics([r["time_ns"] for r in out.requests]) == total
    summary = out.summary()
    assert (summary["lat_p0_ns"], summary["lat_p100_ns"]) == (total["min"], total["max"])


def test_iopings_warnings_inside_its_json_are_not_part_of_it() -> None:
    # given real ioping output saved with its stderr (`2>&1`) on a file cut to 0 bytes
    # mid-run: each read after the cut returns nothing and ioping's warning about it
    # lands after that request's closing brace (not valid JSON as saved)
    text = _fixture("file-shrunk-mid-run-with-stderr.json")
    assert "}ioping: request returned less than expected: 0\n," in text
    printed = requests_by_lines(text)
    timed = [(r["request"], r["size"], r["time"]) for r in printed if not r["ignored"]]
    # when
    out = parse_ioping(text)
    # then the rows are ioping's timed requests, and ioping's total statistics theirs
    assert [(r["request"], r["size_bytes"], r["time_ns"]) for r in out.requests] == timed
    assert ioping_statistics([r["time_ns"] for r in out.requests]) == stats_by_lines(text)[-1]
    # and the empty reads are ignored as failed (size 0), as ioping leaves them out
    failed = sum(r["ignored"] and r["size"] == 0 for r in printed)
    assert failed > 0 and out.ignored["failed"] == failed


def test_periodic_stat_objects_do_not_replace_the_total() -> None:
    out = parse_ioping(_fixture("versions/v1.3/json-p2-c5.json"))

    assert out.stat is not None
    assert out.stat["count"] == len(out.requests) == 4


def test_ioping_1_2_json_without_localtime_is_read() -> None:
    out = parse_ioping(_fixture("versions/v1.2/read-c4.json"))

    assert [r["request"] for r in out.requests] == [2, 3, 4]
    assert all(r["ts"] > 1.7e9 for r in out.requests)


@pytest.mark.parametrize(
    ("name", "ignored"),
    [
        ("versions/v1.3/nowait-c3.json", {"failed": 3}),  # size 0, no notice in 1.3
        ("versions/master/nowait-c3.json", {"EAGAIN": 3}),
        ("warmup-only-c1.json", {"warm-up or outside -t/-T": 1}),
    ],
)
def test_ignored_requests_are_counted_by_reason(name: str, ignored: dict) -> None:
    out = parse_ioping(_fixture(name))

    assert out.requests == []
    assert out.ignored == ignored


def test_no_timed_request_names_the_reasons_not_only_the_warm_up() -> None:
    out = parse_ioping(_fixture("versions/master/nowait-c3.json"))

    assert no_timed_request(out) == "no timed request, 3 ignored by ioping (3 EAGAIN)"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("versions/v1.3/batch-p2-c7.txt", "ioping -B statistics, no per-request times"),
        ("versions/v0.9/batch-c4.txt", "ioping -B statistics, no per-request times"),
        ("versions/v1.3/human-c3.txt", "ioping human-readable output"),
        ("versions/v0.9/human-c3.txt", "ioping human-readable output"),
        ("versions/v1.3/quiet-c3.txt", "ioping human-readable output"),
        ("versions/v1.3/json-quiet-c3.json", "ioping -J statistics only, no per-request times"),
    ],
)
def test_other_ioping_outputs_are_refused_with_their_reason(name: str, message: str) -> None:
    path = FIXTURES / name
    assert detect_kind(path.read_text()) == "ioping"

    with pytest.raises(ParseError) as caught:
        list(parse_file(path))

    assert str(caught.value).startswith(f"{path}: {message}")
    assert "\n" not in str(caught.value)


def test_a_cut_short_output_with_an_unquoted_path_says_it_was_cut_short() -> None:
    text = _fixture("versions/v1.3/path-backslash-quote-c3.json")
    cut = text[: text.index('"io": {', text.index('"io": {') + 1)]  # inside the 2nd request

    with pytest.raises(ParseError) as caught:
        parse_ioping(cut)

    # the end of the text, not the path on line 5 that ioping did not escape
    assert str(caught.value).startswith(
        f"invalid ioping JSON at line {cut.rstrip().count(chr(10)) + 1} "
    )
    assert "escape" not in str(caught.value)


def test_an_interrupted_request_is_not_a_timed_row() -> None:
    # hand-edited real output: no engine makes pread return EINTR on demand. ioping 1.3
    # prints it as a timed request of size -1 (ret_size), 1.2 as (unsigned long)-1
    doc = json.loads(_fixture("read-c21.json"))
    doc[3]["io"]["size"] = -1
    doc[4]["io"]["size"] = 2**64 - 1

    out = parse_ioping(json.dumps(doc))

    assert len(out.requests) == 18
    assert out.ignored == {"warm-up or outside -t/-T": 1, "EINTR": 2}


def test_a_nan_printed_by_ioping_in_its_statistics_is_read() -> None:
    # hand-edited real output: printf("%.0f") of a NaN mdev (the root of a variance
    # rounded below zero) prints -nan, which is not JSON
    text = re.sub(r'"mdev": \d+', '"mdev": -nan', _fixture("read-c21.json"))

    out = parse_ioping(text)

    assert len(out.requests) == 20
    assert out.stat is not None and out.stat["mdev"] is None


def _requests_text(*entries: dict, raw: tuple[str, str] | None = None) -> str:
    """A -J array of these entries; `raw` replaces a placeholder string with JSON text
    Python's json would not write (a number no double holds)."""
    text = json.dumps(list(entries), indent=2)
    if raw:
        text = text.replace(json.dumps(raw[0]), raw[1])
    return text


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        # ioping prints io.request as a long long; its column is an int
        ("request", 2**31, "entry 1: io.request: 2147483648 is outside the int range"),
        ("size", 2**63, "entry 1: io.size: 9223372036854775808 is outside the bigint range"),
        ("time", 2**64 - 2, "entry 1: io.time: 18446744073709551614 is outside the bigint"),
    ],
)
def test_a_request_field_no_column_holds_is_refused_by_name(
    field: str, value: int, says: str
) -> None:
    # given a request whose figure its ioping_requests column cannot hold (the load would
    # refuse the whole artifact after `iofleet import` had counted it as imported)
    bad = _request(2, 1000)
    bad["io"][field] = value

    with pytest.raises(ParseError, match=re.escape(says)):
        parse_ioping(_requests_text(_request(1, 900), bad))


@pytest.mark.parametrize(
    ("literal", "says"),
    [
        ("1" + "0" * 400, "entry 1: timestamp: an integer of 1329 bits is not a finite"),
        ("NaN", "entry 1: timestamp: nan is not a finite double"),
        ("Infinity", "entry 1: timestamp: inf is not a finite double"),
    ],
)
def test_a_timestamp_no_double_holds_is_a_parse_error_not_a_crash(literal: str, says: str) -> None:
    # given: float() of the first raised OverflowError out of the parser (the fuzzer's find)
    bad = _request(2, 1000)
    bad["timestamp"] = "PLACEHOLDER"

    with pytest.raises(ParseError, match=re.escape(says)):
        parse_ioping(_requests_text(_request(1, 900), bad, raw=("PLACEHOLDER", literal)))


def test_an_operation_that_is_not_utf8_text_is_refused() -> None:
    # given JSON's escape of a lone surrogate, which no string column (UTF-8) takes
    bad = _request(2, 1000)
    bad["io"]["operation"] = "\ud800"

    with pytest.raises(ParseError, match="entry 1: io.operation: not valid UTF-8"):
        parse_ioping(_requests_text(_request(1, 900), bad))


def test_a_missing_or_non_numeric_timestamp_leaves_ts_null() -> None:
    no_ts, text_ts = _request(1, 900), _request(2, 1000)
    del no_ts["timestamp"]
    text_ts["timestamp"] = "soon"

    out = parse_ioping(_requests_text(no_ts, text_ts))

    assert [r["ts"] for r in out.requests] == [None, None]
