"""The simulated agents of figure 8 (fleet_scale): N parties through the agent's real
DynamoDB start barrier on DynamoDB Local, in several processes, every read timed.

Each party runs `iofleet.aws.barrier.DynamoBarrier.wait` unchanged (announce, poll
at the agent's interval for N parties, adopt the one release instant, sleep until
it). The parties are threads of `processes` worker processes (`python -m
bench.fleet_agents`, each with its own interpreter and boto3 client), so one process's GIL does not serialise
all N wake-ups and polls; they share the machine's one wall clock. Every
`GetItem` a party makes is timed (its start and end on the wall clock), so the
figure shows whether the parties polled at the interval the barrier counts on
(the largest gap between one party's consecutive reads, against the margin) or
whether the harness could not serve that read rate.

DynamoDB Local cannot take hundreds of simultaneous requests on one item (it
answers InternalServerError, "too long waiting for a lock"), so each process's
writes go through a semaphore and its reads through another (`Queued`), the
machine-wide totals 8 and 32 in flight, as DynamoDB's own queueing would order
them; the barrier's code and requests are unchanged.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

WRITES_IN_FLIGHT = 8
READS_IN_FLIGHT = 32
PARTIES_PER_PROCESS = 125
MAX_PROCESSES = 8


def processes_for(parties: int) -> int:
    return max(1, min(MAX_PROCESSES, math.ceil(parties / PARTIES_PER_PROCESS)))


class Queued:
    """A boto3 client whose writes (`update_item`, `put_item`) go through a semaphore of
    `writes` slots and whose other calls through one of `reads` slots."""

    WRITES = ("update_item", "put_item")

    def __init__(self, client: Any, writes: int, reads: int) -> None:
        self._client = client
        self._writes = threading.BoundedSemaphore(writes)
        self._reads = threading.BoundedSemaphore(reads)

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._client, name)
        if not callable(fn):
            return fn
        slots = self._writes if name in self.WRITES else self._reads

        def call(*args: Any, **kwargs: Any) -> Any:
            with slots:
                return fn(*args, **kwargs)

        return call


class _Timed:
    """One party's view of the client: each `get_item` (the barrier's poll) is logged as
    (start, end) wall-clock seconds, queueing in the harness included."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.reads: list[tuple[float, float]] = []

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._client, name)
        if name != "get_item":
            return fn

        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.reads.append((start, time.time()))

        return call


def _worker() -> None:
    """One process's parties (`python -m bench.fleet_agents`): the job as a JSON line
    on stdin; `ready`; the common start instant on stdin; the results as a JSON line."""
    job = json.loads(sys.stdin.readline())
    try:
        import boto3
        from botocore.config import Config

        from iofleet.agent.barrier import sleep_until
        from iofleet.aws import barrier

        client = boto3.client(
            "dynamodb",
            endpoint_url=job["endpoint"],
            region_name=job["region"],
            aws_access_key_id=job["key"],
            aws_secret_access_key=job["secret"],
            config=Config(max_pool_connections=64, retries={"max_attempts": 10}),
        )
        ddb = Queued(client, job["writes"], job["reads"])
        client.describe_table(TableName=job["table"])  # connected before the start
    except Exception as exc:  # noqa: BLE001 - the parent reports it
        print(json.dumps(f"{type(exc).__name__}: {exc}"), flush=True)
        return
    print(json.dumps("ready"), flush=True)
    start_wall = float(sys.stdin.readline())
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def agent(index: int, offset: float) -> None:
        if job.get("wake_after_s") is not None:  # the control: one sleep, no barrier
            at_us = round((start_wall + job["wake_after_s"]) * 1e6)
            woke = {"index": index, "pid": os.getpid(), "passed_us": sleep_until(at_us)}
            with lock:
                results.append(woke)
            return
        time.sleep(max(0.0, start_wall + offset - time.time()))  # its launch
        timed = _Timed(ddb)
        row: dict[str, Any]
        try:
            got = barrier.DynamoBarrier(timed, job["config"]).wait(index)
            row = {
                "index": index,
                "pid": os.getpid(),
                "passed": got.passed,
                "released_us": got.released_us,
                "passed_us": got.passed_us,
                "late_us": got.late_us,
                "reads": timed.reads,
            }
        except Exception as exc:  # noqa: BLE001 - counted and reported, never lost
            row = {"index": index, "error": f"{type(exc).__name__}: {exc}"}
        with lock:
            results.append(row)

    threads = [
        threading.Thread(target=agent, args=(i, off), daemon=True)
        for i, off in zip(job["indices"], job["offsets"], strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, job["timeout_s"] + 30 - (time.time() - start_wall)))
    print(json.dumps(results), flush=True)


