"""`iofleet import`, `report` and `compare` stopped by SIGINT, SIGTERM or SIGHUP while
DuckDB runs one of their statements.

A driver wraps one internal function so that, at that moment, the real command runs a
statement that lasts until it is interrupted (a count over 10^15 rows) and marks that
it has begun (a file); the test then signals the command's process group, as Ctrl-C
from a terminal does. Everything else is the real code on a real DuckDB file. The
outcome is read where it lands: the exit status, stderr, the warehouse's rows, the
files in --out, beside --html and in TMPDIR.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from tests.integration.proctable import (
    alive,
    files_under,
    signal_pending,
    stat_fields,
    tree,
    wait_for,
)

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIO = FIXTURES / "fio" / "json-randread.json"
IOPING = FIXTURES / "ioping" / "read-c21.json"

# At $SIG_AT, the first DuckDB statement of that kind becomes one that lasts until
# interrupted, after $SIG_MARK is created.
DRIVER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from iofleet.cli import main
    from iofleet.results.warehouse import Warehouse

    MARK, AT = Path(os.environ["SIG_MARK"]), os.environ["SIG_AT"]
    ENDLESS = "SELECT count(*) FROM range(1000000000000000)"

    def endless(con):
        if not MARK.exists():
            MARK.touch()
            con.execute(ENDLESS).fetchall()

    if AT == "ingest":  # inside the ingest's transaction
        load = Warehouse._load_csv

        def _load_csv(self, table, path):
            endless(self.con)
            return load(self, table, path)

        Warehouse._load_csv = _load_csv
    else:  # "query": a reading statement of report or compare
        query = Warehouse.query

        def _query(self, sql, params=None):
            endless(self.con)
            return query(self, sql, params)

        Warehouse.query = _query
    sys.exit(main(sys.argv[1:]))
    """
)


def _iofleet(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "iofleet", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result


def _rows(warehouse: Path) -> dict[str, int]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return {
            table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
            for table in ("runs", "slots", "fio_results", "ioping_requests")
        }
    finally:
        con.close()


def _stopped(tmp_path: Path, signum: int, at: str, *args: str) -> tuple[int, list[str]]:
    """Run `iofleet ARGS` under the driver, signal its group once DuckDB runs the endless
    statement at `at`; its exit status and stderr lines. Every process of it is gone."""
    mark = tmp_path / "mark"
    mark.unlink(missing_ok=True)
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, SIG_AT=at, SIG_MARK=str(mark), TMPDIR=str(tmp))
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen: dict[int, int] = {}
    try:
        wait_for(mark.exists, 120, f"the {at} statement")
        seen.update(tree(proc.pid))
        os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert alive(seen) == []
    assert files_under(tmp) == []
    return proc.returncode, err.splitlines()


def _temp_files(path: Path) -> list[str]:
    """Temp files in --out: `*.tmp`, or under a dot-name (`.import-RUN/`, the ingest's
    `.iofleet-load-*/`, a report's `.report.html.*.tmp`), the --out lock aside."""
    return [
        f
        for f in files_under(path)
        if (f.endswith(".tmp") or any(part.startswith(".") for part in Path(f).parts))
        and f != ".iofleet.lock"
    ]


SIGNALS = pytest.mark.parametrize(
    "signum",
    [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)


@SIGNALS
def test_import_stopped_while_ingesting_imports_nothing(tmp_path: Path, signum: int) -> None:
    # given an --out holding one imported run
    _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", "first")
    warehouse = tmp_path / "out" / "warehouse.duckdb"
    before = _rows(warehouse)
    raw_before = sorted(p.name for p in (tmp_path / "out" / "raw").iterdir())
    # when: a second import is signalled inside its ingest's DuckDB statement
    code, lines = _stopped(
        tmp_path, signum, "ingest", "import", str(IOPING), "--out", "out", "--label", "second"
    )
    # then: 128 + signal, one line, the warehouse and raw/ exactly as before
    assert code == 128 + signum, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"iofleet: interrupted by {signal.Signals(signum).name}: "), lines
    assert "nothing imported" in lines[0]
    assert _rows(warehouse) == before
    assert sorted(p.name for p in (tmp_path / "out" / "raw").iterdir()) == raw_before
    assert _temp_files(tmp_path / "out") == []
    # and the next import works and brings in only its own run
    _iofleet(tmp_path, "import", str(IOPING), "--out", "out", "--label", "third")
    after = _rows(warehouse)
    assert after["runs"] == before["runs"] + 1
    assert after["ioping_requests"] > 0 and after["fio_results"] == before["fio_results"]


