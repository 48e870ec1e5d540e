"""Figure 1, fidelity: the same fio job, bare `fio` vs `iofleet local`.

Both sides run the same job file from `fio-jobs/` with the same parameters
against fresh directories on the same filesystem. The bare side runs the
argv and environment `iofleet.plan.fiojobs.render_command` produces (exactly what
the agent runs) and reads IOPS and p99 completion latency from fio's own
JSON (`iops`, `clat_ns.percentile["99.000000"]`). The iofleet side runs
`iofleet local` on a one-slot matrix with that job and reads the same two
numbers from the warehouse it built (`fio_results.iops`, `clat_p99_ns`): the
figures a user gets, end to end. Pairs are interleaved and the order flips
each pair (A B, B A, ...) so drift on a shared disk hits both sides alike.

Also used by figure 2 (overhead): `run_local_slot` and `run_bare`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import MEASURED, Context, Timer, fio_json, iofleet_argv, run, stat

JOB = "latency-4k-qd1-randread"
DIRECTION = "read"
TARGETS = {"iops_ratio_median": (0.97, 1.03), "p99_ratio_median": (0.90, 1.10)}


@dataclass
class FioSample:
    iops: float
    p99_ns: float
    fio_runtime_s: float  # fio's own job_runtime (the timed I/O phase)
    wall_s: float  # wall time of the whole command
    agent: dict[str, Any] = field(default_factory=dict)  # RSS samples (iofleet side)


def _job_params(runtime_s: int, size: str) -> dict[str, str]:
    return {"RUNTIME": str(runtime_s), "SIZE": size}


def _fio_runtime_s(doc: dict[str, Any]) -> float:
    return max(float(j.get("job_runtime", 0)) for j in doc["jobs"]) / 1000.0


def run_bare(job: str, params: dict[str, str], target: Path) -> FioSample:
    """Run the job with bare fio in a fresh directory under target (removed afterwards)."""
    from iofleet.plan.fiojobs import render_command

    workdir = target / "bare"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    try:
        argv, job_env = render_command(job, params, str(workdir))
        env = {**os.environ, **job_env}
        with Timer() as t:
            done = run(argv, cwd=workdir, env=env)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    doc = fio_json(done.stdout)
    jobs = doc["jobs"]
    iops = sum(float(j[DIRECTION]["iops"]) for j in jobs)
    p99 = max(float(j[DIRECTION]["clat_ns"]["percentile"]["99.000000"]) for j in jobs)
    return FioSample(iops, p99, _fio_runtime_s(doc), t.seconds)


def _matrix(job: str, params: dict[str, str], target: Path) -> dict[str, Any]:
    return {
        "name": "bench-fidelity",
        "description": "iofleet bench: one slot running one fio job",
        "storage": [{"label": "bench-disk", "type": "local", "path": str(target)}],
        "workloads": [{"fio": job, "params": params}],
        "parallelism": [1],
    }


# --- agent RSS sampling ------------------------------------------------------


def _status_kib(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class AgentSampler(threading.Thread):
    """Samples /proc of the `iofleet agent` process under a runner pid, every 50 ms.

    VmHWM is the kernel's peak-RSS mark for the process, so the last sample
    taken while fio is still a child of the agent is the agent's peak RSS
    up to that moment, whatever happened between samples. (fio runs below the
    workload guardian, iofleet/agent/guard.py, so it is a grandchild of the agent.)
    """

    def __init__(self, runner_pid: int, interval_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.runner_pid = runner_pid
        self.interval_s = interval_s
        self.stop_event = threading.Event()
        self.agent_pid: int | None = None
        self.hwm_while_fio_kib: int | None = None
        self.hwm_last_kib: int | None = None
        self.runner_hwm_kib: int | None = None
        self.samples_with_fio = 0

    def _find_agent(self) -> int | None:
        for pid in _descendants(self.runner_pid):
            argv = _cmdline(pid)
            if "agent" in argv and "--slot" in argv:
                return pid
        return None

    def run(self) -> None:
        while not self.stop_event.is_set():
            hwm = _status_kib(self.runner_pid, "VmHWM")
            if hwm is not None:
                self.runner_hwm_kib = hwm
            if self.agent_pid is None:
                self.agent_pid = self._find_agent()
            if self.agent_pid is not None:
                hwm = _status_kib(self.agent_pid, "VmHWM")
                if hwm is not None:
                    self.hwm_last_kib = hwm
                    if any(
                        _comm(c) == "fio" for c in _descendants(self.agent_pid)
                    ):  # under its guardian
                        self.hwm_while_fio_kib = hwm
                        self.samples_with_fio += 1
            self.stop_event.wait(self.interval_s)


def _seconds_between(start: str, end: str) -> float:
    def parse(ts: str) -> datetime:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


def run_local_slot(job: str, params: dict[str, str], target: Path, out: Path) -> FioSample:
    """`iofleet local` on a one-slot matrix running `job`; numbers from its warehouse."""
    from iofleet.results.warehouse import Warehouse

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    matrix = out.parent / f"{out.name}-matrix.json"
    matrix.write_text(json.dumps(_matrix(job, params, target)))
    argv = [*iofleet_argv(), "local", str(matrix), "--out", str(out), "-q", "--format", "json"]
    with Timer() as t:
        proc = subprocess.Popen(  # noqa: S603 - our own CLI
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        sampler = AgentSampler(proc.pid)
        sampler.start()
        stdout, stderr = proc.communicate()
    sampler.stop_event.set()
    sampler.join()
    if proc.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()
        raise RuntimeError(f"iofleet local exited {proc.returncode}: {tail[-1] if tail else ''}")
    with Warehouse(out / "warehouse.duckdb") as wh:
        rows = wh.query(
            "SELECT iops, clat_p99_ns, runtime_ms FROM fio_results WHERE direction = ?",
            [DIRECTION],
        )
    if not rows:
        raise RuntimeError(f"iofleet local wrote no fio_results rows for {DIRECTION}")
    raw_fio = next((out / "raw").rglob("w00-fio-*.json"))
    doc = fio_json(raw_fio.read_text())
    slot_doc = json.loads(next((out / "raw").rglob("slot.json")).read_text())
    agent = {
        "agent_wall_s": _seconds_between(slot_doc["started_at"], slot_doc["finished_at"]),
        "fio_child_wall_s": float(slot_doc["workloads"][0]["seconds"]),
        "agent_pid_found": sampler.agent_pid is not None,
        "agent_vmhwm_while_fio_kib": sampler.hwm_while_fio_kib,
        "agent_vmhwm_last_kib": sampler.hwm_last_kib,
        "runner_vmhwm_kib": sampler.runner_hwm_kib,
        "samples_with_fio": sampler.samples_with_fio,
    }
    return FioSample(
        iops=sum(float(r["iops"]) for r in rows),
        p99_ns=max(float(r["clat_p99_ns"]) for r in rows),
        fio_runtime_s=_fio_runtime_s(doc),
        wall_s=t.seconds,
        agent=agent,
    )


def run_ab_pair(
    job: str, params: dict[str, str], target: Path, local_out: Path, order: tuple[str, str]
) -> tuple[FioSample, FioSample]:
    """(bare, iofleet) samples of one interleaved pair, run in `order`."""
    got: dict[str, FioSample] = {}
    for side in order:
        if side == "bare":
            got[side] = run_bare(job, params, target)
        else:
            got[side] = run_local_slot(job, params, target, local_out)
            shutil.rmtree(local_out, ignore_errors=True)
    return got["bare"], got["iofleet"]


def measure(ctx: Context) -> dict[str, Any]:
    scale = ctx.scale
    work = ctx.scratch("fidelity")
    target = work / "target"
    target.mkdir()
    params = _job_params(scale.fidelity_runtime_s, scale.fidelity_size)
    pairs: list[dict[str, Any]] = []
    for i in range(scale.fidelity_pairs):
        order = ("bare", "iofleet") if i % 2 == 0 else ("iofleet", "bare")
        bare, mine = run_ab_pair(JOB, params, target, work / f"local-{i}", order)
        pair = {
            "order": list(order),
            "bare_iops": round(bare.iops, 1),
            "iofleet_iops": round(mine.iops, 1),
            "bare_p99_ns": bare.p99_ns,
            "iofleet_p99_ns": mine.p99_ns,
            "iops_ratio": round(mine.iops / bare.iops, 4),
            "p99_ratio": round(mine.p99_ns / bare.p99_ns, 4),
        }
        pairs.append(pair)
        ctx.log(
            f"fidelity pair {i + 1}/{scale.fidelity_pairs}: iops ratio {pair['iops_ratio']}, "
            f"p99 ratio {pair['p99_ratio']}"
        )
    aa: list[dict[str, float]] = []
    for i in range(scale.fidelity_aa_pairs):
        first, second = run_bare(JOB, params, target), run_bare(JOB, params, target)
        aa.append(
            {
                "iops_ratio": round(second.iops / first.iops, 4),
                "p99_ratio": round(second.p99_ns / first.p99_ns, 4),
            }
        )
        ctx.log(
            f"fidelity A/A control {i + 1}/{scale.fidelity_aa_pairs}: bare/bare iops ratio "
            f"{aa[-1]['iops_ratio']}, p99 ratio {aa[-1]['p99_ratio']}"
        )
    shutil.rmtree(target, ignore_errors=True)
    iops_ratio = stat((p["iops_ratio"] for p in pairs), "ratio")
    p99_ratio = stat((p["p99_ratio"] for p in pairs), "ratio")
    lo_i, hi_i = TARGETS["iops_ratio_median"]
    lo_p, hi_p = TARGETS["p99_ratio_median"]
    return {
        "status": MEASURED,
        "method": (
            f"fio job {JOB} ({', '.join(f'{k}={v}' for k, v in params.items())}), bare fio vs "
            f"`iofleet local` one-slot matrix, {len(pairs)} interleaved pairs (order flips each "
            "pair); bare numbers from fio's JSON, iofleet numbers from the warehouse "
            "(fio_results); ratio = iofleet / bare"
        ),
        "job": JOB,
        "params": params,
        "pairs": pairs,
        "iops_ratio": iops_ratio,
        "p99_ratio": p99_ratio,
        "iops_ratio_median": iops_ratio["median"],
        "p99_ratio_median": p99_ratio["median"],
        "bare_iops": stat((p["bare_iops"] for p in pairs), "IOPS", 1),
        "iofleet_iops": stat((p["iofleet_iops"] for p in pairs), "IOPS", 1),
        "bare_p99_us": stat((p["bare_p99_ns"] / 1000 for p in pairs), "us", 1),
        "iofleet_p99_us": stat((p["iofleet_p99_ns"] / 1000 for p in pairs), "us", 1),
        "aa_control": (
            {
                "method": "the same bare fio command twice in a row; ratio = second / first",
                "pairs": aa,
                "iops_ratio": stat((a["iops_ratio"] for a in aa), "ratio"),
                "p99_ratio": stat((a["p99_ratio"] for a in aa), "ratio"),
            }
            if aa
            else {"status": "not measured", "reason": "no A/A pairs at this scale"}
        ),
        "targets": {
            "iops_ratio_median": [lo_i, hi_i],
            "p99_ratio_median": [lo_p, hi_p],
        },
        "met": {
            "iops_ratio_median": lo_i <= iops_ratio["median"] <= hi_i,
            "p99_ratio_median": lo_p <= p99_ratio["median"] <= hi_p,
        },
    }
