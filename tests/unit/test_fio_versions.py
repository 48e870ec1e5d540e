"""fio's JSON across its versions, on output made by those fio releases.

tests/fixtures/fio/versions/ holds unedited output of fio 2.1, 2.19, 2.20, 2.21, 3.0, 3.1, 3.12,
3.28 and 3.36 (built from fio's git tags; 3.28 and 3.36 are what Ubuntu 22.04 and 24.04
run on the fleet), 3.33 and 3.42; tests/fixtures/fio/published/ holds output
published by PerfKitBenchmarker (fio 2.1.4 and 2.17). Their READMEs say which fio
and which command made each file. Every check compares iofleet's figure with an
independent one in the same output (total_ios x block size, fio's own percentile
list, the per-host entries against the All clients total).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from iofleet.cli import main
from iofleet.results.parsers import ParseError
from iofleet.results.parsers.fio import (
    ALL_CLIENTS,
    CLIENT_RECORD_KEYS,
    PERCENTILES,
    RECORD_KEYS,
    FioOutput,
    _decode,
    parse_fio,
    percentiles_from_bins,
    plat_idx_to_val,
)
from tests.fio_reference import direct_figures

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
VERSIONS = FIXTURES / "versions"
PUBLISHED = FIXTURES / "published"
ALL_FILES = sorted(p.name for p in VERSIONS.glob("*.json")) + sorted(
    f"../published/{p.name}" for p in PUBLISHED.glob("*.json")
)


def _parse(name: str) -> FioOutput:
    return parse_fio((VERSIONS / name).read_text(encoding="utf-8"))


def _doc(name: str) -> dict:
    return _decode((VERSIONS / name).read_text(encoding="utf-8"))[0]


def _entries(doc: dict) -> list[dict]:
    return doc.get("jobs") or doc["client_stats"]


def test_every_fixture_has_a_readme_line() -> None:
    readme = (VERSIONS / "README.md").read_text() + (PUBLISHED / "README.md").read_text()
    for name in ALL_FILES:
        assert f"| {Path(name).name} |" in readme, name


@pytest.mark.parametrize("name", ALL_FILES)
def test_io_bytes_matches_fios_own_counts_in_every_version(name: str) -> None:
    # given output whose io_bytes is KiB (fio < 2.21) or bytes (2.21+)
    text = (VERSIONS / name).read_text(encoding="utf-8")
    doc = _decode(text)[0]
    # when
    out = parse_fio(text)
    # then each record's bytes agree with fio's bandwidth (KiB/s in every version:
    # bw = io_bytes x 1000 / runtime_ms / 1024, integer arithmetic) and, where fio
    # counts I/Os, with total_ios x the job's block size
    assert out.records, name
    for record in out.records:
        entry = _entries(doc)[record["job_index"]]
        stats = entry[record["direction"]]
        if stats["runtime"] > 0:
            per_s = record["io_bytes"] * 1000 / stats["runtime"]
            assert abs(per_s - stats["bw"] * 1024) <= 1024 * (2 + 1000 / stats["runtime"]), (
                name,
                record,
            )
        bs = _block_size(doc, entry)
        if "total_ios" in stats and bs:
            assert record["io_bytes"] == stats["total_ios"] * bs, (name, record)


@pytest.mark.parametrize("name", ALL_FILES)
def test_bw_bytes_is_fios_own_byte_rate_in_every_version(name: str) -> None:
    # fio 3.2+ writes bw_bytes = 1000 x io_bytes / runtime_ms (integer arithmetic; 0 for
    # no runtime) and bw = bw_bytes / 1024; older fio only bw, in KiB/s
    text = (VERSIONS / name).read_text(encoding="utf-8")
    doc = _decode(text)[0]
    for record in parse_fio(text).records:
        stats = _entries(doc)[record["job_index"]][record["direction"]]
        if "bw_bytes" in stats:
            assert record["bw_bytes"] == stats["bw_bytes"], (name, record)
            continue
        runtime = stats["runtime"]
        expected = 1000 * record["io_bytes"] // runtime if runtime > 0 else 0
        assert record["bw_bytes"] == expected, (name, record)
        assert record["bw_bytes"] // 1024 == stats["bw"], (name, record)  # fio's own KiB/s


def _block_size(doc: dict, entry: dict) -> int | None:
    for options in (entry.get("job options", {}), doc.get("global options", {})):
        if "bs" in options:
            return int(options["bs"].lower().removesuffix("k")) * 1024
    return None


def test_fio_before_2_21_writes_io_bytes_in_kib() -> None:
    # the same job on both sides of fio commit c12d597a ("correct json 'io_bytes' output")
    before = _doc("fio-2.20-json-randread.json")["jobs"][0]["read"]
    after = _doc("fio-2.21-json-randread.json")["jobs"][0]["read"]
    assert (before["io_bytes"], "io_kbytes" in before) == (64 * 4, False)
    assert (after["io_bytes"], after["io_kbytes"]) == (64 * 4096, 64 * 4)
    assert _parse("fio-2.20-json-randread.json").records[0]["io_bytes"] == 64 * 4096
    assert _parse("fio-2.21-json-randread.json").records[0]["io_bytes"] == 64 * 4096


def test_published_fio_2_17_output_reads_bytes_not_kib() -> None:
    # PerfKitBenchmarker's fio 2.17 run: 80,891 reads of 16 KiB
    out = parse_fio((PUBLISHED / "pkb-fio-2.17-hist.json").read_text())
    read = out.records[0]
    assert read["direction"] == "read" and read["io_bytes"] == 80891 * 16384


@pytest.mark.parametrize(
    "name",
    [
        "fio-2.19-jsonplus-randread.json",
        "fio-2.19-jsonplus-randread-direct.json",
        "fio-2.19-jsonplus-unified-randrw.json",
        "fio-2.19-client-server.json",
        "fio-2.20-jsonplus-randread.json",
        "fio-2.21-jsonplus-randread.json",
        "fio-3.0-jsonplus-randread.json",
        "fio-3.33-jsonplus-unified-both.json",
        *(
            f"fio-{v}-{shape}.json"
            for v in ("3.28", "3.36")
            for shape in (
                "jsonplus-randread",
                "jsonplus-unified-randrw",
                "jsonplus-unified-both",
                "jsonplus-lat-percentiles",
                "jsonplus-group-reporting",
                "jsonplus-job-randrw-4k-80-20-qd64",
            )
        ),
    ],
)
def test_json_plus_bins_reproduce_fios_own_percentiles(name: str) -> None:
    # given json+ bins keyed by index (fio <= 2.19), by usec value (2.20, 2.21) or ns (3.x)
    doc = _doc(name)
    out = _parse(name)
    assert out.histograms
    for job, index, direction, hist in out.histograms:
        stats = _entries(doc)[index][direction]
        clat, scale = (stats["clat_ns"], 1) if "clat_ns" in stats else (stats["clat"], 1000)
        listed = {float(p): v * scale for p, v in clat["percentile"].items() if float(p) > 0}
        # when the bins are read back with fio's percentile rule
        found = percentiles_from_bins(hist, list(listed))
        # then they give fio's own listed percentiles, and hold every sample
        assert found == list(listed.values()), (name, job, direction)
        assert sum(n for _, n in hist) == stats["total_ios"]


def test_index_keyed_bins_decode_above_the_linear_range() -> None:
    # the direct-I/O run has latencies past 2 x FIO_IO_U_PLAT_VAL usec, where buckets widen
    (_, _, _, hist) = _parse("fio-2.19-jsonplus-randread-direct.json").histograms[0]
    assert max(value for value, _ in hist) > 128 * 1000
    assert plat_idx_to_val(127, 6, 64) == 127
    assert plat_idx_to_val(128, 6, 64) == 129  # from 128 buckets are 2 wide: their middle
    assert plat_idx_to_val(129, 6, 64) == 131  # 128 + (1 + 0.5) x 2
    assert plat_idx_to_val(192, 6, 64) == 258  # 256 + 0.5 x 4


def test_index_keyed_bins_without_fios_constants_are_refused() -> None:
    doc = _doc("fio-2.19-jsonplus-randread.json")
    bins = doc["jobs"][0]["read"]["clat"]["bins"]
    bins["FIO_IO_U_PLAT_VAL"] = 100  # not 1 << FIO_IO_U_PLAT_BITS
    with pytest.raises(ParseError, match="not fio's layout"):
        parse_fio(json.dumps(doc))


def test_fio_3_12_lists_total_latency_percentiles_under_clat_ns() -> None:
    # the premise, in fio's own output: with lat_percentiles=1, fio 3.1 to 3.12 put the
    # percentile list under clat_ns, but it is the one its total-latency (lat_ns) bins
    # give (stat.c before fio commit e5eb6fbf, fio 3.13)
    doc = _doc("fio-3.12-jsonplus-lat-percentiles.json")
    stats = doc["jobs"][0]["read"]
    assert "bins" not in stats["clat_ns"] and "bins" in stats["lat_ns"]
    listed = {float(p): v for p, v in stats["clat_ns"]["percentile"].items()}
    assert percentiles_from_bins(stats["lat_ns"]["bins"].items(), list(listed)) == list(
        listed.values()
    )


@pytest.mark.parametrize(
    "name",
    [
        "fio-3.1-jsonplus-lat-percentiles.json",  # clat_ns holds lat's percentiles and bins
        "fio-3.12-jsonplus-lat-percentiles.json",  # clat_ns holds lat's percentiles
        "fio-3.12-json-lat-percentiles.json",
        "fio-3.12-json-clat-percentiles-off.json",  # clat_percentiles=0 turns lat's on
    ],
)
def test_total_latency_percentiles_are_never_reported_as_clat(name: str) -> None:
    # given fio 3.1-3.12 output of a job with total-latency percentiles
    out = _parse(name)
    (record,) = out.records
    # then its completion latency keeps fio's clat figures, its clat percentiles are null
    # (never lat's), no histogram is kept, and a warning says why
    clat = _doc(name)["jobs"][0]["read"]["clat_ns"]
    assert (record["clat_min_ns"], record["clat_max_ns"]) == (clat["min"], clat["max"])
    assert {record[key] for key, _ in PERCENTILES} == {None}
    assert not out.histograms
    assert any("total-latency" in w for w in out.warnings), out.warnings


def test_fio_3_12_without_lat_percentiles_keeps_its_clat_percentiles() -> None:
    doc = _doc("fio-3.12-jsonplus-randread.json")
    clat = doc["jobs"][0]["read"]["clat_ns"]
    (record,) = _parse("fio-3.12-jsonplus-randread.json").records
    assert record["clat_p50_ns"] == clat["percentile"]["50.000000"]
    assert record["clat_p99_ns"] == clat["percentile"]["99.000000"]


@pytest.mark.parametrize("name", sorted(p.name for p in VERSIONS.glob("*-unified-randrw.json")))
def test_unified_rw_reporting_gives_mixed_records(name: str) -> None:
    # fio 2.1 (json), 2.19, 2.20, 2.21, 3.0 (json and json+)
    doc = _doc(name)
    (record,) = _parse(name).records
    assert "read" not in doc["jobs"][0] and "mixed" in doc["jobs"][0]
    assert record["direction"] == "mixed"
    assert record["io_bytes"] == 256 * 1024  # 64 I/Os of 4 KiB, reads and writes together


def test_unified_both_gives_read_write_and_mixed() -> None:
    out = _parse("fio-3.33-jsonplus-unified-both.json")
    by_direction = {r["direction"]: r for r in out.records}
    assert sorted(by_direction) == ["mixed", "read", "write"]
    assert (
        by_direction["read"]["io_bytes"] + by_direction["write"]["io_bytes"]
        == by_direction["mixed"]["io_bytes"]
    )


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in VERSIONS.glob("*-no-clat.json")),
)
def test_a_direction_without_clat_samples_has_null_latency_not_zero(name: str) -> None:
    # given a job run with disable_clat=1: fio writes clat min/max/mean 0 and no bins
    out = _parse(name)
    (record,) = out.records
    # then the I/O is kept and every latency figure is null, with a warning saying why
    assert record["io_bytes"] == 64 * 4096
    latency = {k: v for k, v in record.items() if k.startswith("clat_")}
    assert set(latency.values()) == {None}
    assert not out.histograms
    assert any("no completion-latency samples" in w for w in out.warnings)


def test_a_sub_microsecond_minimum_is_still_a_measurement() -> None:
    # fio 2.1 reports usec: a 0 usec minimum beside a real mean is a sample, not "none"
    (record,) = parse_fio((VERSIONS / "fio-2.1-json-randread.json").read_text()).records
    assert record["clat_min_ns"] == 0 and record["clat_mean_ns"] > 0


@pytest.mark.parametrize("version", ["2.19", "3.0", "3.28", "3.33", "3.36"])
def test_client_server_output_gives_each_hosts_jobs_and_the_total(version: str) -> None:
    # given fio --client output from two runs against one server
    name = f"fio-{version}-client-server-2hosts.json"
    doc = _doc(name)
    # when
    out = _parse(name)
    # then one record per client_stats entry and direction, hosts named, the total last
    hosts = [r for r in out.records if r["job"] != ALL_CLIENTS]
    total = [r for r in out.records if r["job"] == ALL_CLIENTS]
    assert len(hosts) == 4 and len(total) == 2
    for record in out.records:
        assert tuple(record) == CLIENT_RECORD_KEYS
    port = doc["client_stats"][0]["port"]
    assert {r["host"] for r in hosts} == {f"127.0.0.1:{port}"}
    assert {r["host"] for r in total} == {None}
    for direction in ("read", "write"):
        per_host = sum(r["io_bytes"] for r in hosts if r["direction"] == direction)
        (all_clients,) = [r for r in total if r["direction"] == direction]
        assert all_clients["io_bytes"] == per_host == 2 * 64 * 4096
    # and fio's total, which lists no percentiles, is one warning, not one per direction
    about_total = [w for w in out.warnings if ALL_CLIENTS in w]
    assert about_total == [
        "job 'All clients' (client_stats[4]): fio's sum over the servers lists no latency "
        "percentiles; its read and write percentiles left null"
    ]


def test_local_output_records_carry_no_host_key() -> None:
    assert tuple(_parse("fio-3.0-json-randread.json").records[0]) == RECORD_KEYS


def test_fios_empty_entry_is_left_out_and_the_jobs_figures_kept() -> None:
    # given fio 3.42 output where group_reporting was given to the group's last job
    # only: fio sums job b into a's entry and prints a second, empty one (fio 3.42
    # writes its empty name as "", fio 3.33 leaves the key out: test_fio_real_output)
    name = "fio-3.42-jsonplus-group-reporting-last-job.json"
    doc = _doc(name)
    assert [(j["jobname"], j["groupid"]) for j in doc["jobs"]] == [("a", 0), ("", 2**32 - 1)]
    # when
    out = _parse(name)
    # then job a's entry gives its read and b's write, and the empty entry a warning
    a = doc["jobs"][0]
    assert [(r["job"], r["direction"], r["io_bytes"], r["iops"]) for r in out.records] == [
        ("a", d, a[d]["io_bytes"], a[d]["iops"]) for d in ("read", "write")
    ]
    assert [w for w in out.warnings if w.startswith("jobs[1]: fio's empty entry")]


def test_an_entry_without_a_jobname_that_did_io_is_still_refused() -> None:
    # given the same output with I/O in the empty entry, its name left out as fio 3.33
    # does: not fio's unfilled entry
    doc = _doc("fio-3.42-jsonplus-group-reporting-last-job.json")
    del doc["jobs"][1]["jobname"]
    doc["jobs"][1]["read"]["total_ios"] = 1
    with pytest.raises(ParseError, match=r"^jobs\[1\]: no jobname$"):
        parse_fio(json.dumps(doc))


def test_status_interval_output_is_refused_not_half_read(tmp_path: Path) -> None:
    text = (VERSIONS / "fio-3.0-json-randread.json").read_text()
    with pytest.raises(ParseError, match="2 fio JSON documents"):
        parse_fio(text + text)


def test_cli_parse_of_an_unsupported_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "two.json"
    text = (VERSIONS / "fio-3.0-json-randread.json").read_text()
    bad.write_text(text + text)
    assert main(["parse", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"{bad}: 2 fio JSON documents in one output (fio --status-interval, or several runs "
        "in one file); expected one"
    ]


def test_cli_parse_prints_mixed_and_client_records(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(VERSIONS / "fio-2.19-client-server.json")]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["job"], r["direction"]) for r in records] == [
        ("randread", "read"),
        ("randwrite", "write"),
        (ALL_CLIENTS, "read"),
        (ALL_CLIENTS, "write"),
    ]


def test_per_server_global_options_of_client_output_apply_to_that_servers_jobs() -> None:
    # fio's client.c writes "global options" as an array of per-server objects (each
    # with hostname and port) when it talks to several servers; made by hand from the
    # real fio 3.12 job entry: server A's [global] set lat_percentiles=1, B's did not
    doc = _doc("fio-3.12-json-lat-percentiles.json")
    [entry] = doc["jobs"]
    del entry["job options"]["lat_percentiles"]
    a = {**json.loads(json.dumps(entry)), "hostname": "10.0.0.1", "port": 8765}
    b = {**json.loads(json.dumps(entry)), "hostname": "10.0.0.2", "port": 8765}
    client = {
        "fio version": doc["fio version"],
        "global options": [
            {"hostname": "10.0.0.2", "port": 8765, "bs": "4k"},
            {"hostname": "10.0.0.1", "port": 8765, "lat_percentiles": "1"},
        ],
        "client_stats": [a, b],
    }
    by_host = {r["host"]: r for r in parse_fio(json.dumps(client)).records}
    assert by_host["10.0.0.1:8765"]["clat_p50_ns"] is None
    assert (
        by_host["10.0.0.2:8765"]["clat_p50_ns"]
        == entry["read"]["clat_ns"]["percentile"]["50.000000"]
    )


def test_before_fio_3_14_percentiles_follow_the_exact_rule_over_fios_bins() -> None:
    # fio before 3.14 compared the running count with p / 100.0 * N in double, built
    # with -ffast-math (fio's Makefile); where p x N / 100 is an integer it can then
    # list the next sample (fio commit 298d751e, "use long doubles to identify latency
    # percentiles"). Here 35 writes: fio lists p20 at the 8th sample, not the 7th.
    doc = _doc("fio-3.12-jsonplus-randrw.json")
    clat = doc["jobs"][0]["write"]["clat_ns"]
    values = sorted(int(v) for v in clat["bins"])
    counts = [clat["bins"][str(v)] for v in values]
    assert sum(counts) == 35
    seventh = next(v for i, v in enumerate(values) if sum(counts[: i + 1]) >= 7)
    assert clat["percentile"]["20.000000"] > seventh
    # iofleet keeps the exact rule over the bins it stores, so a record agrees with
    # every percentile recomputed from fio_latency_bins, whatever fio's version
    (write,) = (
        r for r in _parse("fio-3.12-jsonplus-randrw.json").records if r["direction"] == "write"
    )
    (hist,) = (
        h for _, _, d, h in _parse("fio-3.12-jsonplus-randrw.json").histograms if d == "write"
    )
    assert percentiles_from_bins(hist, [20.0])[0] == seventh
    assert write["clat_p50_ns"] == percentiles_from_bins(hist, [50.0])[0]
    assert write["clat_p90_ns"] == percentiles_from_bins(hist, [90.0])[0]


# --- the fleet's fio: Ubuntu 22.04's 3.28 and 24.04's 3.36 (iofleet/plan/hosts.py) ---

HOST_RELEASES = ("3.28", "3.36")
HOST_FILES = sorted(p.name for v in HOST_RELEASES for p in VERSIONS.glob(f"fio-{v}-*.json"))


def _fios_own(name: str) -> dict:
    """fio's JSON document read without the parser: fio's printer writes its `{` and `}`
    on lines of their own, whatever text (a server's `<host>` lines) comes before."""
    lines = (VERSIONS / name).read_text(encoding="utf-8").splitlines()
    first, last = lines.index("{"), len(lines) - 1 - lines[::-1].index("}")
    return json.loads("\n".join(lines[first : last + 1]))


def _nth_sample(bins: dict[int, int], p: float) -> int:
    """The smallest bin value whose running count reaches ceil(p / 100 x N) (p exact)."""
    need = max(1, math.ceil(Fraction(p) * sum(bins.values()) / 100))
    running = 0
    for value in sorted(bins):
        running += bins[value]
        if running >= need:
            return value
    raise AssertionError("no bin reaches the threshold")


# shapes of the fio whose JSON has each job's job_start (3.36, not 3.28)
JOB_START_SHAPES = {
    "json-two-groups-slot0.json",
    "json-two-groups-slot1.json",
    "json-job-start-clock-tai.json",
}


def test_each_host_release_has_its_shapes() -> None:
    for v in HOST_RELEASES:
        shapes = {n.removeprefix(f"fio-{v}-") for n in HOST_FILES if n.startswith(f"fio-{v}-")}
        if v == "3.36":
            assert shapes >= JOB_START_SHAPES
            shapes -= JOB_START_SHAPES
        assert {
            "json-randread.json",
            "jsonplus-randread.json",
            "jsonplus-unified-randrw.json",
            "jsonplus-unified-both.json",
            "jsonplus-no-clat.json",
            "jsonplus-lat-percentiles.json",
            "jsonplus-group-reporting.json",
            "client-server.json",
            "client-server-2hosts.json",
            "jsonplus-job-randrw-4k-80-20-qd64.json",
        } == shapes


@pytest.mark.parametrize("name", HOST_FILES)
def test_every_figure_of_the_hosts_fio_is_fios_own(name: str) -> None:
    # given output of the fio a fleet host runs, read as fio wrote it
    doc = _fios_own(name)
    assert doc["fio version"] == f"fio-{name.split('-')[1]}"
    client = "client_stats" in doc
    entries = doc["client_stats"] if client else doc["jobs"]
    want: dict[tuple[int, str], dict] = {}
    want_bins: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for i, entry in enumerate(entries):
        for direction in ("read", "write", "trim", "mixed"):
            stats = entry.get(direction)
            if not stats or stats["total_ios"] == 0:
                continue
            clat = stats["clat_ns"]
            sampled = clat["N"] > 0
            listed = {float(k): v for k, v in clat.get("percentile", {}).items()}
            bins = {int(k): n for k, n in clat.get("bins", {}).items() if n > 0}
            record = direct_figures(entry, stats)
            for key, p in PERCENTILES:
                if not sampled:
                    record[key] = None
                elif p in listed:  # fio 3.14+ lists the bin rule's own figure
                    record[key] = listed[p]
                else:  # p75, p98: not in fio's default list; from json+ bins or none
                    record[key] = _nth_sample(bins, p) if bins else None
            if client:
                all_clients = entry["jobname"] == ALL_CLIENTS
                record["host"] = None if all_clients else f"{entry['hostname']}:{entry['port']}"
            want[(i, direction)] = record
            if bins and sampled:
                want_bins[(i, direction)] = sorted(bins.items())
    # when iofleet parses it
    out = _parse(name)
    # then one record per entry and direction with I/O, each figure fio's, and the
    # histograms fio's bins, value for value
    got = {(r["job_index"], r["direction"]): r for r in out.records}
    assert sorted(got) == sorted(want)
    for key, record in want.items():
        assert {k: got[key][k] for k in record} == record, key
    assert {(i, d): list(h) for _, i, d, h in out.histograms} == want_bins


@pytest.mark.parametrize("version", HOST_RELEASES)
def test_the_hosts_fio_lists_total_latency_under_lat_ns_and_clat_is_kept(version: str) -> None:
    # fio 3.13+ with lat_percentiles=1: both lists, each under its own key
    name = f"fio-{version}-jsonplus-lat-percentiles.json"
    stats = _fios_own(name)["jobs"][0]["read"]
    assert "percentile" in stats["lat_ns"] and "bins" in stats["lat_ns"]
    assert stats["lat_ns"]["percentile"] != stats["clat_ns"]["percentile"]
    (record,) = _parse(name).records
    assert record["clat_p50_ns"] == stats["clat_ns"]["percentile"]["50.000000"]
    assert not any("total-latency" in w for w in _parse(name).warnings)


@pytest.mark.parametrize("version", HOST_RELEASES)
def test_the_hosts_fio_group_reporting_sums_the_jobs_into_one_record(version: str) -> None:
    doc = _fios_own(f"fio-{version}-jsonplus-group-reporting.json")
    (entry,) = doc["jobs"]  # numjobs=2, one entry
    (record,) = _parse(f"fio-{version}-jsonplus-group-reporting.json").records
    assert entry["read"]["total_ios"] == 2 * 64  # both jobs' 64 reads
    assert record["io_bytes"] == 2 * 64 * 4096


def test_each_jobs_start_is_fios_job_start_on_the_hosts_wall_clock() -> None:
    # fio 3.36 (Ubuntu 24.04's) writes job_start: when the job began its I/O loop
    for name in ALL_FILES:
        if name.startswith("../") or "clock-tai" in name:
            continue
        starts = {
            i: e["job_start"]
            for i, e in enumerate(_entries(_doc(name)))
            if e.get("job_start") and e.get("jobname")  # All clients (a sum) has 0
        }
        assert _parse(name).started_ms == starts, name
        # 3.36 is the first release here that writes it (3.42 too; 3.33 and older do not)
        assert bool(starts) == name.startswith(("fio-3.36", "fio-3.42")), name
    two = _parse("fio-3.36-json-two-groups-slot0.json")
    assert two.groups == {0: 0, 1: 1}
    a, b = two.started_ms[0], two.started_ms[1]
    assert b - a >= two.records[0]["runtime_ms"]  # b (stonewall) began after a ran


def test_a_job_start_on_another_clock_is_not_taken_for_the_hosts_time() -> None:
    # job_start_clock_id=11 (CLOCK_TAI): fio's job_start is that clock's milliseconds
    doc = _doc("fio-3.36-json-job-start-clock-tai.json")
    assert doc["jobs"][0]["job options"]["job_start_clock_id"] == "11"
    assert _parse("fio-3.36-json-job-start-clock-tai.json").started_ms == {}
