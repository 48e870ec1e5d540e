"""What the program that starts agents does when one dies: `iofleet local` and, on EC2,
`iofleet.aws.instance`.

The parent is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): when an agent dies,
whatever it left (its workload guardian, anything that escaped that) is reparented to
the parent instead of init, and `kill_orphans` finds and kills it. The agent starts
with PR_SET_PDEATHSIG=SIGTERM (`die_with_parent`), so a dead parent stops its agents
the way Ctrl-C does. An agent that exited without writing slot.json gets one written
for it (`record_dead_agent`), FAILED with the reason; its working directory is
removed from the target, and the temp file of an artifact it was writing as it died
from its results folder (the run's sweep of dead temp files does not look into a run
that has finished: iofleet.results.outdir).

Stdlib only.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from iofleet.agent.guard import live_below, process_table
from iofleet.agent.guard import prctl as prctl  # one ctypes prctl for the agent side

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def set_subreaper(on: bool) -> None:
    prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0)


def is_subreaper() -> bool:
    """Whether this process is a child subreaper now."""
    flag = ctypes.c_int(0)
    prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag))
    return bool(flag.value)


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A Popen preexec_fn: `sig` to the child when the process starting it dies (by any
    signal, SIGKILL too). Only for a single-threaded parent (preexec_fn)."""
    parent = os.getpid()

    def setup() -> None:
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return setup


def _reap_zombies(table: dict[int, tuple[int, str]], keep: set[int]) -> None:
    """waitpid our zombie children in `table` that are not in `keep` (Popen waits for
    those)."""
    me = os.getpid()
    for pid, (ppid, state) in table.items():
        if pid not in keep and ppid == me and state in ("Z", "X"):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def children() -> set[int]:
    """Our live child processes now: pass them to `kill_orphans` as `keep` when taken
    before starting agents, so that only what the agents left behind is killed (not,
    say, a server the embedding program started)."""
    me = os.getpid()
    table = process_table()
    return {pid for pid in live_below(table, {me}) if table[pid][0] == me}


def kill_orphans(keep: set[int]) -> int:
    """SIGKILL every process below us that is neither in `keep` (live agents, children
    that were there before the agents) nor below one of them, until none is left.
    Returns how many signals were sent."""
    me = os.getpid()
    killed = 0
    for _ in range(200):
        table = process_table()  # one read of /proc per pass, not one per question
        protected = set(keep).union(live_below(table, set(keep)))
        orphans = [p for p in live_below(table, {me}) if p not in protected]
        _reap_zombies(table, keep)
        if not orphans:
            return killed
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.01)  # let the kernel finish the deaths before the next pass
    return killed


def agent_death(code: int) -> str:
    """The reason of an agent that exited (Popen returncode) without writing slot.json."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"agent killed by {name}"
    return f"agent exited with status {code} without recording the slot"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_dead_agent(
    slot_dir: Path,
    *,
    run_id: str,
    cell_id: str,
    slot_index: int,
    why: str,
    exit_code: int | None,
    target: Path | None,
) -> bool:
    """Write slot.json (FAILED, `why`) for an agent that died without writing it, after
    removing its working directory from a directory target. True if written."""
    from iofleet.agent.store import remove_partial
    from iofleet.agent.target import remove_workdir

    record = slot_dir / "slot.json"
    if record.exists():
        return False
    remove_partial(slot_dir)  # the artifact it was writing as it died: its temp file
    started_at = None
    try:
        manifest = json.loads((slot_dir / "manifest.json").read_text(encoding="utf-8"))
        started_at = manifest.get("started_at") if isinstance(manifest, dict) else None
    except (OSError, ValueError):
        pass
    cleanup_problem = None
    if target is not None:
        cleanup_problem = remove_workdir(target, run_id, cell_id, f"slot-{slot_index:04d}")
    artifacts = (
        sorted(p.name for p in slot_dir.iterdir() if p.name.startswith("w"))
        if slot_dir.is_dir()
        else []
    )
    doc = {
        "version": 1,
        "run_id": run_id,
        "cell_id": cell_id,
        "slot_index": slot_index,
        "status": "FAILED",
        "exit_code": (128 - exit_code) if exit_code is not None and exit_code < 0 else exit_code,
        "error": why,
        "started_at": started_at,
        "finished_at": _now(),
        "recorded_by": "parent of the agent",
        "artifacts_kept": artifacts,
        "cleanup_problem": cleanup_problem,
        "workloads": [],
    }
    slot_dir.mkdir(parents=True, exist_ok=True)
    tmp = slot_dir / "slot.json.tmp"
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(record)
    return True
