"""`iofleet local` stopped by SIGINT, SIGTERM or SIGHUP at awkward moments.

Each test runs the real command (real agents, fio, ioping, bash apps, a DuckDB file)
in its own session and process group, as a shell runs a foreground job, waits for an
observable marker of the moment (a fifo the workload opened, a process in /proc, a
line on stderr, a file), sends the signal to that process group (what Ctrl-C does
from a terminal), and reads the outcome where it lands: the process table, /proc/mounts
and `losetup -a`, the target, --out and TMPDIR directories, the warehouse, and a
next run into the same --out.

Two moments inside the runner cannot be seen from outside (a DuckDB statement of the
ingest; the report being written), so for those a driver wraps one internal function
to mark the moment and make it last until the signal comes; everything else is the
real code. Two points that last no time at all (a workload's end before its output
is saved; the last cell's end before run.json) are reached with the env-guarded hook
of iofleet.testhook: the process stops itself there, the test signals the run and
continues it once /proc shows the signal pending (`paused`). Most tests have one
shape, `interrupt`: start, wait for the moment, signal the group, wait for the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.integration.proctable import (
    alive,
    comm,
    files_under,
    runs_workload,
    signal_pending,
    stat_fields,
    tree,
    wait_for,
)

pytestmark = pytest.mark.slow

IOPING = {"ioping": {"count": 3, "interval_ms": 0, "write": False}}


def _long_fio(runtime_s: int = 120) -> dict:
    return {
        "fio": "randwrite-16k-psync-16jobs",
        "params": {"RUNTIME": runtime_s, "SIZE": "4m", "NUM_JOBS": 2},
    }


def _matrix(tmp_path: Path, workloads: list[dict], fleets: list[int], name: str = "sig") -> Path:
    doc = {
        "name": name,
        "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "target")}],
        "workloads": workloads,
        "parallelism": fleets,
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


# Runs `iofleet local ...` with one internal function wrapped: at the moment named by
# $SIG_AT it creates the file $SIG_MARK, then lasts until a signal interrupts it.
DRIVER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from iofleet.cli import main

    MARK, AT = Path(os.environ["SIG_MARK"]), os.environ["SIG_AT"]

    if AT == "ingest":  # inside the ingest's transaction, in a DuckDB statement
        from iofleet.results.warehouse import Warehouse

        load = Warehouse._load_csv

        def _load_csv(self, table, path):
            if not MARK.exists():
                MARK.touch()
                self.con.execute("SELECT count(*) FROM range(1000000000000000)").fetchall()
            return load(self, table, path)

        Warehouse._load_csv = _load_csv
    elif AT == "report":  # the run is ingested; its report is rendered, not yet written
        import iofleet.report.html as html

        render = html.render_html

        def render_html(data):
            text = render(data)
            MARK.touch()
            with open(os.environ["SIG_GATE"]) as gate:  # nobody writes: blocks
                gate.read()
            return text

        html.render_html = render_html
    elif AT == "finalizer":  # the runner's own SIGTERM, in a finalizer of its slot wait
        import signal
        from iofleet.local.slots import SlotProcess

        class SignalsWhenCollected:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)  # the runner alone, not its group
                sum(range(10_000))  # its handler runs here, inside the finalizer

        done = SlotProcess.artifacts_done

        def artifacts_done(self):
            if not MARK.exists() and (self.raw_dir / "w00-ioping.json").exists():
                MARK.touch()
                SignalsWhenCollected()  # collected at once
            return done(self)

        SlotProcess.artifacts_done = artifacts_done
    elif AT == "duckdb-init":  # DuckDB's extension module calls back into Python as it
        import enum, signal  # loads (nanobind makes its enums): the runner stops there

        make = enum.EnumType.__call__

        def __call__(cls, value, names=None, *args, **kwargs):
            if names is not None and "duckdb" in sys.modules and not MARK.exists():
                MARK.touch()
                os.kill(os.getpid(), signal.SIGSTOP)
            return make(cls, value, names, *args, **kwargs)

        enum.EnumType.__call__ = __call__
    sys.exit(main(sys.argv[1:]))
    """
)


