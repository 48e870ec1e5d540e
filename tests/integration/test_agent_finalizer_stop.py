"""A stop signal whose handler runs inside a finalizer still stops `iofleet agent`.

Python drops what a finalizer (a `__del__`, a generator the collector closes) raises,
after printing "Exception ignored in ...". The agent's SIGTERM handler and Python's
SIGINT handler raise KeyboardInterrupt wherever the main thread is; when that is a
finalizer, the stop used to be lost (SIGTERM's handler had already set SIGTERM to
SIG_IGN, so a second one did nothing either) and the slot ran its workload to its end.

The moment cannot be reached from outside by timing, so a driver runs the real `iofleet
agent` with one addition: a SIGUSR1 handler that drops an object whose finalizer sends
the stop signal to its own process and goes on running Python code, where the stop's
handler runs. The test waits for the workload to be running (seen in /proc), sends
SIGUSR1, and reads the outcome where it lands: the process table, slot.json, the
target directory and stderr. The agent waits for its workload in a poll(2) that Python
resumes after the SIGUSR1 handler returns, so nothing else in the agent runs between
the dropped stop and that wait: only a wake of the poll itself can stop the slot.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.proctable import (
    alive,
    comm,
    files_under,
    reaped,
    runs_workload,
    tree,
    wait_for,
)
from tests.integration.test_agent_slot import CELL_ID, RUN_ID, _payload

pytestmark = pytest.mark.slow


DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from iofleet.cli import main

    MARK, STOP = Path(os.environ["FIN_MARK"]), signal.Signals[os.environ["FIN_STOP"]]

    class SignalsWhenCollected:
        def __del__(self):
            MARK.touch()
            os.kill(os.getpid(), STOP)
            sum(range(10_000))  # the stop's handler runs here, inside the finalizer

    def collect(signum, frame):
        SignalsWhenCollected()  # collected at once

    signal.signal(signal.SIGUSR1, collect)
    sys.exit(main(sys.argv[1:]))
    """
)

WORKLOADS = {
    "fio": {
        "kind": "fio",
        "name": "randwrite-16k-psync-16jobs",
        "params": {"RUNTIME": "120", "SIZE": "4m", "NUM_JOBS": "2"},
    },
    "ioping": {"kind": "ioping", "count": 1200, "interval_ms": 100, "write": False},
    "app": {"kind": "app", "name": "long", "run": "sleep 300 & wait"},
}
SECOND = {"kind": "ioping", "count": 3, "interval_ms": 0, "write": False}


def _slot_file(tmp_path: Path, first: dict) -> Path:
    path = tmp_path / "slot-0000.json"
    path.write_text(json.dumps(_payload(tmp_path, [first, SECOND], time_limit_s=600)))
    return path


def _workload_running(agent: int, kind: str) -> dict[int, int]:
    """The agent's process tree once its workload runs: fio's main process and its 2 job
    processes, ioping, or the app's `sleep` below bash."""
    procs = tree(agent)
    if kind == "app":
        running = any(comm(p) == "sleep" for p in procs)
    else:
        running = sum(runs_workload(p, kind) for p in procs) >= (3 if kind == "fio" else 1)
    return procs if running else {}


@pytest.mark.parametrize(
    ("kind", "stop"),
    [("fio", "SIGTERM"), ("ioping", "SIGTERM"), ("app", "SIGTERM"), ("app", "SIGINT")],
)
def test_a_stop_signal_that_lands_in_a_finalizer_still_stops_the_slot(
    tmp_path: Path, kind: str, stop: str
) -> None:
    # given an agent running a long workload, then an ioping
    mark = tmp_path / "collected"
    env = dict(os.environ, FIN_MARK=str(mark), FIN_STOP=stop)
    agent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            DRIVER,
            "agent",
            "--slot",
            str(_slot_file(tmp_path, WORKLOADS[kind])),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with reaped(agent):
        procs = wait_for(lambda: _workload_running(agent.pid, kind), 60, f"the {kind} workload")
        assert isinstance(procs, dict)
        workload = {p: s for p, s in procs.items() if p != agent.pid}
        # when the agent's own stop signal is handled inside a finalizer
        os.kill(agent.pid, signal.SIGUSR1)
        # then the slot stops (before, it ran its workload to its end: 120-300 s)
        try:
            _, stderr = agent.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            agent.kill()
            _, stderr = agent.communicate()
            pytest.fail(f"the agent did not stop; its stderr:\n{stderr}")
    assert mark.exists()
    # as for any stop: 130, the workload's processes gone, the slot recorded with the
    # reason, the target empty, one line on stderr and no traceback
    assert agent.returncode == 130, stderr
    assert alive(workload) == []
    slot_dir = tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000"
    record = json.loads((slot_dir / "slot.json").read_text())
    assert (record["status"], record["exit_code"], record["error"]) == (
        "FAILED",
        130,
        "slot interrupted by a signal",
    )
    assert [w["status"] for w in record["workloads"]] == ["FAILED", "SKIPPED"]
    assert files_under(tmp_path / "target") == []
    assert stderr.splitlines() == [
        f"iofleet agent: slot 0 of {CELL_ID} FAILED: slot interrupted by a signal"
    ]
