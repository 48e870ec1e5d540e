"""Warehouse.ingest_dir passes over a run whose raw files and ingest code are unchanged
since it was last loaded into that warehouse, and loads the others as a fresh one would."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from iofleet.results import warehouse
from iofleet.results.warehouse import INGESTED_RUNS, SCHEMA_MARK, Warehouse
from tests.unit import rawtree
from tests.warehouse_rows import fresh_build as _fresh
from tests.warehouse_rows import table_rows as _tables

A, B = "run-a", "run-b"
CELL = "c000-local-fast-x2-r1"


def _raw(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    rawtree.write_run(raw, A, slots=2)
    rawtree.write_run(raw, B, slots=2)
    return raw


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The raw paths ingest_dir reads (a wrapper around its one read function)."""
    seen: list[str] = []
    real = warehouse._read_artifact

    def counting(path: str) -> str:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(warehouse, "_read_artifact", counting)
    return seen


def _json_files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*.json"))


def test_a_second_ingest_of_an_unchanged_out_reads_nothing_and_keeps_the_rows(
    tmp_path: Path, reads: list[str]
) -> None:
    # given an --out loaded once
    raw = _raw(tmp_path)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(raw)
    assert sorted(reads) == _json_files(raw)
    reads.clear()
    # when it is ingested again (another process, as the next `iofleet local`)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        stats = wh.ingest_dir(raw)
        tables = _tables(wh)
    # then no artifact was read, and the rows are those of a full rebuild
    assert reads == []
    assert (stats.runs, stats.unchanged) == ([], [A, B])
    assert str(stats) == "0 objects from 0 runs: no rows; 2 unchanged runs kept as loaded before"
    assert tables == _fresh(raw)
    assert all(tables[t] for t in ("runs", "slots", "fio_results", "fio_latency_histograms"))