class Run:
    """`iofleet local MATRIX --out out` in its own process group; stderr collected."""

    def __init__(
        self,
        tmp_path: Path,
        matrix: Path,
        quiet: bool = True,
        driver: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ):
        self.tmp = tmp_path / "tmp"  # the run's TMPDIR: must be empty afterwards
        self.tmp.mkdir(exist_ok=True)
        env = dict(os.environ, IOFLEET_CBUILD_FILES="12", TMPDIR=str(self.tmp), **(env or {}))
        head = [sys.executable, "-m", "iofleet"]  # as the `iofleet` command runs (__main__)
        if driver is not None:
            env.update(driver)
            head = [sys.executable, "-c", DRIVER]
        with (tmp_path / "stdout").open("wb") as stdout:
            self.proc = subprocess.Popen(
                [*head, "local", str(matrix), "--out", "out", *(["-q"] if quiet else [])],
                cwd=tmp_path,
                env=env,
                stdout=stdout,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        self.lines: list[str] = []
        self.seen: dict[int, int] = {}  # {pid: starttime} of every process seen below it
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def look(self) -> dict[int, int]:
        """The runner's process tree now (remembered for the end)."""
        procs = tree(self.proc.pid)
        self.seen.update(procs)
        return procs

    def signal(self, signum: int) -> None:
        self.look()
        os.killpg(self.proc.pid, signum)  # the group: as a terminal sends Ctrl-C

    def finish(self, timeout: float = 180) -> int:
        """Its exit status (bounded: a run that does not end is killed, and fails)."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(timeout=30)
        return self.proc.returncode

    def stderr(self) -> str:
        return "\n".join(self.lines)


def interrupt(
    tmp_path: Path,
    matrix: Path,
    signum: int,
    ready: Callable[[Run], object],
    what: str,
    **kwargs: Any,
) -> tuple[Run, int]:
    """The shape of these tests: start `iofleet local MATRIX`, wait until `ready(run)`
    (bounded, `what` names it), signal the run's process group, wait for its end.
    Returns the run and its exit status; the run never outlives the test."""
    run = Run(tmp_path, matrix, **kwargs)
    try:
        wait_for(lambda: ready(run), 120, what)
        run.signal(signum)
        code = run.finish()
    finally:
        run.finish()
    return run, code


def paused(
    tmp_path: Path,
    matrix: Path,
    point: str,
    signum: int | tuple[int, ...],
    who: Callable[[Run], int | None],
) -> tuple[Run, int]:
    """Signal the run at exactly `point` (iofleet.testhook): the process `who(run)` finds
    stops itself (SIGSTOP) there; the run's group is signalled; once that signal waits,
    undelivered, on the stopped process (the runner's own, or the one it passes on to
    an agent), it is continued (SIGCONT). No timing is involved. Several signals: all
    are sent, and wait together, before it goes on (they come in the same instant)."""
    signals = (signum,) if isinstance(signum, int) else signum
    stopped: list[int] = []

    def at_point(run: Run) -> bool:
        pid = who(run)
        info = stat_fields(pid) if pid is not None else None
        if info is not None and info[1] == "T":
            stopped.append(pid)  # type: ignore[arg-type]
            return True
        return False

    run = Run(tmp_path, matrix, env={"IOFLEET_TEST_PAUSE_AT": point})
    try:
        wait_for(lambda: at_point(run), 120, f"the run to stop at {point}")
        for each in signals:
            run.signal(each)
            wait_for(partial(signal_pending, stopped[0], each), 60, "the signal to reach it")
        os.kill(stopped[0], signal.SIGCONT)
        code = run.finish()
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        run.finish()
    return run, code


def _open_writer(fifo: Path) -> int | None:
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader yet
        return None


def gated_populate(
    tmp_path: Path, writes: str = 'echo data > "$IOFLEET_SHARED/data"'
) -> tuple[dict, Path]:
    """An app workload whose populate step runs `writes` (its shared data) and then waits
    on a fifo made here: it runs on once a writer the test holds is closed (the step
    succeeds); `_open_writer(fifo)` succeeds once it waits. The workload and the fifo."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    app = {
        "app": {
            "name": "pop",
            "populate": f"{writes}; read line < {gate} || true",
            "run": 'cat "$IOFLEET_SHARED/data"',
        }
    }
    return app, gate


def _under(tmp_path: Path) -> list[tuple[int, str]]:
    """Live processes whose command line or working directory is under tmp_path."""
    found = []
    me = str(tmp_path).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{name}/cwd").encode()
        except OSError:
            continue
        info = stat_fields(int(name))
        if (me in cmdline or cwd.startswith(me)) and info and info[1] not in ("Z", "X"):
            found.append((int(name), comm(int(name))))
    return found


