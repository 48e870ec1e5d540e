"""No workload outlives its agent; a dead agent's slot is recorded; a dead runner's run too.

Real processes only: real agents, real fio, real bash apps with background jobs and
`setsid` daemons, killed with SIGKILL. Every outcome is read where it lands: the
process table (/proc), the target directory, the DuckDB warehouse.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.integration.proctable import (
    alive,
    comm,
    files_under,
    pids_with_cmdline,
    reaped,
    runs_workload,
    tree,
    wait_for,
)

pytestmark = pytest.mark.slow

IOPING = {"ioping": {"count": 3, "interval_ms": 0, "write": False}}


def _long_fio(runtime_s: int) -> dict:
    return {
        "fio": "randwrite-16k-psync-16jobs",
        "params": {"RUNTIME": runtime_s, "SIZE": "4m", "NUM_JOBS": 2},
    }


def _daemon_app(pids: Path, release: Path) -> dict:
    """A build-like app: a background job, a double-forked setsid daemon writing into the
    target, then waiting (bounded) for `release` to appear."""
    script = (
        f'mkdir -p {pids}/$IOFLEET_SLOT; d={pids}/$IOFLEET_SLOT; sleep 300 & echo $! > "$d/bg"; '
        '( setsid sh -c \'echo $$ > "$0/daemon"; '
        'while :; do echo x >> "$IOFLEET_WORKDIR/daemon.out"; sleep 0.05; done\' "$d" & ); '
        'while [ ! -s "$d/daemon" ]; do sleep 0.02; done; touch "$d/ready"; '
        f"for i in $(seq 1200); do [ -e {release} ] && exit 0; sleep 0.05; done; exit 9"
    )
    return {"app": {"name": "daemons", "run": script}}


def _matrix(tmp_path: Path, workloads: list[dict], fleet: int = 2, name: str = "death") -> Path:
    doc = {
        "name": name,
        "storage": [{"label": "disk", "type": "local", "path": str(tmp_path / "target")}],
        "workloads": workloads,
        "parallelism": [fleet],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def _start_local(tmp_path: Path, matrix: Path, out: str = "out") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "iofleet.cli", "local", str(matrix), "--out", out, "-q"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _agent_pid(tmp_path: Path, slot: int) -> int:
    pids = [
        p
        for p in pids_with_cmdline(f"slot-{slot:04d}.json")
        if str(tmp_path).encode() in Path(f"/proc/{p}/cmdline").read_bytes()
        and comm(p).startswith("python")
        and b"guard.py" not in Path(f"/proc/{p}/cmdline").read_bytes()
    ]
    return pids[0] if len(pids) == 1 else 0


def _fio_running(root: int, count: int = 3) -> dict[int, int]:
    """The process tree below `root` once `count` fio processes are in it (fio's main
    process and its 2 job processes per slot)."""
    procs = tree(root)
    return procs if sum(runs_workload(p, "fio") for p in procs) >= count else {}


def _slots(out: Path) -> dict[int, tuple[str, str | None]]:
    con = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT slot_index, status, error FROM slots").fetchall()
    finally:
        con.close()
    return {r[0]: (r[1], r[2]) for r in rows}


def _scalar(out: Path, sql: str) -> object:
    con = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
    try:
        row = con.execute(sql).fetchone()
    finally:
        con.close()
    return row[0] if row else None


# --- the agent alone: its workload dies with it --------------------------------------


def _slot_payload(tmp_path: Path, workloads: list[dict]) -> Path:
    target = tmp_path / "target"
    target.mkdir()
    doc = {
        "version": 1,
        "run_id": "death-20261121t000000z-00000000",
        "cell": {
            "cell_id": "c000-disk-x1-r1",
            "cell_index": 0,
            "instance_type": "local",
            "storage_label": "disk",
            "storage_type": "local",
            "storage_detail": str(target),
            "fleet_size": 1,
            "repeat": 1,
        },
        "slot_index": 0,
        "target": {"kind": "directory", "path": str(target)},
        "workloads": workloads,
        "barrier": {"kind": "none"},
        "results": {"kind": "directory", "root": str(tmp_path / "raw")},
        "time_limit_s": 300,
    }
    path = tmp_path / "slot-0000.json"
    path.write_text(json.dumps(doc))
    return path


FIO_120S = {  # fio's main process and 2 job processes, for two minutes
    "kind": "fio",
    "name": "randwrite-16k-psync-16jobs",
    "params": {"RUNTIME": "120", "SIZE": "4m", "NUM_JOBS": "2"},
}


def _start_agent(tmp_path: Path, workloads: list[dict]) -> subprocess.Popen[bytes]:
    """`iofleet agent` running a one-slot payload of `workloads` (see _slot_payload), with
    a TMPDIR of its own (tmp_path/tmp): an agent run by hand and SIGKILLed leaves its
    app's temp directory there, which nothing else removes (decision 73)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iofleet.cli",
            "agent",
            "--slot",
            str(_slot_payload(tmp_path, workloads)),
        ],
        env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("during", ["fio", "app"])