def test_a_rewrite_that_keeps_size_and_mtime_is_loaded_again(
    tmp_path: Path, reads: list[str]
) -> None:
    # given a loaded run whose run.json is then replaced (a copy: a new inode) by one of
    # the same size, its mtime set back to the old one's
    raw = _raw(tmp_path)
    run_json = raw / B / "run.json"
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(raw)
        before = run_json.stat()
        text = run_json.read_text()
        assert '"a demo"' in text
        copy = raw / B / ".run.json.tmp"
        copy.write_text(text.replace('"a demo"', '"b demo"'))
        os.replace(copy, run_json)
        os.utime(run_json, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = run_json.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        reads.clear()
        # when
        wh.ingest_dir(raw)
        # then that run was read again, and holds the new text
        assert reads and all(r.startswith(str(raw / B)) for r in reads)
        assert wh.query("SELECT run_id, description FROM runs ORDER BY run_id") == [
            {"run_id": A, "description": "a demo"},
            {"run_id": B, "description": "b demo"},
        ]
        assert _tables(wh) == _fresh(raw)


def _edit(raw: Path) -> None:
    path = raw / B / CELL / "slot-0001" / "slot.json"
    path.write_text(json.dumps(rawtree.slot_doc("FAILED", exit_code=3)))


def _add(raw: Path) -> None:
    (raw / B / CELL / "slot-0001" / "w09-fio-broken.json").write_text('{"jobs": [')


def _remove(raw: Path) -> None:
    (raw / B / CELL / "slot-0001" / "w01-ioping.json").unlink()


def _add_a_folder(raw: Path) -> None:
    shutil.copytree(raw / B / CELL / "slot-0001", raw / B / CELL / "slot-0002")


@pytest.mark.parametrize("change", [_edit, _add, _remove, _add_a_folder])
def test_changing_one_run_loads_that_run_only_as_a_fresh_warehouse_would(
    tmp_path: Path, reads: list[str], change: Any
) -> None:
    # given two loaded runs
    raw = _raw(tmp_path)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(raw)
        before = _tables(wh)
        # when one artifact of one run is edited, added or removed, and ingest runs
        change(raw)
        reads.clear()
        stats = wh.ingest_dir(raw)
        # then only that run's artifacts were read
        assert (stats.runs, stats.unchanged) == ([B], [A])
        assert sorted(reads) == _json_files(raw / B)
        # and the warehouse holds what one built from scratch holds, which differs
        after = _tables(wh)
        assert after == _fresh(raw)
        assert after != before


def test_a_file_the_ingest_passes_over_still_counts(tmp_path: Path, reads: list[str]) -> None:
    raw = _raw(tmp_path)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(raw)
        (raw / B / CELL / "notes.txt").write_text("x")
        reads.clear()
        stats = wh.ingest_dir(raw)
    assert (stats.runs, stats.unchanged) == ([B], [A])
    assert sorted(reads) == _json_files(raw / B)


def test_a_change_of_ingest_code_loads_every_run_again(
    tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the fingerprint follows the source of the code that makes rows
    source = tmp_path / "parser.py"
    source.write_text("X = 1\n")
    real = warehouse.code_fingerprint
    monkeypatch.setattr(warehouse, "_row_code", lambda: [source])
    try:
        real.cache_clear()
        first = real()
        source.write_text("X = 2\n")
        real.cache_clear()
        assert real() != first
    finally:
        real.cache_clear()  # computed again from the real sources once _row_code is back
    # given a loaded --out, loaded with one code fingerprint
    raw = _raw(tmp_path)
    monkeypatch.setattr(warehouse, "code_fingerprint", lambda: "parsers of yesterday")
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(raw)
        reads.clear()
        # when the code changes (another fingerprint) and it is ingested again
        monkeypatch.setattr(warehouse, "code_fingerprint", lambda: "parsers of today")
        stats = wh.ingest_dir(raw)
        # then every run was read and loaded again
        assert (stats.runs, stats.unchanged) == ([A, B], [])
        assert sorted(reads) == _json_files(raw)
        assert _tables(wh) == _fresh(raw)


class _Stop(Exception):
    pass


@pytest.mark.parametrize(
    "stop", [KeyboardInterrupt, duckdb.InterruptException], ids=["sigint", "duckdb-interrupt"]
)
def test_an_ingest_stopped_in_its_transaction_leaves_no_fingerprint(
    tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch, stop: type[BaseException]
) -> None:
    # given an ingest stopped after its rows and fingerprints were written, before the
    # commit (raised from the last load: a stand-in for the signal, which lands anywhere)
    raw = _raw(tmp_path)
    real = Warehouse.insert_bin_blocks

    def stopped(self: Warehouse, blocks: Any) -> int:
        real(self, blocks)
        assert self.query(f"SELECT count(*) AS n FROM {INGESTED_RUNS}") == [{"n": 2}]
        raise stop("stopped")

    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        monkeypatch.setattr(Warehouse, "insert_bin_blocks", stopped)
        with pytest.raises(stop):
            wh.ingest_dir(raw)
        monkeypatch.setattr(Warehouse, "insert_bin_blocks", real)
        # then neither rows nor fingerprints are left
        assert wh.query(f"SELECT count(*) AS n FROM {INGESTED_RUNS}") == [{"n": 0}]
        assert wh.query("SELECT count(*) AS n FROM runs") == [{"n": 0}]
    # and the next ingest loads every run
    reads.clear()
    with Warehouse(path) as wh:
        stats = wh.ingest_dir(raw)
        assert stats.runs == [A, B] and sorted(reads) == _json_files(raw)
        assert _tables(wh) == _fresh(raw)


def test_an_edit_whose_reload_is_stopped_is_loaded_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = _raw(tmp_path)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(raw)
        _edit(raw)
        real = Warehouse.insert_bin_blocks

        def stopped(self: Warehouse, blocks: Any) -> int:
            raise KeyboardInterrupt

        monkeypatch.setattr(Warehouse, "insert_bin_blocks", stopped)
        with pytest.raises(KeyboardInterrupt):
            wh.ingest_dir(raw)
        monkeypatch.setattr(Warehouse, "insert_bin_blocks", real)
        stats = wh.ingest_dir(raw)
        assert stats.runs == [B]
        assert _tables(wh) == _fresh(raw)


def test_a_run_loaded_artifact_by_artifact_gets_its_fingerprint(
    tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a value the column checks miss, so DuckDB refuses the bulk load
    from iofleet.results import ingest

    monkeypatch.setattr(ingest, "_check_rows", lambda rows: None)
    raw = _raw(tmp_path)
    (raw / B / CELL / "slot-0000" / "slot.json").write_text(
        json.dumps(rawtree.slot_doc() | {"exit_code": 2**64})
    )
    with Warehouse(tmp_path / "w.duckdb") as wh:
        first = wh.ingest_dir(raw)
        loaded = _tables(wh)
        reads.clear()
        second = wh.ingest_dir(raw)
        assert reads == [] and second.unchanged == [A, B]
        assert first.errors == second.errors == 1  # the error the warehouse holds
        assert _tables(wh) == loaded


@pytest.mark.parametrize("table", ["dropped", "kept"])
def test_a_warehouse_of_an_older_schema_loads_every_run_then_keeps_fingerprints(
    tmp_path: Path, reads: list[str], table: str
) -> None:
    # given a warehouse an older iofleet wrote: another schema mark, and no fingerprint
    # table (or one that its schema change makes stale)
    raw = _raw(tmp_path)
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.ingest_dir(raw)
    with duckdb.connect(str(path)) as con:
        if table == "dropped":
            con.execute(f"DROP TABLE {INGESTED_RUNS}")
        con.execute(f"UPDATE {SCHEMA_MARK} SET fingerprint = 'an older schema'")
    # then a reading command opens it as it is
    with Warehouse(path, read_only=True) as wh:
        assert wh.run_ids() == [B, A]
    # when it is opened to be written and ingested
    reads.clear()
    with Warehouse(path) as wh:
        stats = wh.ingest_dir(raw)
        # then every run was loaded
        assert stats.runs == [A, B] and sorted(reads) == _json_files(raw)
        assert _tables(wh) == _fresh(raw)
    # and the fingerprints written then make the next ingest read nothing
    reads.clear()
    with Warehouse(path) as wh:
        assert wh.ingest_dir(raw).unchanged == [A, B]
    assert reads == []


def test_two_folders_of_one_run_id_load_together(tmp_path: Path) -> None:
    # given two run folders whose names give the same run id (one is not UTF-8)
    raw = tmp_path / "raw"
    rawtree.write_run(raw, A, slots=1)
    rawtree.write_run(raw, "x-\\udcff", slots=1)
    twin = os.path.join(os.fsencode(raw), b"x-\xff")
    shutil.copytree(os.fsencode(raw / "x-\\udcff"), twin)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.ingest_dir(raw)
        # when an artifact of one of them changes
        slot = os.path.join(twin, os.fsencode(f"{CELL}/slot-0000/slot.json"))
        with open(slot, "w") as out:
            out.write(json.dumps(rawtree.slot_doc("FAILED", exit_code=3)))
        stats = wh.ingest_dir(raw)
        # then the run id is loaded again from both folders
        assert (stats.runs, stats.unchanged) == (["x-\\udcff"], [A])
        # and it holds what a fresh build holds: the rows of the folder spelled with a
        # backslash carry that spelling, the one its reload deletes by
        assert _tables(wh) == _fresh(raw)


def _folder(raw: Path, name: bytes, like: str, below: str = "") -> bytes:
    """A run folder named `name` (any bytes) holding the files of rawtree's run `like`
    (those `below` a folder of it), one of them an artifact that is no fio output (an
    ingest_errors row wherever the folder is). Returns the path of that artifact."""
    plain = rawtree.write_run(raw.parent / "build", like, slots=1)
    broken = Path(CELL, "slot-0000", "w09-fio-broken.json")
    (plain / broken).write_text('{"jobs": [')
    path = os.path.join(os.fsencode(raw), name)
    shutil.copytree(os.fsencode(plain / below), path)
    shutil.rmtree(raw.parent / "build")
    return os.path.join(path, os.fsencode(broken.relative_to(below)))


def _rewrite(artifact: bytes) -> None:
    """Change an artifact: another broken fio output."""
    with open(artifact, "w") as out:
        out.write('{"jobs": [[')


def _edit_a(raw: Path) -> None:
    path = raw / A / CELL / "slot-0000" / "slot.json"
    path.write_text(json.dumps(rawtree.slot_doc("FAILED", exit_code=3)))


# run folders whose names are not the run id as written: not UTF-8 (its id the escaped
# spelling), a backslash in it (no separator on Linux: part of the id), both spellings
# of one id side by side, and a backslash that, read as a separator, would make the
# folder a cell of another run (here the cell folder of that run, copied)
_ODD_FOLDERS = {
    "not-utf8": [(b"run-\xff", "run-x", "")],
    "backslash": [(b"run-\\b", "run-\\b", "")],
    "both-spellings": [(b"x-\xff", "x-y", ""), (b"x-\\udcff", "x-\\udcff", "")],
    "backslash-cell": [(os.fsencode(f"{A}\\{CELL}"), A, CELL)],
}


@pytest.mark.parametrize("folders", list(_ODD_FOLDERS.values()), ids=list(_ODD_FOLDERS))
def test_a_run_folder_with_an_escaped_or_odd_name_reloads_as_a_fresh_build(
    tmp_path: Path, folders: list[tuple[bytes, str, str]]
) -> None:
    # given a normal run and run folders with odd names, each with a bad artifact
    raw = tmp_path / "raw"
    rawtree.write_run(raw, A, slots=1)
    broken = [_folder(raw, *folder) for folder in folders]
    with Warehouse(tmp_path / "w.duckdb") as wh:
        first = wh.ingest_dir(raw)
        loaded = _tables(wh)
        assert loaded == _fresh(raw)
        errors = len(loaded["ingest_errors"])
        assert errors >= len(folders) and first.errors == errors
        odd = [r for r in first.runs if r != A]
        # when an artifact of the (first) odd folder changes, and the warehouse is
        # loaded again, more than once
        _rewrite(broken[0])
        second = wh.ingest_dir(raw)
        third = wh.ingest_dir(raw)
        # then that run was loaded again, then kept, and the warehouse holds the rows of a
        # fresh build over the same files, in every table: no row doubled, none lost
        assert (second.runs, second.unchanged) == (odd, [A])
        assert (third.runs, sorted(third.unchanged)) == ([], sorted([A, *odd]))
        reloaded = _tables(wh)
        assert reloaded == _fresh(raw)
        assert len(reloaded["ingest_errors"]) == errors == second.errors == third.errors
        assert reloaded["runs"] == loaded["runs"] and reloaded["slots"] == loaded["slots"]
        # and when the normal run changes, its reload takes nothing of the odd ones
        _edit_a(raw)
        fourth = wh.ingest_dir(raw)
        assert (fourth.runs, fourth.unchanged) == ([A], odd)
        assert _tables(wh) == _fresh(raw)