def assert_nothing_left(tmp_path: Path, run: Run) -> None:
    """No process of the run, no mount or loop device, nothing on the target, nothing in
    TMPDIR, no temp file in --out."""
    assert alive(run.seen) == [], [(p, comm(p)) for p in alive(run.seen)]
    assert _under(tmp_path) == []
    mounts = Path("/proc/mounts").read_text()
    assert str(tmp_path) not in mounts
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in loops
    target = tmp_path / "target"
    assert not target.exists() or list(target.iterdir()) == []
    # TMPDIR as it was: not even an empty directory (a SIGKILLed agent's app left its
    # iofleet-app-* there, with what the app wrote in it, before iofleet.local.runtemp)
    assert sorted(p.name for p in run.tmp.iterdir()) == []
    out = tmp_path / "out"
    leftovers = [
        f
        for f in files_under(out)
        if f.endswith(".tmp") or (Path(f).name.startswith(".") and f != ".iofleet.lock")
    ]
    assert leftovers == []


def _query(tmp_path: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _the_line(run: Run, signame: str) -> str:
    """The run says what happened in one line (the runs here are quiet: -q)."""
    lines = [line for line in run.lines if "interrupted" in line]
    assert len(lines) == 1, run.stderr()
    assert lines[0].startswith(f"iofleet: interrupted by {signame}"), lines[0]
    return lines[0]


def _run_ids(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "out" / "raw").iterdir() if p.is_dir())


def _next_run(tmp_path: Path, out: str = "out", name: str = "next") -> str:
    """A second `iofleet local` (a one-slot ioping run on the same target), by default
    into the same --out: exit 0; its stderr."""
    quick = _matrix(tmp_path, [IOPING], [1], name=name)
    result = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "local", str(quick), "--out", out, "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


# --- while populating: the cell's shared data is being written ---------------------


def test_sigint_while_populating_removes_the_cell_data_and_runs_no_slot(tmp_path: Path) -> None:
    # given a cell whose app populates shared data once, then waits on a fifo
    app, gate = gated_populate(tmp_path)
    run = Run(tmp_path, _matrix(tmp_path, [app, IOPING], [2]))
    writer = None
    try:
        writer = wait_for(lambda: _open_writer(gate), 120, "the populate step to start")
        # when: Ctrl-C while it populates
        run.signal(signal.SIGINT)
        code = run.finish()
    finally:
        if writer:
            os.close(writer)
        run.finish()
    # then: 130, one line, nothing left (the populate data included), no slot started
    assert code == 130, run.stderr()
    _the_line(run, "SIGINT")
    assert_nothing_left(tmp_path, run)
    assert _query(tmp_path, "SELECT status FROM runs") == [("ABORTED",)]
    assert _query(tmp_path, "SELECT count(*) FROM slots") == [(0,)]


# --- while fio runs: the completed ioping is kept, the cut fio never lands ---------


def test_sigterm_during_fio_keeps_the_finished_workloads_and_the_next_run_ingests(
    tmp_path: Path,
) -> None:
    # given 2 slots that measured ioping and now run a long fio
    def ready(run: Run) -> bool:
        done = len(list((tmp_path / "out" / "raw").glob("*/*/slot-*/w00-ioping.json")))
        return done == 2 and sum(runs_workload(p, "fio") for p in run.look()) >= 6

    # when
    matrix = _matrix(tmp_path, [IOPING, _long_fio()], [2])
    run, code = interrupt(tmp_path, matrix, signal.SIGTERM, ready, "both slots' fio")
    # then: 143, one line, nothing left
    assert code == 143, run.stderr()
    _the_line(run, "SIGTERM")
    assert_nothing_left(tmp_path, run)
    # the ioping results are on disk and in the warehouse; no fio row: fio was cut short,
    # its slot.json says so, and no partial fio file was written
    (run_id,) = _run_ids(tmp_path)
    raw = tmp_path / "out" / "raw" / run_id
    assert sorted(p.name for p in raw.glob("*/slot-*/w*")) == ["w00-ioping.json"] * 2
    for record in raw.glob("*/slot-*/slot.json"):
        doc = json.loads(record.read_text())
        assert [(w["status"], w["artifact"]) for w in doc["workloads"]][1] == ("FAILED", None)
    assert _query(tmp_path, "SELECT status FROM runs") == [("ABORTED",)]
    assert (
        _query(tmp_path, "SELECT status, error FROM slots")
        == [("FAILED", "slot interrupted by a signal")] * 2
    )
    assert _query(tmp_path, "SELECT count(*) FROM ioping_requests") == [(4,)]
    assert _query(tmp_path, "SELECT count(*) FROM fio_results") == [(0,)]
    # and a next run into the same --out runs and keeps this run's rows as they are
    _next_run(tmp_path)
    assert _query(tmp_path, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{run_id}'") == [
        (4,)
    ]
    assert _query(tmp_path, "SELECT count(*) FROM runs") == [(2,)]


# --- while fio lays its file out, before its timed phase ----------------------------