def test_sigkill_of_the_agent_kills_its_whole_workload_tree(tmp_path: Path, during: str) -> None:
    # given an agent busy with fio (main + 2 job processes), or with an app that has a
    # background job and a setsid daemon writing into the target
    pids_dir, release = tmp_path / "pids", tmp_path / "release"
    if during == "fio":
        workload = FIO_120S
    else:
        workload = {"kind": "app", **_daemon_app(pids_dir, release)["app"]}
    agent = _start_agent(tmp_path, [workload])
    try:
        if during == "fio":
            procs = wait_for(lambda: _fio_running(agent.pid), 60, "fio and its jobs")
        else:
            wait_for(lambda: (pids_dir / "0" / "ready").exists(), 60, "the app's daemon")
            procs = tree(agent.pid)
            daemon = int((pids_dir / "0" / "daemon").read_text())
            assert daemon in procs  # below the agent (its guardian), not below init
        assert isinstance(procs, dict)
        # when
        agent.kill()
        agent.wait(timeout=30)
        # then: every process of the workload leaves the process table
        wait_for(lambda: not alive(procs), 30, f"{sorted(alive(procs))} to die")
    finally:
        release.touch()
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == -signal.SIGKILL


def _guardian(root: int, tool: str) -> int:
    """The guardian below `root` whose child runs `tool` (0 while there is none)."""
    procs = tree(root)
    for pid in procs:
        if b"guard.py" in Path(f"/proc/{pid}/cmdline").read_bytes() and any(
            runs_workload(child, tool) for child in tree(pid) if child != pid
        ):
            return pid
    return 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_a_guardian_killed_from_outside_leaves_nothing_running_into_the_next_workload(
    tmp_path: Path, sig: signal.Signals
) -> None:
    # given an agent whose first workload is fio (main + 2 job processes, 120 s) and whose
    # second is an app that says when it starts, then waits for the test
    ready, release = tmp_path / "ready", tmp_path / "release"
    app = {
        "kind": "app",
        "name": "next",
        "run": f"touch {ready}; for i in $(seq 1200); do [ -e {release} ] && exit 0; "
        "sleep 0.05; done; exit 9",
    }
    agent = _start_agent(tmp_path, [FIO_120S, app])
    with reaped(agent):
        try:
            procs = wait_for(lambda: _fio_running(agent.pid), 60, "fio and its jobs")
            assert isinstance(procs, dict)
            guardian = _guardian(agent.pid, "fio")
            assert guardian
            fio_procs = {p: s for p, s in procs.items() if runs_workload(p, "fio")}
            # when: the fio workload's guardian is killed by someone else (not its agent)
            os.kill(guardian, sig)
            # then: by the time the next workload starts, none of fio's processes runs on
            # (each would go on writing the target beside the next workload's measurement)
            wait_for(ready.exists, 60, "the next workload to start")
            assert alive(fio_procs) == []
        finally:
            release.touch()
        assert agent.wait(timeout=60) == 1  # the fio workload failed, the app ran
    slot = json.loads(next((tmp_path / "raw").rglob("slot.json")).read_text())
    assert [w["status"] for w in slot["workloads"]] == ["FAILED", "SUCCEEDED"]