def barrier_wait(
    engine: dict[str, str],
    table: str,
    run_id: str,
    cell_id: str,
    parties: int,
    arrivals_s: list[float] | None = None,
    processes: int | None = None,
    timeout_s: float = 300,
) -> dict[str, Any]:
    """`parties` agents in `processes` processes through one DynamoDB barrier.

    `engine`: endpoint, region, key, secret of DynamoDB Local. `arrivals_s`: when each
    agent arrives, in seconds after the first (the launch requests' spacing, replayed).
    """
    import boto3

    from iofleet.aws import barrier

    offsets = arrivals_s or [0.0] * parties
    procs = processes or processes_for(parties)
    ddb = boto3.client(
        "dynamodb",
        endpoint_url=engine["endpoint"],
        region_name=engine["region"],
        aws_access_key_id=engine["key"],
        aws_secret_access_key=engine["secret"],
    )
    barrier.create_barrier(ddb, table, run_id, cell_id, parties)
    config = {
        "table": table,
        "run_id": run_id,
        "cell_id": cell_id,
        "parties": parties,
        "timeout_s": timeout_s,
    }
    jobs = [
        {
            **engine,
            "table": table,
            "config": config,
            "indices": list(range(p, parties, procs)),  # every process: early and late ones
            "offsets": [offsets[i] for i in range(p, parties, procs)],
            "writes": max(1, WRITES_IN_FLIGHT // procs),
            "reads": max(1, READS_IN_FLIGHT // procs),
            "timeout_s": timeout_s,
        }
        for p in range(procs)
    ]
    rows, errors, start_wall = _run_workers(jobs)
    errors += [r["error"] for r in rows if "error" in r]
    passed = [r for r in rows if r.get("passed") and r.get("passed_us") is not None]
    if errors or len(passed) != parties:
        first = errors[0] if errors else "timed out"
        raise RuntimeError(f"{len(passed)}/{parties} agents passed the barrier ({first})")
    return summarize(passed, barrier.poll_interval(parties), start_wall, procs)


def _run_workers(jobs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str], float]:
    """One worker process per job; (rows, errors, the common start instant)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    workers: list[subprocess.Popen[str]] = []
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    try:
        for job in jobs:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.fleet_agents"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=env,
            )
            workers.append(proc)
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
        for proc in workers:  # a blocking read: each answers once connected, or fails
            hello = _answer(proc)
            if hello != "ready":
                raise RuntimeError(f"a barrier agent process failed: {hello}")
        start_wall = time.time() + 0.5  # every process has its threads started by then
        for proc in workers:
            assert proc.stdin is not None
            proc.stdin.write(f"{start_wall!r}\n")
            proc.stdin.flush()
        for proc in workers:
            got = _answer(proc)
            if isinstance(got, list):
                rows.extend(got)
            else:
                errors.append(str(got))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return rows, errors, start_wall


def wake_floor(
    engine: dict[str, str], table: str, parties: int, after_s: float, processes: int | None = None
) -> dict[str, Any]:
    """The control beside the barrier: the same processes and threads, each sleeping
    (`sleep_until`, as a released party does) until one instant `after_s` after the
    start, with no barrier and no reads. Its spread is what waking `parties` threads
    at one instant costs this machine: the floor under the barrier's skew here."""
    procs = processes or processes_for(parties)
    jobs = [
        {
            **engine,
            "table": table,
            "indices": list(range(p, parties, procs)),
            "offsets": [0.0] * len(range(p, parties, procs)),
            "writes": 1,
            "reads": 1,
            "timeout_s": after_s + 30,
            "wake_after_s": after_s,
        }
        for p in range(procs)
    ]
    rows, errors, start_wall = _run_workers(jobs)
    if errors or len(rows) != parties:
        raise RuntimeError(f"{len(rows)}/{parties} sleepers woke ({errors[:1]})")
    times = [r["passed_us"] for r in rows]
    at_us = round((start_wall + after_s) * 1e6)
    return {
        "skew_ms": (max(times) - min(times)) / 1000,
        "last_after_instant_ms": (max(times) - at_us) / 1000,
        "processes": len({r["pid"] for r in rows}),
    }


def summarize(
    passed: list[dict[str, Any]], poll_s: float, start_wall: float, processes: int
) -> dict[str, Any]:
    """Skew and lateness, and what the parties' reads show about the harness."""
    released = {r["released_us"] for r in passed}
    if len(released) != 1:
        raise RuntimeError(f"agents adopted {len(released)} release instants, not one")
    (release_us,) = released
    times = [r["passed_us"] for r in passed]
    on_time = [r["passed_us"] for r in passed if r["late_us"] == 0]
    margin_s = 2 * poll_s + _slack()
    written_s = release_us / 1e6 - margin_s  # when the record was set (the setter's clock)
    latencies = sorted(e - s for r in passed for s, e in r["reads"])
    # the largest gap between one party's consecutive read starts while the record was
    # not yet written, or until it read it: the barrier counts on <= the poll interval
    gaps: list[float] = []
    for r in passed:
        starts = sorted(s for s, _ in r["reads"])
        gaps.extend(b - a for a, b in zip(starts, starts[1:], strict=False))
    since = max(start_wall, written_s - 5)  # the last 5 s before the record was written
    window = [s for r in passed for s, _ in r["reads"] if since <= s < written_s]
    window_s = max(written_s - since, 1e-3)
    return {
        "skew_ms": (max(times) - min(times)) / 1000,
        "on_time_skew_ms": (max(on_time) - min(on_time)) / 1000 if on_time else None,
        "first_after_release_ms": (min(times) - release_us) / 1000,
        "last_after_release_ms": (max(times) - release_us) / 1000,
        "late_agents": sum(1 for r in passed if r["late_us"] > 0),
        "wait_s": time.time() - start_wall,
        "poll_interval_s": poll_s,
        "margin_s": margin_s,
        "processes": processes,
        "agent_pids": len({r["pid"] for r in passed}),  # processes the agents really ran in
        "reads": len(latencies),
        "read_ms": _quantiles([x * 1000 for x in latencies]),
        "read_gap_s": _quantiles(gaps),
        # reads started in the 5 s before the record was written, per second, against
        # the rate the barrier designs for (every party once per interval)
        "reads_per_s_before_release": round(len(window) / window_s, 1),
        "designed_reads_per_s": round(len(passed) / poll_s, 1),
    }


def _answer(proc: subprocess.Popen[str]) -> Any:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"a barrier agent process exited ({proc.wait()}) without answering")
    return json.loads(line)


def _slack() -> float:
    from iofleet.aws.barrier import SLACK_S

    return SLACK_S


def _quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    vals = sorted(values)
    return {
        "min": round(vals[0], 4),
        "median": round(statistics.median(vals), 4),
        "p90": round(vals[int(0.9 * (len(vals) - 1))], 4),
        "max": round(vals[-1], 4),
    }


if __name__ == "__main__":
    _worker()