def test_sigint_while_fio_lays_out_its_file_removes_it(tmp_path: Path) -> None:
    # given a slot whose fio lays out an 8 GiB file (several seconds of writes)
    layout = {"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 60, "SIZE": "8g"}}

    def ready(run: Run) -> object:
        return any(runs_workload(p, "fio") for p in run.look()) and list(
            (tmp_path / "target").glob("iofleet-*/*/slot-0000/randread*")
        )

    # when
    matrix = _matrix(tmp_path, [layout], [1])
    run, code = interrupt(tmp_path, matrix, signal.SIGINT, ready, "fio to lay out its file")
    # then: 130, one line, the file and everything else gone, the slot FAILED, no fio row
    assert code == 130, run.stderr()
    _the_line(run, "SIGINT")
    assert_nothing_left(tmp_path, run)
    assert _query(tmp_path, "SELECT status, error FROM slots") == [
        ("FAILED", "slot interrupted by a signal")
    ]
    assert _query(tmp_path, "SELECT count(*) FROM fio_results") == [(0,)]


# --- while ioping runs -------------------------------------------------------------


def test_sighup_during_ioping_keeps_the_fio_results(tmp_path: Path) -> None:
    # given a slot that ran a short fio and now a long ioping (600 requests, 50 ms apart)
    slow_ioping = {"ioping": {"count": 600, "interval_ms": 50, "write": False}}
    # when: the terminal hangs up while ioping runs
    run, code = interrupt(
        tmp_path,
        _matrix(tmp_path, [_long_fio(1), slow_ioping], [1]),
        signal.SIGHUP,
        lambda run: any(runs_workload(p, "ioping") for p in run.look()),
        "ioping to run",
    )
    # then: 129, one line, nothing left, fio's rows in, no ioping row
    assert code == 129, run.stderr()
    _the_line(run, "SIGHUP")
    assert_nothing_left(tmp_path, run)
    assert _query(tmp_path, "SELECT count(*) > 0 FROM fio_results") == [(True,)]
    assert _query(tmp_path, "SELECT count(*) FROM ioping_requests") == [(0,)]
    assert _query(tmp_path, "SELECT status FROM slots") == [("FAILED",)]


# --- while a slot cleans up after its last workload --------------------------------


def test_sigterm_while_a_slot_cleans_up_keeps_its_own_record(tmp_path: Path) -> None:
    # given a slot whose only workload leaves 30,000 files to remove from the target
    many = {
        "app": {
            "name": "many",
            "run": "python3 -c \"[open(f'f{i}', 'w').close() for i in range(30000)]\"",
        }
    }
    # when: SIGTERM as the slot removes its files (its workload's timing is written)
    run, code = interrupt(
        tmp_path,
        _matrix(tmp_path, [many], [1]),
        signal.SIGTERM,
        lambda run: list((tmp_path / "out" / "raw").glob("*/*/slot-0000/w00-app-many.json")),
        "the app's timing (its workload done)",
    )
    # then: 143, nothing left, and the slot, whose workload ran, recorded itself whole
    assert code == 143, run.stderr()
    _the_line(run, "SIGTERM")
    assert_nothing_left(tmp_path, run)
    (record,) = (tmp_path / "out" / "raw").glob("*/*/slot-0000/slot.json")
    doc = json.loads(record.read_text())
    assert "recorded_by" not in doc
    assert [w["status"] for w in doc["workloads"]] == ["SUCCEEDED"]
    assert _query(tmp_path, "SELECT status FROM slots") == [("SUCCEEDED",)]
    assert _query(tmp_path, "SELECT count(*) FROM app_runs") == [(1,)]


# --- the terminal hangs up: SIGHUP, and stdout and stderr are gone ----------------


def test_a_hang_up_with_the_terminal_gone_still_cleans_up_and_ingests(tmp_path: Path) -> None:
    # given a run writing its progress to a terminal (a pty), its slot in a long fio
    master, slave = os.openpty()
    matrix = _matrix(tmp_path, [IOPING, _long_fio()], [1])
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "iofleet.cli", "local", str(matrix), "--out", "out"],
            cwd=tmp_path,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    seen: dict[int, int] = {}
    try:
        wait_for(
            lambda: (
                _drain(master)
                or seen.update(tree(run.pid))
                or sum(runs_workload(p, "fio") for p in seen) >= 3
            ),
            120,
            "the slot's fio",
        )
        # when: the terminal goes away (writes to it now fail with EIO) and SIGHUP comes
        os.close(master)
        master = -1
        seen.update(tree(run.pid))
        os.killpg(run.pid, signal.SIGHUP)
        code = run.wait(timeout=180)
    finally:
        if master >= 0:
            os.close(master)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    # then: 129, nothing left, and what was measured is ingested
    assert code == 129
    assert alive(seen) == []
    assert _under(tmp_path) == []
    assert list((tmp_path / "target").iterdir()) == []
    assert _query(tmp_path, "SELECT status FROM runs") == [("ABORTED",)]
    assert _query(tmp_path, "SELECT count(*) FROM ioping_requests") == [(2,)]
    assert (tmp_path / "out" / "report.html").is_file()