# --- iofleet local: the runner records the slot and cleans its files -----------------


@pytest.mark.parametrize("during", ["fio", "app"])
def test_local_run_records_a_killed_agent_failed_and_leaves_nothing(
    tmp_path: Path, during: str
) -> None:
    # given a cell of 2 slots that have measured ioping and are now in fio / the app
    pids_dir, release = tmp_path / "pids", tmp_path / "release"
    busy = _long_fio(6) if during == "fio" else _daemon_app(pids_dir, release)
    run = _start_local(tmp_path, _matrix(tmp_path, [IOPING, busy]))
    try:
        wait_for(
            lambda: len(list((tmp_path / "out" / "raw").glob("*/*/slot-*/w00-ioping.json"))) == 2,
            120,
            "both slots to finish ioping",
        )
        agent = wait_for(lambda: _agent_pid(tmp_path, 0), 30, "slot 0's agent")
        assert isinstance(agent, int)
        if during == "fio":
            procs = wait_for(lambda: _fio_running(agent), 60, "slot 0's fio")
        else:
            wait_for(lambda: (pids_dir / "0" / "ready").exists(), 60, "slot 0's daemon")
            procs = tree(agent)
        assert isinstance(procs, dict)
        # when: slot 0's agent is killed with SIGKILL
        os.kill(agent, signal.SIGKILL)
        wait_for(lambda: not alive(procs), 30, f"{sorted(alive(procs))} to die")
        release.touch()  # slot 1's app may finish now
        _, stderr = run.communicate(timeout=180)
    finally:
        release.touch()
        if run.poll() is None:
            run.kill()
            run.wait()
    # then: exit 1; slot 0 FAILED with the reason, slot 1 fine; slot 0's ioping kept
    assert run.returncode == 1, stderr
    out = tmp_path / "out"
    assert _slots(out) == {0: ("FAILED", "agent killed by SIGKILL"), 1: ("SUCCEEDED", None)}
    assert _scalar(out, "SELECT count(*) FROM ioping_requests WHERE slot_index = 0") == 2
    # and nothing of either slot is left in the target
    assert files_under(tmp_path / "target") == []
    assert list((tmp_path / "target").iterdir()) == []


# --- iofleet local: a dead runner takes its agents with it ---------------------------


@pytest.mark.parametrize("agents_too", [False, True], ids=["runner", "runner-and-agents"])
def test_sigkill_of_the_runner_stops_every_agent_and_the_next_run_reports_it(
    tmp_path: Path, agents_too: bool
) -> None:
    # given a run whose 2 slots have measured ioping and are in a long fio
    matrix = _matrix(tmp_path, [IOPING, _long_fio(120)])
    run = _start_local(tmp_path, matrix)
    try:
        wait_for(
            lambda: len(list((tmp_path / "out" / "raw").glob("*/*/slot-*/w00-ioping.json"))) == 2,
            120,
            "both slots to finish ioping",
        )
        procs = wait_for(lambda: _fio_running(run.pid, 6), 60, "both slots' fio")
        assert isinstance(procs, dict)
        old_run = next((tmp_path / "out" / "raw").iterdir()).name
        # when: the runner is killed; in the second case its agents too, before either
        # could write anything (the runner is stopped first so it cannot react)
        if agents_too:
            agents = [_agent_pid(tmp_path, 0), _agent_pid(tmp_path, 1)]
            run.send_signal(signal.SIGSTOP)
            for agent in agents:
                os.kill(agent, signal.SIGKILL)
            wait_for(lambda: not alive({a: procs[a] for a in agents}), 30, "the agents to die")
        run.kill()
        run.communicate(timeout=30)
        # then: no agent, guardian or fio of that run is left
        wait_for(lambda: not alive(procs), 60, f"{sorted(alive(procs))} to die")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert (
        json.loads((tmp_path / "out" / "raw" / old_run / "run.json").read_text())["status"]
        == "RUNNING"
    )
    # when: the next run into that --out
    quick = _matrix(tmp_path, [IOPING], fleet=1, name="next")
    nxt = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", "local", str(quick), "--out", "out", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # then: one line says what happened to the interrupted run
    assert nxt.returncode == 0, nxt.stderr
    lines = [line for line in nxt.stderr.splitlines() if old_run in line]
    assert len(lines) == 1, nxt.stderr
    gone = f"runner exited without finishing (pid {run.pid})"
    assert gone in lines[0]
    out = tmp_path / "out"
    assert _scalar(out, f"SELECT status FROM runs WHERE run_id = '{old_run}'") == "ABORTED"
    slots = _scalar(
        out,
        f"SELECT list((status, error) ORDER BY slot_index) FROM slots WHERE run_id = '{old_run}'",
    )
    why = f"agent did not finish: {gone}" if agents_too else "slot interrupted by a signal"
    assert [tuple(r) for r in slots] == [("FAILED", why)] * 2
    assert _scalar(out, f"SELECT count(*) FROM ioping_requests WHERE run_id = '{old_run}'") == 4
    assert files_under(tmp_path / "target") == []
    assert list((tmp_path / "target").iterdir()) == []


