"""fio JSON / JSON+ parser, on fixtures made by real fio runs (tests/fixtures/fio/make_fixtures.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from iofleet.cli import main
from iofleet.results.parsers import ParseError, detect_kind
from iofleet.results.parsers.fio import (
    BIN_KEYS,
    PERCENTILES,
    RECORD_KEYS,
    parse_fio,
    percentile_from_bins,
    percentiles_from_bins,
)
from iofleet.results.schema import FIO_LATENCY_BINS, FIO_RESULTS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
JSONPLUS = sorted(p.name for p in FIXTURES.glob("jsonplus-*.json"))
ALL_GOOD = sorted(p.name for p in FIXTURES.glob("json*.json"))


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _doc(name: str) -> dict:
    text = _text(name)
    return json.loads(text[text.index("{") :])


def _one_line_error(text: str) -> str:
    with pytest.raises(ParseError) as info:
        parse_fio(text)
    message = str(info.value)
    assert message and "\n" not in message
    return message


# --- contract with the schema -------------------------------------------------


def test_record_keys_are_the_fio_results_columns() -> None:
    assert set(RECORD_KEYS) <= set(FIO_RESULTS.column_names)
    record = parse_fio(_text("jsonplus-numjobs-grouped.json")).records[0]
    assert tuple(record) == RECORD_KEYS


def test_bin_keys_are_the_latency_bin_columns() -> None:
    assert set(BIN_KEYS) <= set(FIO_LATENCY_BINS.column_names)
    assert tuple(parse_fio(_text("jsonplus-two-jobs.json")).bins[0]) == BIN_KEYS


@pytest.mark.parametrize("name", ALL_GOOD)
def test_fixtures_are_detected_as_fio(name: str) -> None:
    assert detect_kind(_text(name)) == "fio"


# --- the percentile rule: reproduces fio's own figures ---------------------------


@pytest.mark.parametrize("name", JSONPLUS)
def test_bin_rule_reproduces_fio_percentiles_exactly(name: str) -> None:
    # given every direction with a histogram in a real json+ output
    checked = 0
    for job in _doc(name)["jobs"]:
        for direction in ("read", "write", "trim"):
            clat = job[direction]["clat_ns"]
            if not clat.get("bins"):
                continue
            bins = {int(k): v for k, v in clat["bins"].items()}
            # when / then: each percentile fio printed is what the bin rule gives
            for key, expected in clat["percentile"].items():
                assert percentile_from_bins(bins, float(key)) == expected, (name, key)
                checked += 1
    assert checked > 0


def test_bin_rule_smallest_bin_reaching_the_ceiling() -> None:
    # 10 samples: p50 needs 5 (reached at 200), p51 needs ceil(5.1) = 6 (reached at 300)
    bins = {100: 2, 200: 3, 300: 4, 400: 1}
    assert percentile_from_bins(bins, 50) == 200
    assert percentile_from_bins(bins, 51) == 300
    assert percentile_from_bins(bins, 90) == 300
    assert percentile_from_bins(bins, 100) == 400


def _fio_long_double_percentile(bins: dict[int, int], p: float) -> int:
    """fio's calc_clat_percentiles (stat.c) for one percentile, ported literally: the first
    bin whose running sum is >= (long double) p / 100.0 * N."""
    threshold = np.longdouble(p) / np.longdouble(100.0) * np.longdouble(sum(bins.values()))
    running = 0
    for value in sorted(bins):
        running += bins[value]
        if np.longdouble(running) >= threshold:
            return value
    raise AssertionError("no bin reaches the threshold")


@pytest.mark.parametrize("total", [33_000, 66_000, 132_000, 2_100_000])
def test_bin_rule_threshold_is_exact_like_fios_long_double(total: int) -> None:
    # given a histogram whose 99.9% point falls exactly between two bins: in doubles
    # 99.9 / 100.0 * 33000 rounds to 32967.0, but fio computes in long double, where
    # the value (of the double 99.9) stays above 32967: fio needs sample 32968
    below = round(0.999 * total)
    bins = {100: below, 200: total - below}
    expected = _fio_long_double_percentile(bins, 99.9)
    assert expected == 200
    # when / then
    assert percentile_from_bins(bins, 99.9) == expected
    assert percentiles_from_bins(bins, [50.0, 99.9]) == [100, expected]


def test_bin_rule_agrees_with_fios_long_double_on_every_total_up_to_20000() -> None:
    # every warehouse percentile, many totals, the bin edge at the percentile's sample:
    # the sample fio needs is the sample iofleet needs
    for _, p in PERCENTILES:
        for total in range(2, 20_001, 7):
            edge = min(max(round(p * total / 100), 1), total - 1)
            bins = {1: edge, 2: total - edge}
            assert percentile_from_bins(bins, p) == _fio_long_double_percentile(bins, p), (p, total)


def test_bin_rule_accepts_pairs_and_ignores_empty_bins() -> None:
    assert percentile_from_bins([(300, 1), (100, 0), (200, 1)], 50) == 200


def test_bin_rule_without_samples_is_none() -> None:
    assert percentile_from_bins({}, 50) is None


@pytest.mark.parametrize("name", JSONPLUS)
def test_all_percentiles_in_one_call_reproduce_fio(name: str) -> None:
    # given every direction with a histogram and fio's own list of percentiles
    for job in _doc(name)["jobs"]:
        for direction in ("read", "write", "trim"):
            clat = job[direction]["clat_ns"]
            if not clat.get("bins"):
                continue
            listed = clat["percentile"]
            # when all of them are asked for at once, highest first
            keys = sorted(listed, key=float, reverse=True)
            found = percentiles_from_bins(clat["bins"].items(), [float(k) for k in keys])
            # then each answer is fio's figure, in the order asked
            assert found == [listed[k] for k in keys], (name, job["jobname"], direction)


def test_all_percentiles_in_one_call_follow_the_rule_past_the_total() -> None:
    bins = {100: 2, 200: 3, 300: 4, 400: 1}
    assert percentiles_from_bins(bins, [90, 50, 51, 100, 120]) == [300, 200, 300, 400, 400]


def test_all_percentiles_without_samples_are_none() -> None:
    assert percentiles_from_bins({100: 0}, [50, 99]) == [None, None]


def test_json_plus_percentiles_come_from_bins_not_the_list() -> None:
    # given fio's default list, which has neither 75 nor 98
    doc = _doc("jsonplus-randrw-default-percentiles.json")
    assert "75.000000" not in doc["jobs"][0]["read"]["clat_ns"]["percentile"]
    # when
    record = parse_fio(_text("jsonplus-randrw-default-percentiles.json")).records[0]
    # then all schema percentiles are filled from the bins
    assert all(record[key] is not None for key, _ in PERCENTILES)


def test_json_plus_percentiles_match_the_listed_ones() -> None:
    doc = _doc("jsonplus-numjobs-grouped.json")
    listed = doc["jobs"][0]["write"]["clat_ns"]["percentile"]
    record = parse_fio(_text("jsonplus-numjobs-grouped.json")).records[0]
    assert record["clat_p75_ns"] == listed["75.000000"]
    assert record["clat_p99_9_ns"] == listed["99.900000"]
    assert record["clat_p99_99_ns"] == listed["99.990000"]


def test_plain_json_percentiles_come_from_the_list() -> None:
    doc = _doc("json-randread.json")
    listed = doc["jobs"][0]["read"]["clat_ns"]["percentile"]
    out = parse_fio(_text("json-randread.json"))
    assert out.bins == []
    assert out.records[0]["clat_p98_ns"] == listed["98.000000"]
    assert out.records[0]["clat_p50_ns"] == listed["50.000000"]


def test_plain_json_percentile_missing_from_list_is_null_not_interpolated() -> None:
    # given plain json whose list lacks 75 (fio's default list) and has no bins
    doc = _doc("json-randread.json")
    clat = doc["jobs"][0]["read"]["clat_ns"]
    del clat["percentile"]["75.000000"]
    # when
    out = parse_fio(json.dumps(doc))
    # then
    record = out.records[0]
    assert record["clat_p75_ns"] is None
    assert record["clat_p50_ns"] == clat["percentile"]["50.000000"]
    assert any("p75" in w and "null" in w for w in out.warnings)


# --- record shapes ----------------------------------------------------------------


def test_record_fields_come_from_the_direction() -> None:
    doc = _doc("jsonplus-numjobs-grouped.json")
    write = doc["jobs"][0]["write"]
    record = parse_fio(_text("jsonplus-numjobs-grouped.json")).records[0]
    assert record["job"] == "grouped" and record["job_index"] == 0
    assert record["direction"] == "write"
    assert record["iops"] == write["iops"]
    assert record["bw_bytes"] == write["bw_bytes"]
    assert record["io_bytes"] == write["io_bytes"]
    assert record["runtime_ms"] == write["runtime"]
    assert record["clat_min_ns"] == write["clat_ns"]["min"]
    assert record["clat_max_ns"] == write["clat_ns"]["max"]
    assert record["clat_mean_ns"] == write["clat_ns"]["mean"]
    assert record["error"] == 0


def test_numjobs_grouped_is_one_record() -> None:
    out = parse_fio(_text("jsonplus-numjobs-grouped.json"))
    assert [(r["job"], r["job_index"], r["direction"]) for r in out.records] == [
        ("grouped", 0, "write")
    ]


def test_numjobs_separate_is_one_record_per_clone() -> None:
    out = parse_fio(_text("jsonplus-numjobs-separate.json"))
    assert [(r["job"], r["job_index"]) for r in out.records] == [("separate", 0), ("separate", 1)]


def test_two_jobs_in_one_file_are_separate_records() -> None:
    out = parse_fio(_text("jsonplus-two-jobs.json"))
    assert [(r["job"], r["job_index"], r["direction"]) for r in out.records] == [
        ("steady_write", 0, "write"),
        ("burst_read", 1, "read"),
    ]


def test_mixed_job_gives_one_record_per_direction() -> None:
    out = parse_fio(_text("jsonplus-randrw-default-percentiles.json"))
    assert [r["direction"] for r in out.records] == ["read", "write"]


def test_directions_without_ios_are_skipped() -> None:
    out = parse_fio(_text("jsonplus-numjobs-grouped.json"))
    assert {r["direction"] for r in out.records} == {"write"}


def test_bins_sum_to_the_sample_count_per_record() -> None:
    doc = _doc("jsonplus-two-jobs.json")
    out = parse_fio(_text("jsonplus-two-jobs.json"))
    for record in out.records:
        total = sum(
            b["count"]
            for b in out.bins
            if (b["job_index"], b["direction"]) == (record["job_index"], record["direction"])
        )
        assert total == doc["jobs"][record["job_index"]][record["direction"]]["clat_ns"]["N"]


def test_bins_are_sorted_and_non_empty() -> None:
    bins = parse_fio(_text("jsonplus-numjobs-grouped.json")).bins
    values = [b["bin_ns"] for b in bins]
    assert values == sorted(values) and all(b["count"] > 0 for b in bins)


def test_fio_version_is_kept() -> None:
    assert parse_fio(_text("json-randread.json")).fio_version == "fio-3.33"


def test_clean_output_has_no_warnings() -> None:
    assert parse_fio(_text("jsonplus-numjobs-grouped.json")).warnings == []


# --- errors, notes, junk ----------------------------------------------------------


def test_note_before_json_is_a_warning() -> None:
    out = parse_fio(_text("jsonplus-note-before.json"))
    assert len(out.records) == 1
    assert out.warnings[0].startswith("note: both iodepth >= 1 and synchronous I/O engine")


@pytest.mark.parametrize(
    ("name", "lines"),
    [
        ("versions/fio-3.36-client-server-2hosts.json", 8),  # `<server> ` job headers
        ("versions/fio-3.0-client-server-2hosts.json", 12),  # + probe replies, disk stats
        ("versions/fio-2.19-client-server.json", 2),
    ],
)
def test_what_fio_client_prints_beside_the_json_is_one_note(name: str, lines: int) -> None:
    text = _text(name)
    out = parse_fio(text)
    assert [w for w in out.warnings if "percentile" not in w] == [
        f"fio --client's text beside the JSON ({lines} lines) not read"
    ]
    # a message of fio's relayed from a server is still a warning of its own
    server_error = "<vm> fio: pid=12, err=2/file:filesetup.c:805, func=open, error=No such file"
    out = parse_fio(server_error + "\n" + text)
    assert server_error in out.warnings
    assert f"fio --client's text beside the JSON ({lines} lines) not read" in out.warnings


def test_a_long_line_beside_the_json_is_a_clipped_warning() -> None:
    # given a line nobody here recognises, 5,000 characters long, before fio's JSON
    line = "x" * 4000 + "tail of the line" + "y" * 984
    out = parse_fio(line + "\n" + _text("json-randread.json"))
    [warning] = [w for w in out.warnings if "percentile" not in w]
    assert len(warning) <= 200 and warning.startswith("xxx")
    assert warning.endswith("yyy (5000 characters)")


def test_failing_job_keeps_the_good_job_and_reports_the_failure() -> None:
    out = parse_fio(_text("jsonplus-failing-job.json"))
    assert [(r["job"], r["error"]) for r in out.records] == [("good", 0), ("missing", 2)]
    assert out.warnings[0].startswith("fio: pid=0, err=2/")
    assert "job 'missing' (jobs[1]) failed with fio error 2 and did no I/O" in out.warnings


def test_job_failing_before_any_io_keeps_its_error_code_with_zero_io() -> None:
    # given: a job that could not open its file (fio error 2, rw=read, no I/O)
    out = parse_fio(_text("jsonplus-failing-job.json"))
    # then: one record for the direction it was set to do, no latencies invented
    (failed,) = [r for r in out.records if r["job"] == "missing"]
    assert (failed["direction"], failed["error"], failed["io_bytes"], failed["iops"]) == (
        "read",
        2,
        0,
        0.0,
    )
    assert failed["clat_p50_ns"] is None and failed["clat_max_ns"] is None
    assert [b for b in out.bins if b["job"] == "missing"] == []


@pytest.mark.parametrize(
    ("rw", "directions"),
    [("randrw", ["read", "write"]), ("randwrite:8", ["write"]), ("trimwrite", ["trim", "write"])],
)
def test_failed_job_records_follow_its_rw_option(rw: str, directions: list[str]) -> None:
    doc = {
        "fio version": "fio-3.33",
        "jobs": [
            {
                "jobname": "j",
                "error": 5,
                "job options": {"rw": rw},
                "read": {"total_ios": 0},
                "write": {"total_ios": 0},
                "trim": {"total_ios": 0},
            }
        ],
    }
    out = parse_fio(json.dumps(doc))
    assert [(r["direction"], r["error"]) for r in out.records] == [(d, 5) for d in directions]


def test_job_failing_after_some_io_keeps_its_error_code() -> None:
    out = parse_fio(_text("jsonplus-enospc.json"))
    assert [(r["job"], r["direction"], r["error"]) for r in out.records] == [("fill", "write", 28)]
    assert out.records[0]["io_bytes"] > 0
    assert "err=28" in out.warnings[0]


def test_text_after_the_json_is_a_warning() -> None:
    out = parse_fio(_text("jsonplus-numjobs-grouped.json") + "fio: file hash not empty on exit\n")
    assert out.warnings == ["fio: file hash not empty on exit"]


def test_truncated_output_is_a_parse_error() -> None:
    message = _one_line_error(_text("truncated.json"))
    assert message.startswith("truncated fio JSON at line ")


@pytest.mark.parametrize("name", ["jsonplus-two-jobs.json", "jsonplus-note-before.json"])
def test_output_cut_anywhere_inside_the_document_is_called_truncated(name: str) -> None:
    # given real fio output cut at every byte inside its document (a copy that stopped
    # early: inside a string, a number, between keys)
    text = _text(name)
    start, end = text.index("{"), text.rindex("}")
    for cut in range(start + 1, end):
        # when / then one line saying so, whatever the cut
        message = _one_line_error(text[:cut])
        assert message.startswith("truncated fio JSON at line "), (cut, message)


def test_invalid_json_is_a_parse_error() -> None:
    message = _one_line_error('{\n  "jobs": [,]\n}\n')
    assert message.startswith("invalid fio JSON at line 2 column")


def test_empty_output_is_a_parse_error() -> None:
    assert _one_line_error("  \n") == "empty fio output"


def test_text_only_output_quotes_its_first_line() -> None:
    message = _one_line_error("fio: failed parsing directory=${TARGET}\nfio: job global dropped\n")
    assert message == (
        "no fio JSON document in the output (first line: 'fio: failed parsing directory=${TARGET}')"
    )


def test_json_without_jobs_is_a_parse_error() -> None:
    assert 'no "jobs" array' in _one_line_error('{"fio version": "fio-3.33"}')


def test_json_array_is_not_fio_output() -> None:
    assert "no fio JSON document" in _one_line_error("[1, 2]")


def test_malformed_job_entry_is_a_parse_error() -> None:
    assert _one_line_error('{"jobs": ["x"]}') == "jobs[0]: expected an object"


def test_non_numeric_field_is_a_parse_error() -> None:
    doc = _doc("json-randread.json")
    doc["jobs"][0]["read"]["iops"] = "fast"
    assert _one_line_error(json.dumps(doc)).startswith("jobs[0].read.iops: expected a number")


def test_empty_jobs_array_is_a_warning() -> None:
    out = parse_fio('{"fio version": "fio-3.33", "jobs": []}')
    assert out.records == [] and out.warnings == ["fio reported no jobs"]


def test_fio_2_usec_clat_is_converted_to_ns() -> None:
    # given an fio 2.x style direction: clat in usec, io_bytes in KiB, bw in KiB/s,
    # no bw_bytes
    doc = {
        "fio version": "fio-2.2.10",
        "jobs": [
            {
                "jobname": "old",
                "error": 0,
                "read": {
                    "io_bytes": 4,
                    "bw": 4,
                    "iops": 1.0,
                    "runtime": 1000,
                    "total_ios": 1,
                    "clat": {"min": 5, "max": 7, "mean": 6.0, "percentile": {"50.000000": 6}},
                },
            }
        ],
    }
    # when
    record = parse_fio(json.dumps(doc)).records[0]
    # then
    assert (record["clat_min_ns"], record["clat_p50_ns"], record["clat_mean_ns"]) == (
        5000,
        6000,
        6000.0,
    )
    assert (record["io_bytes"], record["bw_bytes"]) == (4096, 4096)


# --- iofleet parse ----------------------------------------------------------------


def test_cli_parse_prints_one_json_record_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(FIXTURES / "jsonplus-two-jobs.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["job"] for line in lines] == ["steady_write", "burst_read"]


def test_cli_parse_bad_file_is_one_line_and_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(FIXTURES / "truncated.json")]) != 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert "truncated fio JSON" in captured.err


@pytest.mark.parametrize(
    ("value", "reason"),
    [("12", "expected a number, got '12'"), (None, "expected a number, got None")],
)
def test_a_bad_percentile_list_is_refused_beside_json_plus_bins(value: object, reason: str) -> None:
    # given json+ output (its percentiles come from the bins) whose percentile list
    # holds a value that is no number: it is checked all the same, with fio's keys
    doc = _doc("jsonplus-two-jobs.json")
    (index, direction) = next(
        (i, d)
        for i, job in enumerate(doc["jobs"])
        for d in ("read", "write")
        if job[d]["total_ios"] and job[d]["clat_ns"].get("bins")
    )
    clat = doc["jobs"][index][direction]["clat_ns"]
    key = next(iter(clat["percentile"]))
    clat["percentile"][key] = value
    # and a key that is no percentile, with a bad value: skipped, as always
    clat["percentile"]["not-a-percentile"] = "x"
    assert _one_line_error(json.dumps(doc)) == (
        f"jobs[{index}].{direction}.clat_ns.percentile[{key}]: {reason}"
    )
    del clat["percentile"][key]
    assert parse_fio(json.dumps(doc)).records


# --- fio's own inconsistent output ------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "jsonplus"])
def test_fios_inconsistent_entry_gives_no_percentile_and_says_why(fmt: str) -> None:
    # given fio 3.33's entry for group_reporting over a job with clat_percentiles=0 and
    # one without: its json+ bins hold half the samples its N counts, and its percentile
    # list falls after p50 (p90 = 0)
    text = (
        FIXTURES / "inconsistent" / f"{fmt}-group-reporting-clat-percentiles-off.json"
    ).read_text()
    clat = _doc_after_notes(text)["jobs"][0]["read"]["clat_ns"]
    listed = [clat["percentile"][k] for k in ("50.000000", "90.000000")]
    assert listed[1] < listed[0]
    if fmt == "jsonplus":
        assert sum(clat["bins"].values()) * 2 == clat["N"]
    # when
    out = parse_fio(text)
    # then: no percentile read from either, no histogram, and a warning for each
    [record] = out.records
    assert [record[key] for key, _ in PERCENTILES] == [None] * len(PERCENTILES)
    assert out.histograms == []
    said = " | ".join(out.warnings)
    assert "fio's percentile list falls as the percentile rises" in said
    assert ("json+ bins hold 4096 completion-latency samples, its N says 8192" in said) == (
        fmt == "jsonplus"
    )
    # and the figures that do not depend on them are fio's
    assert record["iops"] == _doc_after_notes(text)["jobs"][0]["read"]["iops"]


def _doc_after_notes(text: str) -> dict:
    return json.loads(text[text.index("\n{") + 1 :])