def _drain(fd: int) -> None:
    """Read what the run wrote to the terminal so far, as a terminal would."""
    try:
        while os.read(fd, 65536):
            pass
    except BlockingIOError:  # nothing more for now
        pass


# --- between cells: one cell done, the next one's agents starting ------------------


def test_sigint_between_cells_keeps_the_finished_cell(tmp_path: Path) -> None:
    # given a run of two cells (1 slot, then 4), shown with progress lines
    # when: Ctrl-C as the second cell starts
    run, code = interrupt(
        tmp_path,
        _matrix(tmp_path, [IOPING], [1, 4]),
        signal.SIGINT,
        lambda run: any(
            line.startswith("[cell 1/2]") and " slots in " in line for line in run.lines
        ),
        "the first cell to finish",
        quiet=False,
    )
    # then: 130, nothing left
    assert code == 130, run.stderr()
    assert_nothing_left(tmp_path, run)
    assert [line for line in run.lines if line.startswith("iofleet: interrupted by SIGINT")]
    # the first cell's slot and its rows are in; any slot of the second cell that had
    # started is recorded FAILED and brings no partial row
    rows = _query(tmp_path, "SELECT cell_index, status FROM slots ORDER BY cell_index")
    assert rows[0] == (0, "SUCCEEDED")
    assert all(status == "FAILED" for cell, status in rows[1:] if cell == 1), rows
    ioping = "SELECT left(cell_id, 4), count(*) FROM ioping_requests GROUP BY ALL"
    assert _query(tmp_path, ioping) == [("c000", 2)]
    assert _query(tmp_path, "SELECT status FROM runs") == [("ABORTED",)]


# --- while ingesting, inside a DuckDB statement of the ingest's transaction ---------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_ingest_leaves_the_warehouse_as_it_was(
    tmp_path: Path, signum: signal.Signals
) -> None:
    # given a finished one-slot run whose ingest is inside a DuckDB statement
    mark = tmp_path / "ingesting"
    # when
    run, code = interrupt(
        tmp_path,
        _matrix(tmp_path, [IOPING], [1]),
        signum,
        lambda run: mark.exists(),
        "the ingest",
        driver={"SIG_AT": "ingest", "SIG_MARK": str(mark)},
    )
    # then: 128 + signal, one line that says where the results are, nothing left
    assert code == 128 + signum, run.stderr()
    line = _the_line(run, signum.name)
    assert "while ingesting" in line and "next iofleet local" in line
    assert_nothing_left(tmp_path, run)
    # the warehouse opens and holds nothing of the run (no partial rows)
    assert _query(tmp_path, "SELECT count(*) FROM runs") == [(0,)]
    assert _query(tmp_path, "SELECT count(*) FROM ioping_requests") == [(0,)]
    # the raw results are on disk, and the next run ingests them whole
    (run_id,) = _run_ids(tmp_path)
    assert (
        json.loads((tmp_path / "out" / "raw" / run_id / "run.json").read_text())["status"]
        == "SUCCEEDED"
    )
    _next_run(tmp_path)
    assert _query(tmp_path, f"SELECT status FROM slots WHERE run_id = '{run_id}'") == [
        ("SUCCEEDED",)
    ]
    assert _query(tmp_path, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{run_id}'") == [
        (2,)
    ]


def test_a_signal_that_lands_in_a_finalizer_still_stops_the_run(tmp_path: Path) -> None:
    # given a slot in a long fio, and a SIGTERM to the runner alone whose handler runs
    # inside a finalizer (Python prints what one raises, and drops it)
    mark = tmp_path / "collected"
    run = Run(
        tmp_path,
        _matrix(tmp_path, [IOPING, _long_fio()], [1]),
        driver={"SIG_AT": "finalizer", "SIG_MARK": str(mark)},
    )
    try:
        wait_for(lambda: mark.exists() and run.look(), 120, "the finalizer")
        # when the run goes on
        code = run.finish()
    finally:
        run.finish()
    # then it stops as for any SIGTERM: 143, one line, no traceback, nothing left
    assert code == 143, run.stderr()
    _the_line(run, "SIGTERM")
    assert "Traceback" not in run.stderr() and "Exception ignored" not in run.stderr()
    assert_nothing_left(tmp_path, run)
    assert _query(tmp_path, "SELECT status, error FROM slots") == [
        ("FAILED", "slot interrupted by a signal")
    ]