# --- on EC2: the instance program outlives its agent and records it ------------------


# probe set (signals): how the agent dies -> what slot.json says. SIGTERM, SIGINT and
# SIGHUP stop the agent itself (it writes slot.json); every other fatal signal kills it and
# the instance program writes the record. Counts go to docs/reliability.md.
SIGNALS = [
    (signal.SIGKILL, "agent killed by SIGKILL"),
    (signal.SIGTERM, "slot interrupted by a signal"),
    (signal.SIGINT, "slot interrupted by a signal"),
    (signal.SIGHUP, "slot interrupted by a signal"),  # "agent killed by" before decision 70
    (signal.SIGQUIT, "agent killed by SIGQUIT"),
    (signal.SIGABRT, "agent killed by SIGABRT"),
    (signal.SIGSEGV, "agent killed by SIGSEGV"),
    (signal.SIGBUS, "agent killed by SIGBUS"),
    (signal.SIGUSR1, "agent killed by SIGUSR1"),
    (signal.SIGUSR2, "agent killed by SIGUSR2"),
    (signal.SIGALRM, "agent killed by SIGALRM"),
    (signal.SIGXCPU, "agent killed by SIGXCPU"),
]


@pytest.mark.parametrize(("signum", "reason"), SIGNALS, ids=[s.name for s, _ in SIGNALS])
def test_instance_program_records_a_dead_agent_and_removes_its_files(
    tmp_path: Path, signum: signal.Signals, reason: str
) -> None:
    # given the instance program (iofleet.aws.instance.run_interruptible) whose agent has
    # measured ioping and is in an app with a background job and a setsid daemon
    pids_dir, release = tmp_path / "pids", tmp_path / "release"
    app = {"kind": "app", **_daemon_app(pids_dir, release)["app"]}
    payload = json.loads(
        _slot_payload(tmp_path, [{"kind": "ioping", "count": 3, "interval_ms": 0}, app]).read_text()
    )
    doc_file = tmp_path / "instance.json"
    doc_file.write_text(json.dumps({"mode": "slot", "slot": payload}))
    results = tmp_path / "results"
    script = (
        "import json, sys; from pathlib import Path; "
        "from iofleet.aws.instance import run_interruptible; "
        "sys.exit(run_interruptible(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])) & 255)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(doc_file), str(results)])
    try:
        wait_for(lambda: (pids_dir / "0" / "ready").exists(), 60, "the app's daemon")
        agents = [p for p in pids_with_cmdline("--run-agent") if p in tree(proc.pid)]
        assert len(agents) == 1
        procs = tree(agents[0])
        # when: the agent gets the signal
        os.kill(agents[0], signum)
        proc.wait(timeout=60)
        # then: its whole tree is gone
        wait_for(lambda: not alive(procs), 30, f"{sorted(alive(procs))} to die")
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    slot_dir = results / payload["run_id"] / payload["cell"]["cell_id"] / "slot-0000"
    record = json.loads((slot_dir / "slot.json").read_text())
    assert (record["status"], record["error"]) == ("FAILED", reason)
    assert (slot_dir / "w00-ioping.json").exists()  # what it measured is uploaded
    assert files_under(tmp_path / "target") == []
