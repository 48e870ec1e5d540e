"""Figure 2, harness overhead: `iofleet local` for one slot running a 10 s fio job.

`overhead_s` is the wall time of the whole `iofleet local` command (plan,
agent process start, manifest, barrier, fio, slot.json, DuckDB ingest,
report rendering) minus fio's own `job_runtime` for the job (the timed I/O
phase). The job's file layout happens inside fio but outside its runtime, so
it is part of that figure; `overhead_vs_bare_fio_s` (iofleet wall minus the
wall time of the same bare fio command, interleaved) is the harness' share
alone.

Peak RSS: the `iofleet agent` process is found under the `iofleet local`
process in /proc and sampled every 50 ms; `agent_peak_rss_mib` is its VmHWM
(the kernel's high-water mark of resident memory) at the last sample taken
while fio was its child, i.e. the agent's own peak up to the end of the fio
run. fio's memory is not included (it is a separate process), nor the
runner's (reported apart as `runner_peak_rss_mib`: it loads DuckDB to ingest).
"""

from __future__ import annotations

import shutil
from typing import Any

from bench.common import MEASURED, Context, compile_iofleet, stat
from bench.fidelity import JOB, run_ab_pair

TARGET_OVERHEAD_S = 1.0
TARGET_AGENT_RSS_MIB = 60.0


def measure(ctx: Context) -> dict[str, Any]:
    scale = ctx.scale
    compiled = compile_iofleet()  # time an installed iofleet, not its compiling
    if compiled:
        ctx.log(f"overhead: compiled {compiled} iofleet modules to bytecode first")
    work = ctx.scratch("overhead")
    target = work / "target"
    target.mkdir()
    params = {"RUNTIME": str(scale.overhead_runtime_s), "SIZE": scale.overhead_size}
    rows: list[dict[str, Any]] = []
    for i in range(scale.overhead_repeats):
        order = ("iofleet", "bare") if i % 2 == 0 else ("bare", "iofleet")
        bare, mine = run_ab_pair(JOB, params, target, work / f"local-{i}", order)
        hwm = mine.agent.get("agent_vmhwm_while_fio_kib")
        if hwm is None:
            raise RuntimeError("the agent process was not seen while fio ran (no RSS sample)")
        row = {
            "iofleet_wall_s": round(mine.wall_s, 3),
            "fio_runtime_s": mine.fio_runtime_s,
            "overhead_s": round(mine.wall_s - mine.fio_runtime_s, 3),
            "bare_wall_s": round(bare.wall_s, 3),
            "bare_fio_runtime_s": bare.fio_runtime_s,
            "overhead_vs_bare_fio_s": round(mine.wall_s - bare.wall_s, 3),
            "agent_wall_s": round(mine.agent["agent_wall_s"], 3),
            "agent_fio_child_wall_s": round(mine.agent["fio_child_wall_s"], 3),
            "runner_outside_agent_s": round(mine.wall_s - mine.agent["agent_wall_s"], 3),
            "agent_peak_rss_mib": round(hwm / 1024, 2),
            "agent_peak_rss_lifetime_mib": round(
                (mine.agent["agent_vmhwm_last_kib"] or 0) / 1024, 2
            ),
            "runner_peak_rss_mib": round((mine.agent["runner_vmhwm_kib"] or 0) / 1024, 2),
        }
        rows.append(row)
        ctx.log(
            f"overhead {i + 1}/{scale.overhead_repeats}: {row['overhead_s']} s over fio's runtime, "
            f"{row['overhead_vs_bare_fio_s']} s over bare fio, agent {row['agent_peak_rss_mib']} MiB"
        )
    shutil.rmtree(target, ignore_errors=True)
    overhead = stat((r["overhead_s"] for r in rows), "s", 3)
    rss = stat((r["agent_peak_rss_mib"] for r in rows), "MiB", 2)
    return {
        "status": MEASURED,
        "method": (
            f"`iofleet local` one-slot matrix running {JOB} with RUNTIME={params['RUNTIME']} "
            f"SIZE={params['SIZE']}, {len(rows)} repeats interleaved with the same bare fio "
            "command; overhead = iofleet wall - fio job_runtime; agent RSS = VmHWM of the "
            "agent process sampled from /proc every 50 ms while fio runs"
        ),
        "params": params,
        "repeats": rows,
        "overhead_s": overhead,
        "overhead_vs_bare_fio_s": stat((r["overhead_vs_bare_fio_s"] for r in rows), "s", 3),
        "bare_fio_wall_minus_runtime_s": stat(
            (r["bare_wall_s"] - r["bare_fio_runtime_s"] for r in rows), "s", 3
        ),
        "breakdown": {
            "agent_wall_s": stat((r["agent_wall_s"] for r in rows), "s", 3),
            "agent_fio_child_wall_s": stat((r["agent_fio_child_wall_s"] for r in rows), "s", 3),
            "runner_outside_agent_s": stat((r["runner_outside_agent_s"] for r in rows), "s", 3),
        },
        "agent_peak_rss_mib": rss,
        "agent_peak_rss_lifetime_mib": stat(
            (r["agent_peak_rss_lifetime_mib"] for r in rows), "MiB", 2
        ),
        "runner_peak_rss_mib": stat((r["runner_peak_rss_mib"] for r in rows), "MiB", 2),
        "targets": {"overhead_s": TARGET_OVERHEAD_S, "agent_peak_rss_mib": TARGET_AGENT_RSS_MIB},
        "met": {
            "overhead_s": overhead["median"] < TARGET_OVERHEAD_S,
            "agent_peak_rss_mib": rss["max"] < TARGET_AGENT_RSS_MIB,
        },
    }