def test_a_second_signal_while_ingesting_a_stopped_run_leaves_it_to_the_next_run(
    tmp_path: Path,
) -> None:
    # given a run stopped by Ctrl-C during its fio, now ingesting what it measured
    mark = tmp_path / "ingesting"
    run = Run(
        tmp_path,
        _matrix(tmp_path, [IOPING, _long_fio()], [1]),
        driver={"SIG_AT": "ingest", "SIG_MARK": str(mark)},
    )
    try:
        wait_for(
            lambda: sum(runs_workload(p, "fio") for p in run.look()) >= 3, 120, "the slot's fio"
        )
        run.signal(signal.SIGINT)
        wait_for(mark.exists, 120, "the ingest")
        # when: SIGTERM while it ingests
        run.signal(signal.SIGTERM)
        code = run.finish()
    finally:
        run.finish()
    # then: the first signal's status, one line naming both, nothing left, no row of it
    assert code == 130, run.stderr()
    line = _the_line(run, "SIGINT")
    assert "then by SIGTERM while ingesting" in line
    assert_nothing_left(tmp_path, run)
    assert _query(tmp_path, "SELECT count(*) FROM runs") == [(0,)]
    # and the next run ingests it: ABORTED, its slot FAILED, its ioping kept
    (run_id,) = _run_ids(tmp_path)
    _next_run(tmp_path)
    assert _query(tmp_path, f"SELECT status FROM runs WHERE run_id = '{run_id}'") == [("ABORTED",)]
    assert _query(tmp_path, f"SELECT status FROM slots WHERE run_id = '{run_id}'") == [("FAILED",)]
    assert _query(tmp_path, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{run_id}'") == [
        (2,)
    ]


# --- while the report is written ---------------------------------------------------


def test_sigterm_while_reporting_keeps_the_ingested_run_and_the_old_report(
    tmp_path: Path,
) -> None:
    # given an --out with a report from an earlier run, and a run about to write its own
    _next_run(tmp_path)
    old_report = (tmp_path / "out" / "report.html").read_bytes()
    mark, gate = tmp_path / "reporting", tmp_path / "gate"
    os.mkfifo(gate)
    run = Run(
        tmp_path,
        _matrix(tmp_path, [IOPING], [1]),
        driver={"SIG_AT": "report", "SIG_MARK": str(mark), "SIG_GATE": str(gate)},
    )
    try:
        wait_for(mark.exists, 120, "the report")
        # when
        run.signal(signal.SIGTERM)
        code = run.finish()
    finally:
        writer = _open_writer(gate)  # unblocks a driver that was not interrupted
        if writer:
            os.close(writer)
        run.finish()
    # then: 143, one line naming the command that writes the report, nothing left
    assert code == 143, run.stderr()
    line = _the_line(run, "SIGTERM")
    assert "iofleet report --warehouse" in line
    assert_nothing_left(tmp_path, run)
    # the run is in the warehouse, whole; the earlier report is as it was
    new_run = [r for r in _run_ids(tmp_path) if r.startswith("sig-")][0]
    assert _query(tmp_path, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{new_run}'") == [
        (2,)
    ]
    assert (tmp_path / "out" / "report.html").read_bytes() == old_report


# --- a second Ctrl-C while the first one is being handled ---------------------------


