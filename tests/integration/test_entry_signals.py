"""Ctrl-C in the first instant of the `iofleet` command, before it has loaded its modules
(iofleet.__main__ holds SIGINT's default action until the command line is parsed).

Real runs of the installed console script, stopped at that point by the test hook
(`IOFLEET_TEST_PAUSE_AT=entry`: the process SIGSTOPs itself there), then sent SIGINT
as a terminal sends it (to the process group). Outcomes: the exit status, stderr, the
files made, the warehouse's rows.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb

from tests.integration.proctable import stopped, wait_for
from tests.integration.test_local_signals import IOPING, _matrix

IOFLEET = str(Path(sys.executable).parent / "iofleet")  # the console script pip made


def _start(tmp_path: Path, head: list[str]) -> subprocess.Popen[str]:
    matrix = _matrix(tmp_path, [IOPING], [1], name="entry")
    return subprocess.Popen(  # noqa: S603
        [*head, "local", str(matrix), "--out", "out", "-q"],
        cwd=tmp_path,
        env=dict(os.environ, IOFLEET_TEST_PAUSE_AT="entry", TMPDIR=str(tmp_path)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _ctrl_c_at_entry(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Wait for the command to stop itself at the entry point, Ctrl-C it, let it go on."""
    try:
        wait_for(lambda: stopped(proc.pid), 60, "the entry point")
        os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err


def test_ctrl_c_before_the_command_has_loaded_ends_it_silently_and_makes_nothing(
    tmp_path: Path,
) -> None:
    # given `iofleet local` at its first instant, its modules not yet imported
    code, err = _ctrl_c_at_entry(_start(tmp_path, [IOFLEET]))
    # then: ended by SIGINT (a shell shows 130), as SIGTERM and SIGHUP end it there; no
    # line (before: a KeyboardInterrupt traceback from inside an import, 3 of the 8
    # stops in its first 40 ms of scripts/signal_sweep.py); nothing made
    assert code == -signal.SIGINT, err
    assert err == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.json"]


def test_a_sigint_inherited_as_ignored_stays_ignored(tmp_path: Path) -> None:
    # given `iofleet local` started with SIGINT ignored (a background job of a script),
    # at its first instant
    head = ["bash", "-c", 'trap "" INT; exec "$0" "$@"', IOFLEET]
    code, err = _ctrl_c_at_entry(_start(tmp_path, head))
    # then: the SIGINT was nothing to it; the run measured and ingested
    assert code == 0, err
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM ioping_requests").fetchall() == [(2,)]
    finally:
        con.close()
