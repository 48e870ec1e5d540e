"""`iofleet local`'s slots: one `iofleet agent` process each, started in its own
process group, waited for, stopped (SIGTERM, then SIGKILL after STOP_GRACE_S or at
once when hurried), and recorded FAILED when it died without recording itself."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iofleet.agent.barrier import BarrierError
from iofleet.agent.process import wait_any
from iofleet.agent.reaper import agent_death, die_with_parent, kill_orphans
from iofleet.agent.reaper import record_dead_agent as _record
from iofleet.local.progress import Progress
from iofleet.local.stopping import StopSignals

STOP_GRACE_S = 10.0  # a stopped agent's time to record its slot before SIGKILL


@dataclass
class SlotProcess:
    cell_id: str
    slot_index: int
    payload_path: Path
    log_path: Path
    raw_dir: Path
    workloads: int
    tmp_dir: Path | None = None  # the agent's TMPDIR (iofleet.local.runtemp)
    proc: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None

    def artifacts_done(self) -> int:
        if not self.raw_dir.is_dir():
            return 0
        return sum(1 for p in self.raw_dir.iterdir() if p.name.startswith("w"))


def _agent_command(payload_path: Path) -> list[str]:
    return [sys.executable, "-m", "iofleet.cli", "agent", "--slot", str(payload_path)]


def _start(slot: SlotProcess, cwd: Path, keep_fds: tuple[int, ...] = ()) -> None:
    slot.log_path.parent.mkdir(parents=True, exist_ok=True)
    env = None if slot.tmp_dir is None else dict(os.environ, TMPDIR=str(slot.tmp_dir))
    with slot.log_path.open("wb") as log:
        slot.proc = subprocess.Popen(  # noqa: S603 - our own agent, argv list
            _agent_command(slot.payload_path),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,  # own process group: we can stop it cleanly
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - single-threaded runner
            pass_fds=keep_fds,  # the --out lock: held until the last agent has exited
        )


def _killpg(proc: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def _stop_all(slots: list[SlotProcess], hurry: Callable[[], bool] = lambda: False) -> None:
    """SIGTERM to every running agent (it stops its workload and writes slot.json), then
    SIGKILL to those still running after STOP_GRACE_S, or at once when `hurry()` turns
    true (a second Ctrl-C). Returns once every agent has exited."""
    procs = [s.proc for s in slots if s.proc is not None]
    for proc in procs:
        if proc.poll() is None:
            _killpg(proc, signal.SIGKILL if hurry() else signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while True:
        running = [p for p in procs if p.poll() is None]
        if not running:
            break
        if hurry() or time.monotonic() >= deadline:
            for proc in running:
                _killpg(proc, signal.SIGKILL)
            for proc in running:
                proc.wait()
            break
        wait_any(running, 0.1)  # wakes when one exits; every 0.1 s to see a hurry
    for slot in slots:
        if slot.proc is not None and slot.exit_code is None:
            slot.exit_code = slot.proc.returncode


def record_dead_agent(slot: SlotProcess, run_id: str, target: Path, why: str) -> bool:
    return _record(
        slot.raw_dir,
        run_id=run_id,
        cell_id=slot.cell_id,
        slot_index=slot.slot_index,
        why=why,
        exit_code=slot.exit_code,
        target=target,
    )


def _run_cell_slots(
    slots: list[SlotProcess],
    cwd: Path,
    progress: Progress,
    label: str,
    cell_started: float,
    keep_fds: tuple[int, ...] = (),
    on_exit: Any = None,
    on_started: Any = None,
    tick: Callable[[], None] | None = None,
) -> None:
    """Start the slots and wait for all of them. When interrupted, it returns with the
    exception and leaves the slots to the caller's cleanup (`_stop_cell`). `tick` is
    called at each wake (`StopSignals.deliver`: a signal taken back from a finalizer)."""
    for slot in slots:
        _start(slot, cwd, keep_fds)
    if on_started is not None:
        on_started(slots)
    while True:
        # wake when an agent exits (its pidfd), or every 0.5 s for the progress line
        wait_any([s.proc for s in slots if s.proc and s.exit_code is None], 0.5)
        if tick is not None:
            tick()
        running = 0
        for slot in slots:
            assert slot.proc is not None
            if slot.exit_code is None:
                slot.exit_code = slot.proc.poll()
                if slot.exit_code is None:
                    running += 1
                else:
                    if on_exit is not None:
                        live = {s.proc.pid for s in slots if s.proc and s.exit_code is None}
                        on_exit(slot, live)
        done_artifacts = sum(s.artifacts_done() for s in slots)
        total_artifacts = sum(s.workloads for s in slots)
        elapsed = time.monotonic() - cell_started
        finished = len(slots) - running
        state = (
            f"{label}: {finished}/{len(slots)} slots finished, "
            f"{done_artifacts}/{total_artifacts} workloads done"
        )
        progress.line(f"{state}, {elapsed:.0f}s", key=state)
        if running == 0:
            return


def _run_slots_of_cell(  # type: ignore[no-untyped-def]
    slots,
    target,
    run_id,
    base,
    progress,
    label,
    cell_started,
    keep_fds,
    others,
    on_started,
    barrier=None,
    tick=None,
) -> None:
    """Run the cell's slots to their end, recording any agent that dies without
    recording itself; then remove the cell's populate data from the target.

    `barrier`: the cell's start barrier. An agent that ends in failure is announced
    there in its place (a no-op when it had announced itself): one that died before
    it arrived (a signal sent to it, a crash) would otherwise hold the others at the
    barrier until its timeout (BARRIER_TIMEOUT_S, ten minutes), for nothing."""

    def on_exit(slot: SlotProcess, live: set[int]) -> None:
        if slot.exit_code != 0 and barrier is not None:
            try:
                barrier.announce(slot.slot_index)
            except BarrierError:  # the agents could not use it either: they say so
                pass
        if slot.exit_code == 0 or (slot.raw_dir / "slot.json").exists():
            return
        kill_orphans(live | others)  # its workload, before its files leave the target
        why = agent_death(slot.exit_code or 0)
        record_dead_agent(slot, run_id, target, why)
        progress.done(f"{label}: slot {slot.slot_index}: {why}; recorded FAILED")

    _run_cell_slots(slots, base, progress, label, cell_started, keep_fds, on_exit, on_started, tick)
    from iofleet.agent.target import remove_workdir  # not before the slots start

    remove_workdir(target, run_id, slots[0].cell_id, "shared")  # the cell's populate data


def _stop_cell(
    slots: list[SlotProcess],
    target: Path,
    run_id: str,
    cell_id: str,
    others: set[int],
    why: str,
    stops: StopSignals | None,
) -> None:
    """A cell cut short (a signal, an error): stop its agents (`_stop_all`), kill what
    they left, record every slot that started and did not record itself FAILED, and
    remove the cell's files from the target: the slots' working directories, the
    populate step's and its data (`shared`), then the cell and run directories once
    empty. Later signals do not cut this short (`StopSignals`); a second one only
    makes it hurry."""
    from iofleet.agent.target import remove_workdir

    with stops.shielded() if stops is not None else contextlib.nullcontext():
        _stop_all(slots, (lambda: stops.hurry) if stops is not None else (lambda: False))
        kill_orphans(others)  # what the stopped agents left (a guardian, its workload)
        for slot in slots:
            if (slot.raw_dir / "slot.json").exists():
                continue
            if slot.raw_dir.is_dir():  # it started: FAILED, with what it measured kept
                code = slot.exit_code
                death = agent_death(code) if code is not None else "agent killed as it started"
                record_dead_agent(slot, run_id, target, f"{why}: {death}")
            else:  # never got as far as its manifest: nothing to record
                remove_workdir(target, run_id, cell_id, f"slot-{slot.slot_index:04d}")
        for subdir in ("populate", "shared"):  # a populate step cut in its own cleanup
            remove_workdir(target, run_id, cell_id, subdir)