@SIGNALS
def test_import_into_a_new_out_stopped_while_ingesting_leaves_no_out(
    tmp_path: Path, signum: int
) -> None:
    # given no --out yet, nor its parent
    # when: an import into it is signalled inside its ingest's DuckDB statement
    code, lines = _stopped(
        tmp_path, signum, "ingest", "import", str(IOPING), "--out", "runs/out", "--label", "x"
    )
    # then: 128 + signal, one line, and nothing it made is left: no warehouse, raw/,
    # lock file, --out or parent
    assert code == 128 + signum, lines
    assert len(lines) == 1, lines
    assert "nothing imported" in lines[0]
    assert not (tmp_path / "runs").exists(), sorted((tmp_path / "runs").rglob("*"))


@SIGNALS
def test_report_stopped_while_querying_writes_no_html(tmp_path: Path, signum: int) -> None:
    # given a warehouse with one run and an earlier report.html beside it
    _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", "one")
    warehouse = tmp_path / "out" / "warehouse.duckdb"
    html = tmp_path / "out" / "report.html"
    html.write_text("the earlier report\n")
    before = _rows(warehouse)
    # when
    code, lines = _stopped(
        tmp_path, signum, "query", "report", "--warehouse", str(warehouse), "--html", str(html)
    )
    # then: 128 + signal, one line, the old report as it was, no temp file beside it
    assert code == 128 + signum, lines
    assert len(lines) == 1, lines
    name = signal.Signals(signum).name
    assert lines[0] == f"iofleet: interrupted by {name}: --html {html} not written (left as it was)"
    assert html.read_text() == "the earlier report\n"
    assert _temp_files(tmp_path / "out") == []
    assert _rows(warehouse) == before


@SIGNALS
def test_compare_stopped_while_querying_exits_with_the_signal(tmp_path: Path, signum: int) -> None:
    # given two imported runs
    out = tmp_path / "out"
    runs = [
        _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", label)
        .stdout.split(" as run ")[1]
        .split(":")[0]
        for label in ("a", "b")
    ]
    before = _rows(out / "warehouse.duckdb")
    # when
    code, lines = _stopped(
        tmp_path, signum, "query", "compare", *runs, "--warehouse", str(out / "warehouse.duckdb")
    )
    # then
    assert code == 128 + signum, lines
    assert lines == [f"iofleet: interrupted by {signal.Signals(signum).name}"]
    assert _rows(out / "warehouse.duckdb") == before
    assert _temp_files(out) == []


# --- the edges: the command's start (DuckDB being loaded) and the process's end ------