def test_a_second_sigint_during_cleanup_kills_the_slots_and_still_cleans_up(
    tmp_path: Path,
) -> None:
    # given 2 slots that measured ioping and now run an app that ignores SIGTERM (each
    # slot's guardian gives it 5 s before SIGKILL, the runner its agents 10 s) and has
    # written a file in its TMPDIR, as a compiler does
    marks = tmp_path / "marks"
    marks.mkdir()
    stubborn = {
        "app": {
            "name": "stubborn",
            "run": (
                f"trap 'touch {marks}/term-$IOFLEET_SLOT' TERM; echo x > \"$TMPDIR/cc.s\"; "
                f"touch {marks}/ready-$IOFLEET_SLOT; while :; do sleep 0.05; done"
            ),
        }
    }
    run = Run(tmp_path, _matrix(tmp_path, [IOPING, stubborn], [2]))
    try:
        wait_for(
            lambda: {p.name for p in marks.iterdir()} >= {"ready-0", "ready-1"},
            120,
            "both apps to start",
        )
        # when: Ctrl-C, and again once the apps have been asked to stop and ignored it
        run.signal(signal.SIGINT)
        wait_for(
            lambda: {p.name for p in marks.iterdir()} >= {"term-0", "term-1"},
            60,
            "the apps to get SIGTERM",
        )
        run.signal(signal.SIGINT)
        code = run.finish()
    finally:
        run.finish()
    # then: 130, one line, every process gone, the target and TMPDIR clean (the agents
    # were SIGKILLed: the runner removed their apps' temp directories)
    assert code == 130, run.stderr()
    line = _the_line(run, "SIGINT")
    assert "not ingested" in line
    assert_nothing_left(tmp_path, run)
    # both slots are recorded FAILED with their ioping kept, and the next run ingests them
    (run_id,) = _run_ids(tmp_path)
    raw = tmp_path / "out" / "raw" / run_id
    assert sorted(p.name for p in raw.glob("*/slot-*/w*")) == ["w00-ioping.json"] * 2
    assert len(list(raw.glob("*/slot-*/slot.json"))) == 2
    _next_run(tmp_path)
    assert (
        _query(tmp_path, f"SELECT status FROM slots WHERE run_id = '{run_id}'") == [("FAILED",)] * 2
    )
    assert _query(tmp_path, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{run_id}'") == [
        (4,)
    ]
    assert _query(tmp_path, f"SELECT status FROM runs WHERE run_id = '{run_id}'") == [("ABORTED",)]


# --- at exactly the two points where a signal used to cost data (iofleet.testhook) ---


def _agent(run: Run) -> int | None:
    for pid in run.look():
        try:
            if b"agent" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return pid
        except OSError:
            continue
    return None


def test_sigterm_as_a_workload_ends_keeps_its_output(tmp_path: Path) -> None:
    # given a slot whose ioping has just exited, its output not yet saved, and a SIGTERM
    # that reaches the agent at exactly that point (from the runner stopping its slots)
    run, code = paused(
        tmp_path, _matrix(tmp_path, [IOPING], [1]), "workload-ended", signal.SIGTERM, _agent
    )
    # then: 143, one line, nothing left
    assert code == 143, run.stderr()
    _the_line(run, "SIGTERM")
    assert_nothing_left(tmp_path, run)
    # and the workload that ran to its end is kept: its file, its entry, its rows
    (record,) = (tmp_path / "out" / "raw").glob("*/*/slot-0000/slot.json")
    doc = json.loads(record.read_text())
    assert [(w["status"], w["artifact"] is not None) for w in doc["workloads"]] == [
        ("SUCCEEDED", True)
    ]
    assert doc["error"] == "slot interrupted by a signal"
    assert _query(tmp_path, "SELECT count(*) FROM ioping_requests") == [(2,)]
    assert _query(tmp_path, "SELECT status FROM runs") == [("ABORTED",)]


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGINT,), (signal.SIGINT, signal.SIGTERM)],
    ids=["SIGINT", "SIGINT+SIGTERM"],
)
def test_sigint_as_the_last_cell_ends_still_records_the_run(
    tmp_path: Path, signals: tuple[int, ...]
) -> None:
    # given a run whose only cell has finished, stopped just before its cleanup (the
    # orphans' kill, run.json), and a Ctrl-C at exactly that point (with a SIGTERM in
    # the same instant: both wait there)
    run, code = paused(
        tmp_path,
        _matrix(tmp_path, [IOPING], [1]),
        "runner-cleanup",
        signals,
        lambda run: run.proc.pid,
    )
    # then: 128 + the signal it took first (of two in one instant, either may be), one
    # line naming it that leaves the ingest to the next run, nothing left
    first = signal.Signals(code - 128) if code > 128 else None
    assert first in signals, run.stderr()
    line = _the_line(run, first.name)
    assert "next iofleet local" in line
    if len(signals) > 1:
        (second,) = set(signals) - {first}
        assert f"then by {signal.Signals(second).name} as the run ended" in line
        assert "SUCCEEDED" in line
    assert_nothing_left(tmp_path, run)
    # run.json was written (not left RUNNING for the next run to call its runner dead)
    (run_id,) = _run_ids(tmp_path)
    doc = json.loads((tmp_path / "out" / "raw" / run_id / "run.json").read_text())
    assert doc["status"] == "SUCCEEDED"
    # and the next run ingests it whole, without calling it interrupted
    said = _next_run(tmp_path)
    assert "was interrupted" not in said
    assert _query(tmp_path, f"SELECT status FROM runs WHERE run_id = '{run_id}'") == [
        ("SUCCEEDED",)
    ]
    assert _query(tmp_path, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{run_id}'") == [
        (2,)
    ]


