"""What a SIGKILLed `iofleet local` leaves on its target, and the next run on that
target (into another --out) removing it, and only it; a live run's files untouched.

Real runs (agents, a bash populate step, ioping, DuckDB); the moment is a populate
step blocked on a fifo that the test holds open. Outcomes are read from the process
table, the target directory, /proc/mounts and `losetup -a`.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.integration.proctable import alive, wait_for
from tests.integration.test_local_signals import (
    Run,
    _matrix,
    _next_run,
    _open_writer,
    _under,
    assert_nothing_left,
    gated_populate,
)

pytestmark = pytest.mark.slow


def _populating(tmp_path: Path, **writes: str) -> tuple[Run, Path]:
    """A run (--out out) whose populate step wrote its shared data (`writes`, as
    gated_populate takes it) and now waits on a fifo; returns it and the fifo."""
    app, gate = gated_populate(tmp_path, **writes)
    return Run(tmp_path, _matrix(tmp_path, [app], [1])), gate


def sigkilled_while_populating(tmp_path: Path, **writes: str) -> Run:
    """A run (--out out) SIGKILLed while its populate step waits (no cleanup of its own
    can run); returned once its processes are gone (the populate's guardian SIGKILLs
    the bash step)."""
    run, gate = _populating(tmp_path, **writes)
    writer = None
    try:
        writer = wait_for(lambda: _open_writer(gate), 120, "the populate step to start")
        run.look()
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.finish()
        wait_for(lambda: alive(run.seen) == [], 60, "the dead run's processes to go")
    finally:
        if writer:
            os.close(writer)
        run.finish()
    return run


def _other_run(tmp_path: Path) -> list[str]:
    """`iofleet local` of a one-slot ioping matrix on the same target into out2: exit 0;
    its stderr lines."""
    return _next_run(tmp_path, out="out2", name="other").splitlines()


def _run_dirs(target: Path) -> list[str]:
    return sorted(p.name for p in target.iterdir() if p.name.startswith("iofleet-sig-"))


def test_the_next_run_removes_what_a_sigkilled_runner_left_and_nothing_else(
    tmp_path: Path,
) -> None:
    # given a target holding files of the user's and an iofleet-* directory of nobody's
    target = tmp_path / "target"
    target.mkdir()
    (target / "mine.txt").write_text("keep\n")
    (target / "iofleet-handmade").mkdir()
    (target / "iofleet-handmade" / "f").write_text("keep\n")
    # and a run SIGKILLed while it populates (no cleanup of its own can run), its
    # populate step having written a file in its TMPDIR
    run = sigkilled_while_populating(
        tmp_path, writes='echo data > "$IOFLEET_SHARED/data"; echo x > "$TMPDIR/cc.s"'
    )
    (dead,) = _run_dirs(target)
    dead_id = dead.removeprefix("iofleet-")
    assert list((target / dead).glob("*/shared/data")) and list((target / dead).glob("*/populate"))
    assert (target / f".iofleet-run-{dead_id}.json").is_file()
    (left,) = run.tmp.glob("iofleet-local-*/iofleet-app-populate-*/cc.s")  # the run's temp
    # when: another run on that target, into another --out
    lines = _other_run(tmp_path)
    # then: one line says what was removed; exactly the dead run's files are gone
    said = [line for line in lines if "removed" in line]
    assert said == [
        f"iofleet: {target}: removed what run {dead_id} left there "
        f"(its runner, pid {run.proc.pid}, died without cleaning up)"
    ], lines
    assert sorted(p.name for p in target.iterdir()) == ["iofleet-handmade", "mine.txt"]
    assert (target / "iofleet-handmade" / "f").read_text() == "keep\n"
    assert _under(tmp_path) == []
    # the dead run's TMPDIR: its temp files were unlinked, its app's temp directory went
    # with its files on the target (the mark names it: iofleet.local.runtemp)
    assert sorted(p.name for p in run.tmp.iterdir()) == []
    assert str(tmp_path) not in Path("/proc/mounts").read_text()
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in loops


def test_a_live_runs_files_are_left_alone(tmp_path: Path) -> None:
    # given a run populating the target (alive, waiting on the fifo)
    run, gate = _populating(tmp_path)
    writer = None
    try:
        writer = wait_for(lambda: _open_writer(gate), 120, "the populate step to start")
        target = tmp_path / "target"
        (live,) = _run_dirs(target)
        # when: another run on the same target runs to its end
        lines = _other_run(tmp_path)
        # then: it removed nothing; the live run's data and mark are there, it runs on
        assert [line for line in lines if "removed" in line] == [], lines
        assert list((target / live).glob("*/shared/data"))
        assert (target / f".iofleet-run-{live.removeprefix('iofleet-')}.json").is_file()
        assert run.proc.poll() is None
        # and, released, the live run finishes well and leaves nothing
        os.close(writer)
        writer = None
        code = run.finish()
    finally:
        if writer:
            os.close(writer)
        run.finish()
    assert code == 0, run.stderr()
    assert_nothing_left(tmp_path, run)


def test_the_next_run_into_its_out_removes_a_sigkilled_runs_temp_dir_without_a_mark(
    tmp_path: Path,
) -> None:
    # given a run SIGKILLed while it populates, its populate step having written a file in
    # its TMPDIR, and its mark gone from the target (a target it could not write one on)
    run = sigkilled_while_populating(
        tmp_path, writes='echo data > "$IOFLEET_SHARED/data"; echo x > "$TMPDIR/cc.s"'
    )
    target = tmp_path / "target"
    for mark in target.glob(".iofleet-run-*.json"):
        mark.unlink()
    (left,) = run.tmp.glob("iofleet-local-*/iofleet-app-populate-*/cc.s")
    # when: the next run into the same --out marks it ABORTED (its run.json names the dir)
    lines = _next_run(tmp_path).splitlines()
    # then: the dead run's temp directory is gone with it, and TMPDIR holds nothing else
    assert any("was interrupted" in line for line in lines), lines
    assert sorted(p.name for p in run.tmp.iterdir()) == []
