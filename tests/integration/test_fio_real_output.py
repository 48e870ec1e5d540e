"""fio's real output, across option sets, parsed by iofleet and checked against fio itself.

Each case runs this machine's fio (a fraction of a second, a 1 MiB file) and parses its
stdout with the parser the ingest and `iofleet parse` use. Every figure is then
checked against fio's own JSON, read here independently of the parser: the document
is cut out of stdout by its first and last lines (fio's printer writes `{` and `}` on
lines of their own) and each percentile is recomputed from fio's json+ bins by a
literal port of fio's `calc_clat_percentiles` (stat.c) in long double, which is also
checked against every figure of fio's own percentile list.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import duckdb
import numpy as np
import pytest

from iofleet.results.parsers.fio import PERCENTILES, parse_fio
from tests.fio_reference import direct_figures

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

SMALL = ["--size=1M", "--bs=4k", "--ioengine=psync", "--number_ios=64"]

# case -> fio arguments after --name/--filename (a job's own options follow its --name)
CASES: dict[str, list[str]] = {
    "json+": ["--rw=randread", "--output-format=json+"],
    "json": ["--rw=randread", "--output-format=json"],
    "json,normal": ["--rw=randread", "--output-format=json,normal"],
    "normal,json+": ["--rw=randread", "--output-format=normal,json+"],
    "terse,json+": ["--rw=randread", "--output-format=terse,json+"],
    # fio's progress lines end in a carriage return, the last one just before the "{"
    "json+,normal-with-eta": [
        "--rw=randread",
        "--number_ios=0",
        "--time_based",
        "--runtime=1",
        "--eta=always",
        "--eta-interval=250ms",
        "--output-format=json+,normal",
    ],
    "numjobs-grouped": [
        "--rw=randread",
        "--numjobs=3",
        "--group_reporting",
        "--output-format=json+",
    ],
    "numjobs-separate": ["--rw=randread", "--numjobs=2", "--output-format=json+"],
    "readwrite": ["--rw=readwrite", "--output-format=json+"],
    "randrw-unified-1": ["--rw=randrw", "--unified_rw_reporting=1", "--output-format=json+"],
    "randrw-unified-mixed": [
        "--rw=randrw",
        "--unified_rw_reporting=mixed",
        "--output-format=json+",
    ],
    "randrw-unified-both": ["--rw=randrw", "--unified_rw_reporting=both", "--output-format=json+"],
    "lat-percentiles": ["--rw=randrw", "--lat_percentiles=1", "--output-format=json+"],
    "clat-percentiles-off": ["--rw=randread", "--clat_percentiles=0", "--output-format=json+"],
    "only-lat-percentiles": [
        "--rw=randread",
        "--clat_percentiles=0",
        "--lat_percentiles=1",
        "--output-format=json+",
    ],
    "odd-percentile-list+": [
        "--rw=randread",
        "--percentile_list=99.995:1:50:99.9",
        "--output-format=json+",
    ],
    "odd-percentile-list": [
        "--rw=randread",
        "--percentile_list=99.995:1:50:99.9",
        "--output-format=json",
    ],
    "fsync": ["--rw=randwrite", "--fsync=4", "--output-format=json+"],
    "fdatasync": ["--rw=randwrite", "--fdatasync=4", "--output-format=json+"],
    "disable-clat": ["--rw=randwrite", "--disable_clat=1", "--output-format=json+"],
    # trims need a device that takes them: the null engine does
    "trim-null-engine": ["--ioengine=null", "--rw=randtrim", "--output-format=json+"],
    "trimwrite-unified-both": [
        "--ioengine=null",
        "--rw=trimwrite",
        "--unified_rw_reporting=both",
        "--output-format=json+",
    ],
    # ss_dur above the 1 s check interval: fio 3.36+ refuses ss_dur=1 when the job starts
    "steadystate": [
        "--rw=randread",
        "--number_ios=0",
        "--time_based",
        "--runtime=1",
        "--ss=iops:50%",
        "--ss_dur=2",
        "--output-format=json+",
    ],
    "stonewall-groups": [
        "--rw=randread",
        "--name=second",
        "--rw=randwrite",
        "--stonewall",
        "--name=third",
        "--rw=read",
        "--stonewall",
        "--output-format=json+",
    ],
    # group_reporting given after the last --name is that job's alone: fio sums the
    # second job into the first's entry and prints an empty one (no jobname, groupid -1)
    "group-reporting-on-the-last-job": [
        "--rw=randread",
        "--name=second",
        "--rw=randwrite",
        "--group_reporting",
        "--output-format=json+",
    ],
    # a job with stats=0 is counted but fills no entry: the same empty one is printed
    "a-job-with-stats-off": [
        "--rw=randread",
        "--stats=0",
        "--name=second",
        "--rw=randwrite",
        "--output-format=json",
    ],
}


def _run_fio(tmp_path: Path, args: list[str], succeed: bool = True) -> str:
    data = tmp_path / "data.bin"
    argv = ["fio", "--name=job", f"--filename={data}", *SMALL]
    # later jobs (--name=...) get the same file and size
    for arg in args:
        argv.append(arg)
        if arg.startswith("--name="):
            argv += [f"--filename={data}", *SMALL]
    # bytes, decoded here: text mode would turn fio's carriage returns into newlines
    result = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    stdout = result.stdout.decode("utf-8")
    assert (result.returncode == 0) == succeed, stdout + result.stderr.decode()
    return stdout


def fio_document(stdout: str) -> dict:
    """fio's JSON document, cut out by its own first and last lines (`{` ... `}`)."""
    lines = stdout.splitlines()
    first = lines.index("{")
    last = first + lines[first:].index("}")
    return json.loads("\n".join(lines[first : last + 1]), strict=False)