# `iofleet ARGS` as the command line runs it (`main()`, the whole process), stopping
# itself (SIGSTOP) at $SIG_AT: "duckdb", as the command starts to import DuckDB (a
# tenth of a second, before anything is read); "duckdb-init", inside DuckDB's extension
# module as it loads, where it calls back into Python to make an enum; "html-temp",
# once report's temp file for --html exists, before its name is returned; "exit", once main() has returned, where
# the interpreter's exit follows (closing DuckDB, finalising modules). $SIG_MARK is
# made first.
EDGE_DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path

    MARK, AT = Path(os.environ["SIG_MARK"]), os.environ["SIG_AT"]

    def stop():
        MARK.touch()
        os.kill(os.getpid(), signal.SIGSTOP)

    class StopAtDuckDB:
        def find_spec(self, name, path=None, target=None):
            if name == "duckdb":
                sys.meta_path.remove(self)
                stop()
            return None  # the usual finders import it

    if AT == "duckdb":
        sys.meta_path.insert(0, StopAtDuckDB())
    elif AT == "duckdb-init":  # inside DuckDB's extension module as it loads: it makes
        import enum  # its enums by calling back into Python (nanobind's enum_create)

        make = enum.EnumType.__call__

        def __call__(cls, value, names=None, *args, **kwargs):
            if names is not None and "duckdb" in sys.modules and not MARK.exists():
                stop()
            return make(cls, value, names, *args, **kwargs)

        enum.EnumType.__call__ = __call__
    elif AT == "html-temp":  # report's temp file for --html made, its name not yet returned
        import tempfile

        make_temp = tempfile.mkstemp

        def mkstemp(*args, **kwargs):
            made = make_temp(*args, **kwargs)
            if str(kwargs.get("prefix", "")).startswith(".report.html"):
                stop()
            return made

        tempfile.mkstemp = mkstemp
    elif AT == "html-renamed":  # report's temp file renamed over report.html, just now
        replace = os.replace

        def renamed(src, dst, **kwargs):
            replace(src, dst, **kwargs)
            if str(dst).endswith("report.html"):
                stop()

        os.replace = renamed
    from iofleet.cli import main

    code = main()
    if AT == "exit":
        stop()
    sys.exit(code)
    """
)


def _ignores(pid: int, signum: int) -> bool:
    """Whether the process ignores `signum` (SIG_IGN: the kernel drops it when sent)."""
    status = Path(f"/proc/{pid}/status").read_text()
    (mask,) = (int(line.split()[1], 16) for line in status.splitlines() if line[:6] == "SigIgn")
    return bool(mask >> (signum - 1) & 1)


def _at_the_edge(
    tmp_path: Path, at: str, signums: list[int], *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, list[str]]:
    """Run `iofleet ARGS` under EDGE_DRIVER; once it has stopped itself at `at`, send each
    of `signums` to its group in turn (`IOFLEET_TEST_PAUSE_AT` in `env`: the first is
    sent where that stops it, the others at `at`), and let it go on once each is pending
    (or has ended it). Its exit status, stdout and stderr lines; every process of it is
    gone and TMPDIR is empty. No timing is involved."""
    mark = tmp_path / "mark"
    mark.unlink(missing_ok=True)
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", EDGE_DRIVER, *args],
        cwd=tmp_path,
        env=dict(os.environ, SIG_AT=at, SIG_MARK=str(mark), TMPDIR=str(tmp), **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen: dict[int, int] = {}

    def stopped() -> bool:
        info = stat_fields(proc.pid)
        return info is not None and info[1] == "T"

    try:
        for i, signum in enumerate(signums):
            last = i == len(signums) - 1 or env is None
            ready = (lambda: mark.exists() and stopped()) if last else stopped
            wait_for(ready, 120, f"iofleet to stop itself before signal {i + 1}")
            seen.update(tree(proc.pid))
            os.killpg(proc.pid, signum)
            wait_for(
                lambda: (
                    signal_pending(proc.pid, signum)  # noqa: B023
                    or _ignores(proc.pid, signum)  # noqa: B023 - the kernel dropped it
                    or not stopped()
                ),  # its default action ended it
                60,
                "the signal to reach it",
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            if not last:  # it goes on, to stop again at `at`
                wait_for(lambda: not stopped(), 60, "iofleet to go on")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert alive(seen) == []
    assert files_under(tmp) == []
    return proc.returncode, out, err.splitlines()


@SIGNALS
def test_a_signal_while_the_command_loads_duckdb_stops_it_with_one_line(
    tmp_path: Path, signum: int
) -> None:
    # given an --out holding one imported run
    _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", "first")
    warehouse = tmp_path / "out" / "warehouse.duckdb"
    before = _rows(warehouse)
    # when: a second import is signalled as it starts to import DuckDB
    code, _, lines = _at_the_edge(
        tmp_path, "duckdb", [signum], "import", str(IOPING), "--out", "out", "--label", "second"
    )
    # then: 128 + signal and one line (before, SIGTERM and SIGHUP killed it outright,
    # SIGINT printed a traceback), nothing imported
    assert code == 128 + signum, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"iofleet: interrupted by {signal.Signals(signum).name}"), lines
    assert _rows(warehouse) == before
    assert _temp_files(tmp_path / "out") == []


@SIGNALS
@pytest.mark.parametrize("command", ["import", "report", "compare"])
def test_a_signal_while_duckdb_loads_its_extension_waits_until_it_has(
    tmp_path: Path, signum: int, command: str
) -> None:
    # given an --out holding two imported runs
    for label in ("a", "b"):
        _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", label)
    warehouse = tmp_path / "out" / "warehouse.duckdb"
    before = _rows(warehouse)
    args = {
        "import": ["import", str(IOPING), "--out", "out", "--label", "c"],
        "report": ["report", "--warehouse", str(warehouse), "--html", "out/report.html"],
        "compare": ["compare", *_run_ids(warehouse), "--warehouse", str(warehouse)],
    }[command]
    # when: the command is signalled while DuckDB's extension module runs Python code
    code, _, lines = _at_the_edge(tmp_path, "duckdb-init", [signum], *args)
    # then: 128 + signal and one line once DuckDB has loaded (before: its Interrupted
    # was raised inside the extension's initialisation, which aborted the process)
    assert code == 128 + signum, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"iofleet: interrupted by {signal.Signals(signum).name}"), lines
    assert _rows(warehouse) == before
    assert not (tmp_path / "out" / "report.html").exists()
    assert _temp_files(tmp_path / "out") == []


def _report_stopped(tmp_path: Path, at: str, signum: int) -> tuple[int, list[str], Path]:
    """`report --html out/report.html` on a warehouse with one run, over an earlier
    report.html, stopped by `signum` at `at` (EDGE_DRIVER): its exit status, stderr
    lines and the report's path."""
    _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", "one")
    warehouse = tmp_path / "out" / "warehouse.duckdb"
    html = tmp_path / "out" / "report.html"
    html.write_text("the earlier report\n")
    code, _, lines = _at_the_edge(
        tmp_path, at, [signum], "report", "--warehouse", str(warehouse), "--html", str(html)
    )
    assert code == 128 + signum, lines
    assert _temp_files(tmp_path / "out") == []
    return code, lines, html


