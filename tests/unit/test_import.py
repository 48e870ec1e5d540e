"""`iofleet import`: fio / ioping files made outside iofleet become a run in the warehouse.

Real DuckDB; the inputs are real fio and ioping outputs (tests/fixtures), except
where a test says it edits one.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from iofleet.cli import main
from iofleet.results.parsers.fio import parse_fio
from iofleet.results.parsers.ioping import parse_ioping

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIO = FIXTURES / "fio"
IOPING = FIXTURES / "ioping"
PROBES = Path(__file__).resolve().parents[1] / "data" / "probes" / "import"
# fio-3.33 --client output (json+) against one `fio --server` on 127.0.0.1:8766
CLIENT = FIO / "client-server-one-host.json"


def _import(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["import", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _db(out: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)


def test_each_file_becomes_one_slot_of_one_labelled_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [FIO / "json-randread.json", FIO / "jsonplus-two-jobs.json", IOPING / "read-c21.json"]
    rc, out, err = _import(capsys, *map(str, files), "--out", str(tmp_path), "--label", "gp3")
    assert rc == 0, err
    db = _db(tmp_path)
    [(run_id,)] = db.execute("SELECT run_id FROM runs").fetchall()
    assert run_id.startswith("gp3-") and run_id in out
    slots = db.execute(
        "SELECT slot_index, storage_label, fleet_size, status FROM slots ORDER BY slot_index"
    ).fetchall()
    assert slots == [
        (0, "gp3", 3, "SUCCEEDED"),
        (1, "gp3", 3, "SUCCEEDED"),
        (2, "gp3", 3, "SUCCEEDED"),
    ]
    # every fio record of each file is a row, at that file's slot
    for slot, path in enumerate(files[:2]):
        records = parse_fio(path.read_text()).records
        rows = db.execute(
            "SELECT job, direction, iops FROM fio_results WHERE slot_index = ? ORDER BY job_index, direction",
            [slot],
        ).fetchall()
        assert sorted(rows) == sorted((r["job"], r["direction"], r["iops"]) for r in records)
    requests = db.execute("SELECT count(*) FROM ioping_requests WHERE slot_index = 2").fetchone()
    assert requests == (len(parse_ioping((IOPING / "read-c21.json").read_text()).requests),)
    # the raw artifact is the file, verbatim
    [fio_raw] = (tmp_path / "raw" / run_id).glob("c000-gp3/slot-0000/w*-fio-*.json")
    assert fio_raw.read_bytes() == files[0].read_bytes()


def test_same_job_in_several_files_is_one_workload_across_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (FIO / "json-randread.json").read_text()
    for i in range(3):
        (tmp_path / f"host{i}.json").write_text(text)
    rc, _, err = _import(
        capsys,
        *(str(tmp_path / f"host{i}.json") for i in range(3)),
        "--out",
        str(tmp_path / "o"),
        "--label",
        "x",
    )
    assert rc == 0, err
    rows = (
        _db(tmp_path / "o")
        .execute(
            "SELECT workload_index, workload, count(*) FROM slot_metrics WHERE metric = 'iops' GROUP BY ALL"
        )
        .fetchall()
    )
    assert rows == [(0, "randread", 3)]


def test_slot_per_dir_puts_a_directory_s_files_in_one_slot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for host in ("h1", "h2"):
        (tmp_path / host).mkdir()
        (tmp_path / host / "fio.json").write_bytes((FIO / "json-randread.json").read_bytes())
        (tmp_path / host / "ioping.json").write_bytes((IOPING / "read-c21.json").read_bytes())
    files = sorted(str(p) for p in tmp_path.glob("h*/*.json"))
    rc, _, err = _import(
        capsys, *files, "--out", str(tmp_path / "o"), "--label", "x", "--slot-per", "dir"
    )
    assert rc == 0, err
    db = _db(tmp_path / "o")
    assert db.execute("SELECT count(*), max(fleet_size) FROM slots").fetchone() == (2, 2)
    per_slot = db.execute(
        "SELECT slot_index, count(DISTINCT metric_source) FROM slot_metrics GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert per_slot == [(0, 2), (1, 2)]


def test_slot_per_dir_refuses_a_second_copy_of_a_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_bytes((FIO / "json-randread.json").read_bytes())
    rc, _, err = _import(
        capsys,
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        "--out",
        str(tmp_path / "o"),
        "--label",
        "x",
        "--slot-per",
        "dir",
    )
    assert rc == 1
    assert err.splitlines() == [
        f"{tmp_path / 'b.json'}: its slot already has workload randread from "
        f"{tmp_path / 'a.json'} (use --slot-per file)"
    ]
    assert _db(tmp_path / "o").execute("SELECT count(*) FROM slots").fetchone() == (1,)


def test_fio_client_server_output_is_one_slot_per_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the real one-host client output, with a second host, a second server on the
    # first host (another port) and the "All clients" aggregate added by hand (fio 3.33
    # printed one host for two --client)
    doc = json.loads(CLIENT.read_text())
    [entry] = doc["client_stats"]
    assert (entry["hostname"], entry["port"]) == ("127.0.0.2", 8766)
    other = json.loads(json.dumps(entry))
    other["hostname"] = "10.0.0.9"
    other["read"]["iops"] = 1234.5
    second = json.loads(json.dumps(entry))
    second["port"] = 8767
    second["read"]["iops"] = 777.25
    total = json.loads(json.dumps(entry))
    total["jobname"] = "All clients"
    doc["client_stats"] = [entry, other, second, total]
    path = tmp_path / "clients.json"
    path.write_text(json.dumps(doc))
    rc, _, err = _import(capsys, str(path), "--out", str(tmp_path / "o"), "--label", "fsx")
    assert rc == 0, err
    # then one slot per server, each row naming its server as fio does (hostname:port),
    # and a second server on one host is a slot of its own, not summed into the first's
    db = _db(tmp_path / "o")
    rows = db.execute(
        "SELECT s.hostname, f.host, f.job, f.iops FROM slots s "
        "JOIN fio_results f USING (run_id, cell_id, slot_index) ORDER BY f.host"
    ).fetchall()
    assert rows == [
        ("10.0.0.9", "10.0.0.9:8766", "rr", 1234.5),
        ("127.0.0.2", "127.0.0.2:8766", "rr", entry["read"]["iops"]),
        ("127.0.0.2", "127.0.0.2:8767", "rr", 777.25),
    ]


def test_a_bad_file_among_good_ones_is_listed_and_the_rest_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = PROBES / "fio-no-io.json"
    rc, out, err = _import(
        capsys, str(FIO / "json-randread.json"), str(bad), "--out", str(tmp_path), "--label", "x"
    )
    assert rc == 1
    assert err.splitlines() == [f"{bad}: fio output: no job did any I/O"]
    assert "imported 1 of 2 files" in out
    assert _db(tmp_path).execute("SELECT count(*) FROM fio_results").fetchone() == (1,)


@pytest.mark.parametrize("probe", sorted(p.name for p in PROBES.iterdir()))
def test_probe_files_are_refused_with_one_line_and_nothing_written(
    probe: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = PROBES / probe
    out = tmp_path / "out"
    rc, _, err = _import(capsys, str(path), "--out", str(out), "--label", "x")
    assert rc == 2
    [line] = err.splitlines()
    assert line.startswith(f"{path}: ") and len(line) > len(f"{path}: ") + 5
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--label", "no spaces"], "--label: 'no spaces': letters, digits"),
        (["--label", "../up"], "--label: '../up': letters, digits"),
        (["--label", "x", "--slot-per", "host"], None),  # argparse refuses: exit 2
    ],
)
def test_bad_options_exit_2(
    args: list[str], line: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if line is None else _no_raise():
        rc, _, err = _import(
            capsys, str(FIO / "json-randread.json"), "--out", str(tmp_path / "o"), *args
        )
        assert rc == 2 and err.startswith(line)  # type: ignore[arg-type]
    assert not (tmp_path / "o").exists()


class _no_raise:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def test_missing_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    rc, _, err = _import(capsys, str(missing), "--out", str(tmp_path / "o"), "--label", "x")
    assert rc == 2
    assert err == f"{missing}: cannot read: No such file or directory\n"


def test_an_import_into_an_out_that_another_run_holds_exits_4_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from iofleet.results.outdir import output_lock

    out = tmp_path / "out"
    first = [str(FIO / "json-randread.json")]
    assert _import(capsys, *first, "--out", str(out), "--label", "gp3")[0] == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != ".iofleet.lock"}
    # given: another writer (here an `iofleet import` of this process) holds --out
    with output_lock(out, "iofleet import"):
        rc, _, err = _import(capsys, *first, "--out", str(out), "--label", "io2")
    # then: exit 4, one line naming the holder, and nothing written into --out
    assert rc == 4, err
    assert err.strip().count("\n") == 0
    assert "in use by another run (iofleet import pid" in err
    after = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != ".iofleet.lock"}
    assert after == before
    runs = _db(out).execute("SELECT run_id FROM runs").fetchall()
    assert [r for (r,) in runs if r.startswith("io2-")] == []


def test_a_client_hosts_artifact_keeps_the_global_options_its_figures_depend_on(
    tmp_path: Path,
) -> None:
    # given fio 3.12 --client output whose [global] section set lat_percentiles=1 (made
    # by hand from the real 3.12 job entry: fio 3.1-3.12 list total-latency percentiles
    # under clat_ns then, which only the global options reveal)
    from iofleet.results.importer import read_pieces

    doc = json.loads((FIO / "versions" / "fio-3.12-json-lat-percentiles.json").read_text())
    [entry] = doc["jobs"]
    del entry["job options"]["lat_percentiles"]
    entry["hostname"] = "10.0.0.7"
    client = {
        "fio version": doc["fio version"],
        "global options": {"lat_percentiles": "1"},
        "client_stats": [entry],
    }
    path = tmp_path / "clients.json"
    path.write_text(json.dumps(client))
    # when it is split into one artifact per host
    [piece] = read_pieces(path)
    # then that artifact still says so, and its clat percentiles are null, not lat's
    [record] = parse_fio(piece.text).records
    assert record["clat_p50_ns"] is None and record["clat_p99_ns"] is None


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-8-sig"])
def test_fio_output_saved_by_windows_powershell_is_read_like_utf8(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given real fio output as Windows PowerShell 5.1's `fio ... > out.json` saves it:
    # UTF-16 LE with a byte-order mark and CRLF line ends (or UTF-16 BE, or UTF-8 + BOM)
    text = (FIO / "jsonplus-two-jobs.json").read_text(encoding="utf-8")
    path = tmp_path / "out.json"
    bom = b"\xfe\xff" if encoding == "utf-16-be" else b""
    path.write_bytes(bom + text.replace("\n", "\r\n").encode(encoding))
    # when it is parsed and imported
    records = [json.loads(line) for line in _parse_cli(capsys, path)]
    rc, _, err = _import(capsys, str(path), "--out", str(tmp_path / "o"), "--label", "win")
    # then its records are those of the UTF-8 file, and they reach the warehouse
    assert records == parse_fio(text).records
    assert rc == 0, err
    rows = _db(tmp_path / "o").execute("SELECT count(*) FROM fio_results").fetchone()
    assert rows == (len(records),)


def _parse_cli(capsys: pytest.CaptureFixture[str], path: Path) -> list[str]:
    assert main(["parse", str(path)]) == 0
    return capsys.readouterr().out.splitlines()


def _renamed(tmp_path: Path, where: str, *names: str) -> Path:
    """The real fio output json-randread.json, saved at `where`, with its one job renamed
    (or repeated under several names)."""
    doc = json.loads((FIO / "json-randread.json").read_text())
    [job] = doc["jobs"]
    doc["jobs"] = [{**job, "jobname": name} for name in names]
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("読み",), ("書き",)),  # no safe character at all
        (("a b",), ("a_b",)),  # the same once made safe
        (("a+b",), ("a", "b")),  # the same once joined
        (("x" * 90,), ("x" * 90 + "y",)),  # the same in their first 80 characters
    ],
    ids=["non-ascii", "space", "plus", "long"],
)
@pytest.mark.parametrize("slot_per", ["file", "dir"])
def test_distinct_job_names_are_distinct_workloads(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    first: tuple[str, ...],
    second: tuple[str, ...],
    slot_per: str,
) -> None:
    # given two files of one slot's directory whose jobs have names that a file name
    # part would make the same
    one = _renamed(tmp_path, "d1/one.json", *first)
    two = _renamed(tmp_path, "d1/two.json", *second)
    # when both are imported, as two slots or as one
    rc, _, err = _import(
        capsys,
        str(one),
        str(two),
        "--out",
        str(tmp_path / "o"),
        "--label",
        "x",
        "--slot-per",
        slot_per,
    )
    # then: both are imported, as two workloads, neither pooled with the other
    assert rc == 0, err
    rows = (
        _db(tmp_path / "o")
        .execute(
            "SELECT workload, list(DISTINCT job ORDER BY job), count(DISTINCT slot_index) "
            "FROM fio_results GROUP BY workload"
        )
        .fetchall()
    )
    assert sorted(tuple(jobs) for _, jobs, _ in rows) == sorted([first, second])
    assert len({workload for workload, _, _ in rows}) == 2
    assert all(slots == 1 for _, _, slots in rows)


def test_a_safe_job_name_is_its_workloads_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given jobs whose names are safe as they are
    path = _renamed(tmp_path, "f.json", "rand-4k", "seq.1m")
    rc, _, err = _import(capsys, str(path), "--out", str(tmp_path / "o"), "--label", "x")
    assert rc == 0, err
    # then their workload is named by them, sorted and joined by "+", nothing added
    workloads = _db(tmp_path / "o").execute("SELECT DISTINCT workload FROM fio_results")
    assert workloads.fetchall() == [("rand-4k+seq.1m",)]


def test_a_fio_job_that_failed_makes_its_slot_failed_as_a_local_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given real fio output with a job that failed (error 2, no I/O) beside one that ran,
    # and a file whose jobs all ran
    failing, good = FIO / "jsonplus-failing-job.json", FIO / "json-randread.json"
    rc, _, err = _import(
        capsys, str(failing), str(good), "--out", str(tmp_path / "o"), "--label", "x"
    )
    assert rc == 0, err
    # then the failing file's slot is FAILED with fio's error, as an agent records it,
    # the other SUCCEEDED, and the run PARTIAL (it was SUCCEEDED throughout)
    db = _db(tmp_path / "o")
    slots = db.execute("SELECT status, exit_code, error FROM slots ORDER BY slot_index").fetchall()
    assert slots == [
        ("FAILED", 1, "fio job 'missing' reported error 2"),
        ("SUCCEEDED", 0, None),
    ]
    assert db.execute("SELECT status FROM runs").fetchall() == [("PARTIAL",)]