def fio_percentile(bins: Mapping[str, int], p: float) -> int:
    """fio's calc_clat_percentiles (stat.c) for one percentile over json+ bins:
    walk the bins in order, the first whose running sum reaches p / 100.0 * N
    (computed in long double, as fio does) gives the value."""
    ordered = sorted((int(value), count) for value, count in bins.items())
    nr = np.longdouble(sum(count for _, count in ordered))
    threshold = np.longdouble(p) / np.longdouble(100.0) * nr
    running = 0
    for value, count in ordered:
        running += count
        if np.longdouble(running) >= threshold:
            return value
    raise AssertionError("no bin reaches the threshold")


def _listed(clat: Mapping, p: float) -> int | None:
    value = clat.get("percentile", {}).get(f"{p:f}")  # fio's keys: "%f"
    return None if value is None else int(value)


def expected_records(doc: dict) -> dict[tuple[int, str], dict]:
    """What fio says, per (jobs[] index, direction) that did I/O."""
    expected = {}
    for index, job in enumerate(doc["jobs"]):
        for direction in ("read", "write", "trim", "mixed"):
            stats = job.get(direction)
            if not stats or stats["total_ios"] == 0:
                continue
            clat = stats["clat_ns"]
            sampled = clat["N"] > 0
            record = direct_figures(job, stats)
            for key, p in PERCENTILES:
                if not sampled:
                    record[key] = None
                elif "bins" in clat:
                    record[key] = fio_percentile(clat["bins"], p)
                else:
                    record[key] = _listed(clat, p)
            expected[(index, direction)] = record
    return expected


@pytest.fixture(scope="module")
def fio_output(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], str]:
    """A case's real fio stdout, fio run once per case in this module (each case in a
    directory of its own): the tests below read the same outputs."""
    base = tmp_path_factory.mktemp("fio-cases")
    outputs: dict[str, str] = {}

    def get(case: str) -> str:
        if case not in outputs:
            work = base / f"case{list(CASES).index(case)}"
            work.mkdir()
            outputs[case] = _run_fio(work, CASES[case])
        return outputs[case]

    return get


@pytest.mark.parametrize("case", CASES)
def test_every_figure_is_fios_own(case: str, fio_output: Callable[[str], str]) -> None:
    # given real fio output
    stdout = fio_output(case)
    doc = fio_document(stdout)
    # when
    out = parse_fio(stdout)
    # then one record per jobs[] entry and direction with I/O, holding fio's figures
    got = {(r["job_index"], r["direction"]): r for r in out.records}
    expected = expected_records(doc)
    assert sorted(got) == sorted(expected)
    for key, want in expected.items():
        assert {k: got[key][k] for k in want} == want, key
    # and each record's histogram is fio's bins, value for value
    hists = {(index, direction): list(bins) for _, index, direction, bins in out.histograms}
    want_hists = {
        key: sorted((int(v), n) for v, n in doc["jobs"][key[0]][key[1]]["clat_ns"]["bins"].items())
        for key in expected
        if "bins" in doc["jobs"][key[0]][key[1]]["clat_ns"]
        and doc["jobs"][key[0]][key[1]]["clat_ns"]["N"] > 0
    }
    assert hists == want_hists