@SIGNALS
def test_a_signal_as_the_html_temp_file_is_made_leaves_no_temp_file(
    tmp_path: Path, signum: int
) -> None:
    # when: report is signalled as its temp file is made
    _, lines, html = _report_stopped(tmp_path, "html-temp", signum)
    # then: the old report as it was and no temp file beside it (before: an empty
    # .report.html.*.tmp stayed, which no later report removes)
    assert lines == [
        f"iofleet: interrupted by {signal.Signals(signum).name}: --html {html} not written "
        "(left as it was)"
    ]
    assert html.read_text() == "the earlier report\n"


@SIGNALS
def test_a_signal_just_after_the_html_rename_says_the_report_is_written(
    tmp_path: Path, signum: int
) -> None:
    # when: report is signalled just after its new report.html is renamed into place
    _, lines, html = _report_stopped(tmp_path, "html-renamed", signum)
    # then: the new report is there, and the one line says so (before: "not written
    # (left as it was)", over the new report)
    assert lines == [
        f"iofleet: interrupted by {signal.Signals(signum).name}: --html {html} written"
    ]
    assert html.read_text().startswith("<!DOCTYPE html>")


def _run_ids(warehouse: Path) -> list[str]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT run_id FROM runs").fetchall())
    finally:
        con.close()


@SIGNALS
def test_a_signal_once_the_command_has_ended_is_let_go(tmp_path: Path, signum: int) -> None:
    # given an import that has done its work: main() returned, the interpreter exits
    code, out, lines = _at_the_edge(
        tmp_path, "exit", [signum], "import", str(FIO), "--out", "out", "--label", "one"
    )
    # then: it exits as it would have, 0, its run imported (before: killed by the signal,
    # SIGINT with a traceback)
    assert code == 0, lines
    assert lines == []
    assert out.startswith("imported 1 of 1 files as run ")
    assert _rows(tmp_path / "out" / "warehouse.duckdb")["runs"] == 1