def test_an_agent_killed_before_the_start_barrier_holds_no_other_slot_back(
    tmp_path: Path,
) -> None:
    # given a two-slot run whose agents stop themselves as they write their manifests,
    # before either has arrived at the cell's start barrier (iofleet.testhook)
    run = Run(
        tmp_path, _matrix(tmp_path, [IOPING], [2]), env={"IOFLEET_TEST_PAUSE_AT": "temp-artifact"}
    )
    killed: list[int] = []

    def step() -> bool:
        # when: the first agent stopped there is SIGKILLed; every other stop goes on
        for pid in run.look():
            info = stat_fields(pid)
            if info is None or info[1] != "T":
                continue
            if not killed:
                killed.append(pid)
            os.kill(pid, signal.SIGKILL if pid == killed[0] else signal.SIGCONT)
        return run.proc.poll() is not None

    try:
        # (bounded well below the barrier's timeout, 600 s, that the other slot would
        # wait out for a party that never comes)
        wait_for(step, 120, "the run to end")
        code = run.finish()
    finally:
        run.finish()
        for pid in alive(run.seen):  # an agent stopped there that the test left (failing)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    # then the run ends as with any dead agent: 1, nothing left
    assert code == 1, run.stderr()
    assert_nothing_left(tmp_path, run)
    # the dead slot is recorded FAILED, and the other one passed the barrier and measured
    rows = _query(tmp_path, "SELECT status, error FROM slots ORDER BY status")
    assert [status for status, _ in rows] == ["FAILED", "SUCCEEDED"], rows
    assert "agent killed by SIGKILL" in rows[0][1]
    assert _query(tmp_path, "SELECT count(*) FROM ioping_requests") == [(2,)]


@pytest.mark.parametrize("point", ["temp-load", "temp-html"])
def test_two_signals_at_once_while_finishing_leave_no_temp_file(tmp_path: Path, point: str) -> None:
    # given a one-slot run stopped as it writes the ingest's rows (or its report) to a
    # temp file in --out, and a SIGINT and a SIGTERM that come in the same instant
    run, code = paused(
        tmp_path,
        _matrix(tmp_path, [IOPING], [1]),
        point,
        (signal.SIGINT, signal.SIGTERM),
        lambda run: run.proc.pid,
    )
    # then: the one it took first (of two in one instant, either may be: the process
    # has threads here) cuts the ingest or the report and names the exit status and
    # the one line
    first = signal.Signals(code - 128) if code > 128 else None
    assert first in (signal.SIGINT, signal.SIGTERM), run.stderr()
    line = _the_line(run, first.name)
    assert ("while ingesting" if point == "temp-load" else "while reporting") in line
    # and the second did not cut what follows: the rollback and the temp file's removal
    assert_nothing_left(tmp_path, run)
    (run_id,) = _run_ids(tmp_path)
    ingested = 0 if point == "temp-load" else 1
    assert _query(tmp_path, "SELECT count(*) FROM runs") == [(ingested,)]
    _next_run(tmp_path)
    assert _query(tmp_path, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{run_id}'") == [
        (2,)
    ]


def test_sigint_while_the_runner_loads_duckdb_stops_the_run_cleanly(tmp_path: Path) -> None:
    # given a run whose runner stops itself (SIGSTOP) inside DuckDB's extension module as
    # it loads (while the slots start, or at the ingest): Python code called from C
    mark = tmp_path / "mark"
    matrix = _matrix(tmp_path, [IOPING, _long_fio()], [1])
    run = Run(tmp_path, matrix, driver={"SIG_AT": "duckdb-init", "SIG_MARK": str(mark)})
    try:

        def stopped() -> bool:
            info = stat_fields(run.proc.pid)
            return mark.exists() and info is not None and info[1] == "T"

        wait_for(stopped, 120, "the runner to stop inside DuckDB's import")
        # when: Ctrl-C, and the runner goes on
        run.signal(signal.SIGINT)
        wait_for(partial(signal_pending, run.proc.pid, signal.SIGINT), 60, "the signal")
        os.kill(run.proc.pid, signal.SIGCONT)
        code = run.finish()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(run.proc.pid, signal.SIGCONT)
        run.finish()
    # then: 130 once DuckDB has loaded, one line, nothing left (before: the Interrupted
    # raised inside the extension's initialisation aborted the runner, SIGABRT, with
    # its slot's files left on the target)
    assert code == 130, run.stderr()
    _the_line(run, "SIGINT")
    assert "Traceback" not in run.stderr()
    assert_nothing_left(tmp_path, run)