@pytest.mark.parametrize("case", [c for c in CASES if "json+" in CASES[c][-1]])
def test_the_percentile_port_agrees_with_every_figure_fio_listed(
    case: str, fio_output: Callable[[str], str]
) -> None:
    doc = fio_document(fio_output(case))
    checked = 0
    for job in doc["jobs"]:
        for direction in ("read", "write", "trim", "mixed", "sync"):
            for kind in ("clat_ns", "lat_ns", "slat_ns"):
                lat = (job.get(direction) or {}).get(kind) or {}
                for key, value in lat.get("percentile", {}).items():
                    assert fio_percentile(lat["bins"], float(key)) == value, (direction, kind, key)
                    checked += 1
    assert checked or case in ("clat-percentiles-off", "disable-clat")


def test_a_tab_in_a_job_description_costs_nothing(tmp_path: Path) -> None:
    # fio's JSON printer escapes only '"' and '\\' (json.c): a tab stays a raw control
    # character inside the string, which strict JSON refuses
    stdout = _run_fio(
        tmp_path,
        ["--rw=randread", "--description=first\tsecond", "--output-format=json+"],
    )
    assert "first\tsecond" in stdout
    doc = fio_document(stdout)
    out = parse_fio(stdout)
    assert [(r["job_index"], r["direction"]) for r in out.records] == [(0, "read")]
    assert out.records[0]["iops"] == doc["jobs"][0]["read"]["iops"]


@pytest.mark.parametrize(
    ("unified", "directions"),
    [("0", ["read", "write"]), ("1", ["mixed"]), ("both", ["read", "write", "mixed"])],
)
def test_a_job_failing_before_any_io_keeps_its_error_in_fios_directions(
    unified: str, directions: list[str], tmp_path: Path
) -> None:
    # given a job fio cannot start (the sg engine on a regular file: EINVAL)
    stdout = _run_fio(
        tmp_path,
        [
            "--ioengine=sg",
            "--rw=randrw",
            f"--unified_rw_reporting={unified}",
            "--output-format=json",
        ],
        succeed=False,
    )
    job = fio_document(stdout)["jobs"][0]
    assert job["error"] != 0
    # then its error reaches one record per direction fio reports, with zero I/O
    out = parse_fio(stdout)
    assert [r["direction"] for r in out.records] == directions
    assert [d for d in ("read", "write", "mixed") if d in job and d in directions] == directions
    for record in out.records:
        assert (record["error"], record["io_bytes"], record["iops"]) == (job["error"], 0, 0.0)