@pytest.mark.parametrize(
    "signums",
    [
        (signal.SIGINT, signal.SIGTERM),
        (signal.SIGTERM, signal.SIGHUP),
        (signal.SIGHUP, signal.SIGINT),
    ],
    ids=["SIGINT-SIGTERM", "SIGTERM-SIGHUP", "SIGHUP-SIGINT"],
)
def test_a_second_signal_as_an_interrupted_command_exits_is_let_go(
    tmp_path: Path, signums: tuple[int, int]
) -> None:
    # given an --out holding one imported run
    _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", "first")
    warehouse = tmp_path / "out" / "warehouse.duckdb"
    before = _rows(warehouse)
    # when: a second import is signalled in its ingest (its rows written for DuckDB),
    # and again as it exits
    first, second = signums
    code, _, lines = _at_the_edge(
        tmp_path,
        "exit",
        [first, second],
        "import",
        str(IOPING),
        "--out",
        "out",
        "--label",
        "second",
        env={"IOFLEET_TEST_PAUSE_AT": "temp-load"},
    )
    # then: it exits as the first signal, its one line said (before: killed by the second)
    assert code == 128 + first, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"iofleet: interrupted by {signal.Signals(first).name}: nothing")
    assert _rows(warehouse) == before
    assert _temp_files(tmp_path / "out") == []


# The removal of a run that did not land, cut by a SIGKILL (a second Ctrl-C's escalation,
# the OOM killer): no local engine stops a process in the middle of a directory removal,
# so the driver does it (a hand-written stand-in, for that instant only). The ingest is
# stopped as a Ctrl-C inside its statement ends it (KeyboardInterrupt).
KILL_DRIVER = textwrap.dedent(
    """
    import os, shutil, signal, sys
    from pathlib import Path
    from iofleet.cli import main
    from iofleet.results.warehouse import Warehouse

    def _load_csv(self, table, path):
        raise KeyboardInterrupt

    Warehouse._load_csv = _load_csv
    rmtree = shutil.rmtree

    def _rmtree(path, *args, **kwargs):
        slots = sorted(Path(path).glob("*/slot-*"))
        if len(slots) > 1:  # the run's folder: remove one slot of it, then die
            rmtree(slots[0])
            os.kill(os.getpid(), signal.SIGKILL)
        return rmtree(path, *args, **kwargs)

    shutil.rmtree = _rmtree
    sys.exit(main(sys.argv[1:]))
    """
)


def test_an_import_killed_while_removing_a_run_that_did_not_land_leaves_no_part_of_it(
    tmp_path: Path,
) -> None:
    # given an --out holding one imported run
    _iofleet(tmp_path, "import", str(FIO), "--out", "out", "--label", "first")
    warehouse = tmp_path / "out" / "warehouse.duckdb"
    before = _rows(warehouse)
    # when: an import of 4 files (4 slots) is stopped inside its ingest, and killed once
    # the removal of its run's files has begun
    files = [
        FIO,
        IOPING,
        FIXTURES / "ioping" / "write-c11.json",
        FIXTURES / "fio" / "json-randread.json",
    ]
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_DRIVER,
            "import",
            *map(str, files),
            "--out",
            "out",
            "--label",
            "second",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # then: the next import brings in its own run only: no slot of the killed one, whose
    # remains it removes, and raw/ holds no folder of it
    _iofleet(tmp_path, "import", str(IOPING), "--out", "out", "--label", "third")
    after = _rows(warehouse)
    assert after["runs"] == before["runs"] + 1
    assert after["slots"] == before["slots"] + 1
    assert after["fio_results"] == before["fio_results"]
    out = tmp_path / "out"
    assert not [p for p in (out / "raw").iterdir() if p.name.startswith("second-")]
    assert not [p for p in out.iterdir() if p.name.startswith(".import-")]
