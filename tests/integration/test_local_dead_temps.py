"""The temp files a SIGKILLed `iofleet local` leaves in its --out, and the next run into
that --out removing exactly those; a live writer's temp file and the user's files kept.

Real runs (an agent, ioping, DuckDB). Each moment is one where a file is written and
not yet renamed into place, reached with the env-guarded hook of iofleet.testhook: the
process stops itself there (SIGSTOP), the test sees it stopped in /proc and SIGKILLs
the run (the runner's group and the stopped process). The outcome is read from --out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.proctable import (
    alive,
    files_under,
    signal_pending,
    stat_fields,
    tree,
    wait_for,
)
from tests.integration.test_local_signals import (
    IOPING,
    Run,
    _matrix,
    _next_run,
    assert_nothing_left,
)

pytestmark = pytest.mark.slow

PAUSE = "IOFLEET_TEST_PAUSE_AT"

# the point, and where the temp file it leaves is, below --out
LEFT = {
    "temp-json": "raw/*/run.json.tmp",  # the runner's run.json, at the run's start
    "temp-artifact": "raw/*/*/slot-0000/.manifest.json.*",  # the agent's first artifact
    "temp-load": ".iofleet-load-*/*.csv",  # the ingest's rows
    "temp-html": ".report.html.*.tmp",  # the HTML report
}

# files of the user's in --out whose names look like a temp file of ours
USERS = ["notes.tmp", ".import-notes/f", ".report.html.mine.tmp", "raw/notes.json.tmp"]


def _stopped(root: int) -> int | None:
    """A process of the tree below `root` that has stopped itself (state T)."""
    for pid in tree(root):
        info = stat_fields(pid)
        if info is not None and info[1] == "T":
            return pid
    return None


def _killed_at(tmp_path: Path, point: str) -> Run:
    """A one-slot ioping run into --out out, SIGKILLed where it stopped at `point`."""
    run = Run(tmp_path, _matrix(tmp_path, [IOPING], [1]), env={PAUSE: point})
    try:
        pid = wait_for(lambda: _stopped(run.proc.pid), 120, f"the run to stop at {point}")
        run.look()
        os.killpg(run.proc.pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)  # an agent runs in its own session
        run.finish()
        wait_for(lambda: alive(run.seen) == [], 60, "the killed run's processes to go")
    finally:
        run.finish()
    return run


@pytest.mark.parametrize("point", sorted(LEFT))
def test_the_next_run_removes_the_temp_files_a_killed_run_left(tmp_path: Path, point: str) -> None:
    # given a run SIGKILLed between writing a temp file in --out and renaming it
    _killed_at(tmp_path, point)
    out = tmp_path / "out"
    left = sorted(out.glob(LEFT[point]))
    assert left, files_under(out)
    # and files of the user's in --out
    for name in USERS:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("keep\n")
    # when: the next run into that --out
    lines = _next_run(tmp_path).splitlines()
    # then: the temp file is gone, said in one line; the user's files are as they were
    assert [p for p in out.glob(LEFT[point]) if str(p.relative_to(out)) not in USERS] == []
    assert not any(p.exists() for p in left)
    first = left[0].relative_to(out)
    shown = first.parts[0] if point == "temp-load" else first  # a directory: named whole
    said = [line for line in lines if "temp file" in line]
    assert said == [f"iofleet: {out}: removed 1 temp file(s) a killed run left (as {shown})"], lines
    for name in USERS:
        assert (out / name).read_text() == "keep\n", name
    ours = [
        f
        for f in files_under(out)
        if (f.endswith(".tmp") or any(part.startswith(".") for part in Path(f).parts))
        and f != ".iofleet.lock"
        and f not in USERS
    ]
    assert ours == []


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGUSR1], ids=lambda s: s.name)
def test_an_agent_killed_as_it_writes_leaves_no_temp_file_in_its_finished_run(
    tmp_path: Path, signum: signal.Signals
) -> None:
    # given a one-slot run whose agent has stopped while it writes its first artifact
    run = Run(tmp_path, _matrix(tmp_path, [IOPING], [1]), env={PAUSE: "temp-artifact"})
    try:
        agent = wait_for(lambda: _stopped(run.proc.pid), 120, "the agent to stop")
        assert isinstance(agent, int) and agent != run.proc.pid
        (temp,) = (tmp_path / "out").glob(LEFT["temp-artifact"])
        run.look()
        # when: the agent alone dies there (SIGKILL, or a signal it does not handle:
        # SIGUSR1; SIGHUP was that signal until the agent took it as a stop, decision 70)
        os.kill(agent, signum)
        if signum != signal.SIGKILL:
            wait_for(lambda: signal_pending(agent, signum), 60, "the signal to reach it")
            os.kill(agent, signal.SIGCONT)
        code = run.finish()
    finally:
        run.finish()
    # then: the run ends as with any dead agent (1: its slot recorded FAILED by the runner)
    assert code == 1, run.stderr()
    (record,) = (tmp_path / "out" / "raw").glob("*/*/slot-0000/slot.json")
    assert f"agent killed by {signum.name}" in record.read_text()
    # and the temp file is gone with the rest: the run has finished, so no later run
    # looks into its folders for one
    assert not temp.exists()
    assert_nothing_left(tmp_path, run)


def test_a_live_report_writers_temp_file_is_left_alone(tmp_path: Path) -> None:
    # given an --out with a run, and `iofleet report --html out/report.html` stopped
    # while it writes the report's temp file (alive, holding it)
    _next_run(tmp_path)
    out = tmp_path / "out"
    (out / "report.html").unlink()
    report = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iofleet.cli",
            "report",
            "--warehouse",
            str(out / "warehouse.duckdb"),
        ]
        + ["--html", str(out / "report.html")],
        cwd=tmp_path,
        env=dict(os.environ, **{PAUSE: "temp-html"}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _stopped(report.pid) == report.pid, 120, "the report to stop")
        (temp,) = out.glob(".report.html.*.tmp")
        # when: a run into that --out starts (and runs to its end)
        lines = _next_run(tmp_path).splitlines()
        # then: the live writer's temp file is there still; continued, it lands whole
        assert temp.is_file()
        assert [line for line in lines if "temp file" in line] == [], lines
        os.kill(report.pid, signal.SIGCONT)
        _, err = report.communicate(timeout=120)
    finally:
        if report.poll() is None:
            report.kill()
            report.wait()
    assert report.returncode == 0, err
    assert not temp.exists()
    assert "</html>" in (out / "report.html").read_text()


def test_a_killed_runs_temp_file_is_removed_and_finished_runs_are_not_looked_into(
    tmp_path: Path,
) -> None:
    # given an --out with finished runs, each holding what looks like an agent's temp
    # file in its slot folder (no writer of ours leaves one in a finished run)
    out = tmp_path / "out"
    decoys = []
    for name in ("first", "second", "third"):
        _next_run(tmp_path, name=name)
    for slot in sorted(out.glob("raw/*/*/slot-0000")):
        decoys.append(slot / ".manifest.json.decoy_01")
        decoys[-1].write_text("keep\n")
    assert len(decoys) == 3
    # and a run SIGKILLed while its agent wrote its first artifact
    _killed_at(tmp_path, "temp-artifact")
    left = [p for p in out.glob(LEFT["temp-artifact"]) if p not in decoys]
    assert len(left) == 1, files_under(out)
    # when: the next run into that --out
    lines = _next_run(tmp_path).splitlines()
    # then: the killed run's temp file is gone; the finished runs' look-alikes are there
    assert not left[0].exists()
    said = [line for line in lines if "temp file" in line]
    assert said == [
        f"iofleet: {out}: removed 1 temp file(s) a killed run left (as {left[0].relative_to(out)})"
    ], lines
    assert [d for d in decoys if d.read_text() != "keep\n"] == []


def test_a_run_json_that_is_a_fifo_or_behind_a_link_is_passed_over(tmp_path: Path) -> None:
    import json
    import stat

    # given an --out whose raw/ holds a run folder with a fifo for its run.json (nothing
    # ever writes to it), and a link to a folder elsewhere whose run.json says RUNNING
    out = tmp_path / "out"
    _next_run(tmp_path, name="first")
    fifo = out / "raw" / "odd-fifo" / "run.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    running = json.dumps({"status": "RUNNING", "runner_pid": 1}) + "\n"
    (elsewhere / "run.json").write_text(running)
    (out / "raw" / "odd-link").symlink_to(elsewhere)
    # when: the next run into that --out (bounded: a read of the fifo would wait for a
    # writer for ever)
    lines = _next_run(tmp_path).splitlines()
    # then it ran and loaded its rows, the fifo is still a fifo, and the folder behind
    # the link was neither marked ABORTED nor written to
    assert not [line for line in lines if "was interrupted" in line], lines
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert (elsewhere / "run.json").read_text() == running
    assert sorted(p.name for p in elsewhere.iterdir()) == ["run.json"]
    import duckdb

    with duckdb.connect(str(out / "warehouse.duckdb"), read_only=True) as db:
        names = {r[0] for r in db.execute("SELECT DISTINCT run_id FROM ioping_requests").fetchall()}
    assert len([n for n in names if n.startswith(("first-", "next-"))]) == 2, names


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_an_agent_signalled_as_it_records_its_slot_counts_as_the_record_says(
    tmp_path: Path, signum: signal.Signals
) -> None:
    import json

    import duckdb

    # given a one-slot run whose agent stops at each artifact it writes, let go until it
    # writes its last one, slot.json
    run = Run(tmp_path, _matrix(tmp_path, [IOPING], [1]), env={PAUSE: "temp-artifact"})
    try:
        while True:
            agent = wait_for(lambda: _stopped(run.proc.pid), 120, "the agent to stop")
            assert isinstance(agent, int)
            if list((tmp_path / "out" / "raw").glob("*/*/slot-0000/.slot.json.*")):
                break
            os.kill(agent, signal.SIGCONT)
        run.look()
        # when the agent alone is sent SIGTERM or SIGINT there (it holds it until the
        # record is written, then meets it: exit 130)
        os.kill(agent, signum)
        wait_for(lambda: signal_pending(agent, signum), 60, "the signal to reach it")
        os.kill(agent, signal.SIGCONT)
        code = run.finish()
    finally:
        run.finish()
    # then the slot's record says SUCCEEDED, and the run counts it so: exit 0, run.json
    # SUCCEEDED, the slots table SUCCEEDED
    (record,) = (tmp_path / "out" / "raw").glob("*/*/slot-0000/slot.json")
    assert json.loads(record.read_text())["status"] == "SUCCEEDED"
    assert code == 0, run.stderr()
    (run_json,) = (tmp_path / "out" / "raw").glob("*/run.json")
    assert json.loads(run_json.read_text())["status"] == "SUCCEEDED"
    with duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True) as db:
        assert db.execute("SELECT status FROM slots").fetchall() == [("SUCCEEDED",)]
    assert_nothing_left(tmp_path, run)