def test_a_job_that_did_no_io_is_named_in_a_warning(tmp_path: Path) -> None:
    # given two jobs, the second unable to create its file's directory: fio reports it
    # with error 0 and no I/O in any direction (and exits 1)
    argv = ["fio", "--name=job", f"--filename={tmp_path / 'data.bin'}", *SMALL, "--rw=read"]
    argv += ["--name=broken", "--filename=/proc/no-such-dir/data", *SMALL, "--rw=read"]
    result = subprocess.run(
        [*argv, "--output-format=json+"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1, result.stderr
    stdout = result.stdout
    jobs = fio_document(stdout)["jobs"]
    assert [(j["jobname"], j["error"], j["read"]["total_ios"]) for j in jobs][1] == ("broken", 0, 0)
    # when
    out = parse_fio(stdout)
    # then the good job's figures are kept and the other is named, not silently dropped
    assert [(r["job"], r["direction"]) for r in out.records] == [("job", "read")]
    assert any("'broken' (jobs[1])" in w and "no I/O" in w for w in out.warnings), out.warnings


@pytest.mark.parametrize("case", ["group-reporting-on-the-last-job", "a-job-with-stats-off"])
def test_fios_empty_entry_is_left_out_with_a_warning(
    case: str, fio_output: Callable[[str], str]
) -> None:
    # given real fio output holding the empty entry fio prints for a thread_stat no job
    # filled (stat.c): no jobname (fio 3.33 drops empty strings), groupid -1, no I/O
    stdout = fio_output(case)
    jobs = fio_document(stdout)["jobs"]
    [empty] = [i for i, job in enumerate(jobs) if "jobname" not in job]
    assert jobs[empty]["groupid"] == 2**32 - 1
    # when
    out = parse_fio(stdout)
    # then it is named in a warning, and the jobs' figures are read (the other test)
    assert [w for w in out.warnings if w.startswith(f"jobs[{empty}]: fio's empty entry")]
    assert empty not in {r["job_index"] for r in out.records}


def _import(files: list[Path], out: Path, label: str) -> subprocess.CompletedProcess[str]:
    """`iofleet import FILES --out OUT --label LABEL` in a child interpreter."""
    argv = [sys.executable, "-m", "iofleet.cli", "import", *map(str, files)]
    return subprocess.run(
        [*argv, "--out", str(out), "--label", label],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_real_outputs_imported_together_land_in_the_warehouse_and_a_cut_one_costs_none(
    tmp_path: Path, fio_output: Callable[[str], str]
) -> None:
    # given real outputs of several option sets, and one of them cut short (a copy that
    # stopped early), each a file: one slot each
    cases = ["json,normal", "json+,normal-with-eta", "randrw-unified-both", "numjobs-grouped"]
    cases += ["odd-percentile-list", "lat-percentiles", "group-reporting-on-the-last-job"]
    files, expected = [], []
    for i, case in enumerate(cases):
        stdout = fio_output(case)
        path = tmp_path / f"{i}-{case}.json"
        path.write_bytes(stdout.encode())
        files.append(path)
        expected += list(expected_records(fio_document(stdout)).values())
    cut = tmp_path / "cut.json"
    cut.write_bytes(files[0].read_bytes()[:2000])
    out = tmp_path / "out"
    # when
    result = _import([*files, cut], out, "real")
    # then the cut file is refused in one line naming it, and the others are imported
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    refused = [line for line in lines if line.startswith(f"{cut}: ")]
    assert len(refused) == 1 and "truncated fio JSON" in refused[0], result.stderr
    assert not [line for line in lines if any(str(f) in line for f in files)], result.stderr
    # and every figure fio printed for the others is a row of the warehouse
    db = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    rows = db.execute(
        "SELECT job, iops, io_bytes, bw_bytes, clat_p50_ns, clat_p99_ns, clat_p99_9_ns "
        "FROM fio_results"
    ).fetchall()
    want = [
        (r["job"], r["iops"], r["io_bytes"], r["bw_bytes"])
        + (r["clat_p50_ns"], r["clat_p99_ns"], r["clat_p99_9_ns"])
        for r in expected
    ]
    assert sorted(rows, key=repr) == sorted(want, key=repr)
    assert db.execute("SELECT count(*) FROM slots").fetchone() == (len(files),)


def test_status_interval_output_is_refused_by_import_naming_the_option(tmp_path: Path) -> None:
    # given real fio output with --status-interval: an interim document a second, then
    # the final one, in one file
    stdout = _run_fio(
        tmp_path,
        ["--rw=randread", "--number_ios=0", "--time_based", "--runtime=2"]
        + ["--status-interval=1", "--output-format=json"],
    )
    path = tmp_path / "status.json"
    path.write_text(stdout)
    documents = stdout.count('"fio version"')
    assert documents >= 2
    # when
    result = _import([path], tmp_path / "out", "status")
    # then one line naming the file and the option, exit 2, nothing written
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{path}: holds {documents} fio JSON documents (fio --status-interval, or runs "
        "appended to one file); give one file per fio run, without --status-interval"
    ]
    assert not (tmp_path / "out").exists()


def test_a_job_and_file_named_in_latin1_import_with_one_warning(tmp_path: Path) -> None:
    # given real fio output of a job named in Latin-1 writing a file named in Latin-1:
    # fio prints both as the bytes it was given, so the document is not UTF-8
    data = os.fsencode(tmp_path) + b"/d\xe9j\xe0"
    job = tmp_path / "job.fio"
    job.write_bytes(b"[caf\xe9]\nfilename=" + data + b"\nsize=1m\nrw=read\nbs=4k\n")
    out_json = tmp_path / "out.json"
    result = subprocess.run(
        ["fio", "--output-format=json+", f"--output={out_json}", str(job)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    raw = out_json.read_bytes()
    assert b'"jobname" : "caf\xe9"' in raw and os.path.exists(data)
    # and beside it a gzip of the same bytes (not text at all)
    zipped = tmp_path / "out.json.gz"
    zipped.write_bytes(gzip.compress(raw))
    # when both are imported
    out = tmp_path / "out"
    result = _import([out_json, zipped], out, "latin1")
    # then fio's figures reach the warehouse under the job name with U+FFFD for the byte
    doc = json.loads(raw.decode("latin-1"))
    db = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    rows = db.execute("SELECT job, iops, io_bytes FROM fio_results").fetchall()
    [read] = [j["read"] for j in doc["jobs"]]
    assert rows == [("caf\ufffd", read["iops"], read["io_bytes"])]
    # with one warning line naming the file and the first bad byte
    lines = result.stderr.splitlines()
    offset, bad = raw.index(b"\xe9"), sum(byte >= 0x80 for byte in raw)  # each alone
    assert [line for line in lines if line.startswith(f"{out_json}: ")] == [
        f"{out_json}: not UTF-8 at byte offset {offset}: {bad} invalid sequences read as "
        "U+FFFD (a job, file or mount name in another encoding?)"
    ], result.stderr
    # and the gzip is refused as not text, costing the other file nothing
    assert f"{zipped}: not UTF-8 text (fio JSON or ioping -J output expected)" in lines
    assert result.returncode == 1


@pytest.mark.parametrize("fmt", ["json,normal", "normal,json+"])
def test_the_normal_report_beside_the_json_is_one_note_and_fios_messages_stay(
    fmt: str, tmp_path: Path
) -> None:
    # given fio's normal report beside its JSON, and fio's own error lines (its stderr,
    # as `fio ... > out 2>&1` saves them) from a job that cannot create its file
    argv = ["fio", "--name=job", f"--filename={tmp_path / 'data.bin'}", *SMALL, "--rw=read"]
    argv += ["--name=broken", "--filename=/proc/no-such-dir/data", *SMALL, "--rw=read"]
    result = subprocess.run(
        [*argv, f"--output-format={fmt}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
        check=False,
    )
    text = result.stdout.decode()
    report = [line.strip() for line in text.splitlines() if "(groupid=" in line]
    errors = [line.strip() for line in text.splitlines() if line.startswith("fio: ")]
    assert report and errors, text
    # when
    out = parse_fio(text)
    # then the report is one note, fio's messages are each a warning of their own,
    # and no line of the report is a warning
    [folded] = [w for w in out.warnings if w.startswith("fio's normal report")]
    assert all(e in out.warnings for e in errors), out.warnings
    # (the report's `Disk stats` header was once called fio --client's text)
    assert not [w for w in out.warnings if "--client" in w], out.warnings
    assert not [w for w in out.warnings if any(w == line for line in report)], out.warnings
    assert not [w for w in out.warnings if w.startswith(("Run status", "Disk stats"))]
    # and the figures are fio's JSON's
    assert [(r["job"], r["iops"]) for r in out.records] == [
        (j["jobname"], j["read"]["iops"])
        for j in fio_document(text[text.index("\n{") + 1 :])["jobs"]
        if j["read"]["total_ios"]
    ]


@pytest.mark.parametrize("version", [2, 3, 4, 5])
@pytest.mark.parametrize("order", ["terse,json+", "json,terse"])
def test_terse_output_beside_the_json_is_one_note_of_its_lines(
    order: str, version: int, tmp_path: Path
) -> None:
    # given fio's terse lines (one per job, each over a thousand characters) beside its
    # JSON, in every terse version fio prints
    argv = ["fio", *SMALL, "--rw=randread", f"--output-format={order}"]
    argv += [f"--terse-version={version}"]
    for name in ("one", "two"):
        argv += [f"--name={name}", f"--filename={tmp_path / name}"]
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    terse = [line for line in text.splitlines() if line.startswith(f"{version};")]
    assert len(terse) == 2 and all(len(line) > 500 for line in terse), text
    # when
    out = parse_fio(text)
    # then the two lines are one note, and no warning quotes them
    notes = [w for w in out.warnings if "percentile" not in w]
    assert notes == ["fio's terse output beside the JSON (2 lines) not read"]
    assert [r["job"] for r in out.records] == ["one", "two"]


def _io_done(root: int) -> int:
    """Bytes read or written so far by the processes below `root` (fio's job workers)."""
    from tests.integration.proctable import tree

    total = 0
    for pid in tree(root):
        if pid == root:
            continue
        try:
            fields = dict(
                line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines()
            )
        except OSError:
            continue
        total += int(fields["rchar"]) + int(fields["wchar"])
    return total


@pytest.mark.parametrize("name", ["plain", "x{1}", "{y}", "[4k]"])
def test_a_run_stopped_by_a_signal_is_kept_out_of_the_tables_whatever_its_job_is_named(
    tmp_path: Path, name: str
) -> None:
    # given fio's report beside its JSON (json+,normal), whose lines start with the job's
    # name, ahead of "fio: terminating on signal": a name with "{" or "[" in it too
    from tests.integration.proctable import wait_for

    argv = ["fio", f"--name={name}", f"--filename={tmp_path / 'data.bin'}", "--size=4M"]
    argv += ["--rw=randread", "--bs=4k", "--time_based", "--runtime=60"]
    argv += ["--output-format=json+,normal"]
    fio = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # when: SIGINT once its job is doing I/O
        wait_for(lambda: _io_done(fio.pid) > 8 << 20, 60, "fio's job reading")
        fio.send_signal(signal.SIGINT)
        stdout, _ = fio.communicate(timeout=60)
    finally:
        fio.kill()
        fio.wait()
    text = stdout.decode()
    assert "fio: terminating on signal 2" in text and text.startswith(name), text[:300]
    path = tmp_path / "cut.json"
    path.write_bytes(stdout)
    # then: iofleet reads it as fio's (not ioping's), and the ingest keeps its partial
    # figures out of fio_results, with the reason in ingest_errors
    result = _import([path], tmp_path / "out", "cut")
    assert result.returncode == 1, result.stderr
    db = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    assert db.execute("SELECT count(*) FROM fio_results").fetchone() == (0,)
    [(reason,)] = db.execute("SELECT reason FROM ingest_errors").fetchall()
    assert reason.startswith("fio was stopped by signal 2 before its run ended"), reason


def test_a_job_named_in_brackets_is_read_as_fio_output(tmp_path: Path) -> None:
    # given fio's report beside its JSON, whose first line is the job's "[4k]: (g=0)"
    argv = ["fio", "--name=[4k]", f"--filename={tmp_path / 'data.bin'}", *SMALL]
    argv += ["--rw=randread", "--output-format=json+,normal"]
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    assert text.startswith("[4k]: (g=0)"), text[:200]
    path = tmp_path / "fio.json"
    path.write_text(text)
    # when: parsed and imported without --kind
    parsed = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "parse", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    result = _import([path], tmp_path / "out", "brackets")
    # then: fio's figures, not "invalid ioping JSON"
    assert parsed.returncode == 0, parsed.stderr
    assert [json.loads(line)["job"] for line in parsed.stdout.splitlines()] == ["[4k]"]
    assert result.returncode == 0, result.stderr
    db = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    iops = fio_document(text[text.index("\n{") + 1 :])["jobs"][0]["read"]["iops"]
    assert db.execute("SELECT job, iops FROM fio_results").fetchall() == [("[4k]", iops)]


def test_same_named_jobs_a_stonewall_ran_one_after_the_other_are_not_added_up(
    tmp_path: Path,
) -> None:
    # given a block-size sweep: one job name, 4k then 64k, a stonewall between them (fio's
    # groups 0 and 1), beside a numjobs=2 job whose clones share a group
    stdout = _run_fio(
        tmp_path,
        ["--rw=randread", "--name=job", "--bs=64k", "--stonewall", "--output-format=json+"]
        + ["--name=clones", "--numjobs=2", "--rw=randread", "--stonewall"],
    )
    doc = fio_document(stdout)
    assert [(j["jobname"], j["groupid"]) for j in doc["jobs"]] == [
        ("job", 0),
        ("job", 1),
        ("clones", 2),
        ("clones", 2),
    ]
    path = tmp_path / "sweep.json"
    path.write_text(stdout)
    # when imported
    result = _import([path], tmp_path / "out", "sweep")
    assert result.returncode == 0, result.stderr
    # then each group of the sweep is a job of its own with fio's own IOPS, while the
    # clones are one job whose IOPS are their sum (as fio's group_reporting would say)
    db = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    got = dict(
        db.execute(
            "SELECT job, p50 FROM cell_percentiles WHERE metric = 'iops' ORDER BY job"
        ).fetchall()
    )
    iops = [j["read"]["iops"] for j in doc["jobs"]]
    assert got == {
        "clones": iops[2] + iops[3],
        "job (group 0)": iops[0],
        "job (group 1)": iops[1],
    }
