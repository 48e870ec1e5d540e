"""`iofleet local`: run a matrix here, one agent process per slot.

The middle of the pipeline is the same as on AWS: the plan comes from
`iofleet.plan.matrix`, every slot runs `iofleet agent` with a slot payload, raw
artifacts land under `OUT/raw/` in the layout of docs/internals.md, and the
warehouse is built from those raw files only. What changes are the edges:
processes instead of instances, a directory instead of S3, DuckDB instead of
Athena, a file barrier instead of DynamoDB.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from iofleet.agent.process import wait_any
from iofleet.agent.reaper import (
    agent_death,
    children,
    die_with_parent,
    kill_orphans,
    set_subreaper,
)
from iofleet.agent.reaper import record_dead_agent as _record
from iofleet.errors import EnvironmentProblem, UsageError
from iofleet.local.leftovers import mark, remove_dead, unmark
from iofleet.local.stopping import Interrupted, StopSignals
from iofleet.results.outdir import environment_problem as _environment
from iofleet.results.outdir import make_out_dir, not_a_directory, output_lock
from iofleet.testhook import pause

BARRIER_TIMEOUT_S = 600
STOP_GRACE_S = 10.0  # a stopped agent's time to record its slot before SIGKILL
WAREHOUSE = "warehouse.duckdb"  # in --out


@dataclass
class SlotProcess:
    cell_id: str
    slot_index: int
    payload_path: Path
    log_path: Path
    raw_dir: Path
    workloads: int
    proc: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None

    def artifacts_done(self) -> int:
        if not self.raw_dir.is_dir():
            return 0
        return sum(1 for p in self.raw_dir.iterdir() if p.name.startswith("w"))


@dataclass
class RunSummary:
    run_id: str
    slots: int = 0
    failed: list[str] = field(default_factory=list)
    aborted: bool = False
    interrupted: Interrupted | None = None  # the signal that stopped the run
    finishing: str = "ingesting"  # what `_finish` is doing: ingesting | reporting

    @property
    def status(self) -> str:
        if self.aborted:
            return "ABORTED"
        if not self.failed:
            return "SUCCEEDED"
        return "FAILED" if len(self.failed) == self.slots else "PARTIAL"


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id(name: str, now: datetime) -> str:
    """`<name>-<YYYYmmddtHHMMSSz>-<8 hex>`: the random part keeps runs started in the
    same second apart (the `dt` partition comes from the stamp: aws.keys.run_date)."""
    return f"{name}-{now.strftime('%Y%m%dt%H%M%Sz').lower()}-{secrets.token_hex(4)}"


def resolve_local_path(raw: str, base: Path) -> Path:
    """A matrix `local.path`: absolute, or relative to the working directory."""
    path = Path(os.path.expanduser(raw))
    return path if path.is_absolute() else (base / path)


class Progress:
    """One status line per change; redrawn in place on a terminal. A display only: a
    stream that cannot be written any more (the terminal hung up: EIO) is given up,
    never an error of the run."""

    def __init__(self, stream: TextIO, quiet: bool):
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self._last = ""

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # gone (EIO after a hang-up, EPIPE), or closed
            self.quiet = True

    def line(self, text: str, key: str | None = None) -> None:
        """Show `text`; off a terminal, only when `key` (default: text) changed."""
        if self.quiet:
            return
        key = text if key is None else key
        if self.tty:
            self._write("\r\033[K" + text)
        elif key != self._last:
            self._write(text + "\n")
        self._last = key

    def done(self, text: str) -> None:
        if self.quiet:
            return
        self._write(("\r\033[K" if self.tty else "") + text + "\n")
        self._last = ""


def _write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)
    except BaseException:  # an interrupt between the two leaves no .tmp behind
        tmp.unlink(missing_ok=True)
        raise


def _agent_command(payload_path: Path) -> list[str]:
    return [sys.executable, "-m", "iofleet.cli", "agent", "--slot", str(payload_path)]


def _start(slot: SlotProcess, cwd: Path, keep_fds: tuple[int, ...] = ()) -> None:
    slot.log_path.parent.mkdir(parents=True, exist_ok=True)
    with slot.log_path.open("wb") as log:
        slot.proc = subprocess.Popen(  # noqa: S603 - our own agent, argv list
            _agent_command(slot.payload_path),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
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
) -> None:
    """Start the slots and wait for all of them. When interrupted, it returns with the
    exception and leaves the slots to the caller's cleanup (`_stop_cell`)."""
    for slot in slots:
        _start(slot, cwd, keep_fds)
    if on_started is not None:
        on_started(slots)
    while True:
        # wake when an agent exits (its pidfd), or every 0.5 s for the progress line
        wait_any([s.proc for s in slots if s.proc and s.exit_code is None], 0.5)
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


def _runner_gone(pid: object) -> str:
    return f"runner exited without finishing (pid {pid})"


def recover_interrupted(out_dir: Path, raw_root: Path) -> list[str]:
    """Runs in this --out whose runner died (run.json still RUNNING; we hold the lock, so
    no live runner owns them): mark them ABORTED with the reason, give every slot that
    has no slot.json a FAILED record, remove their leftover files from the target.
    Returns one line per run for the user; the next ingest loads what they measured."""
    from iofleet.agent.target import remove_workdir

    lines: list[str] = []
    if not raw_root.is_dir():
        return lines
    for run_file in sorted(raw_root.glob("*/run.json")):
        try:
            doc = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or doc.get("status") != "RUNNING":
            continue
        run_id = run_file.parent.name
        reason = _runner_gone(doc.get("runner_pid", "unknown"))
        failed = 0
        targets: dict[str, Path] = {}
        for payload_file in sorted((out_dir / "payloads" / run_id).glob("*/slot-*.json")):
            cell_id, name = payload_file.parent.name, payload_file.stem
            try:
                payload = json.loads(payload_file.read_text(encoding="utf-8"))
                target = Path(payload["target"]["path"])
                index = int(name.split("-")[1])
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                continue
            slot = SlotProcess(
                cell_id, index, payload_file, Path(), run_file.parent / cell_id / name, 0
            )
            targets[cell_id] = target
            if not slot.raw_dir.is_dir():
                continue  # never started
            if record_dead_agent(slot, run_id, target, f"agent did not finish: {reason}"):
                failed += 1
        for cell_id, target in targets.items():  # the cells' populate data
            remove_workdir(target, run_id, cell_id, "shared")
        latest = max((p.stat().st_mtime for p in run_file.parent.rglob("*")), default=None)
        doc.update(
            status="ABORTED",
            error=reason,
            finished_at=iso(datetime.fromtimestamp(latest, UTC)) if latest else None,
        )
        _write_json(run_file, doc)
        lines.append(
            f"iofleet: earlier run {run_id} was interrupted: {reason}; marked ABORTED"
            + (f", {failed} unfinished slot(s) recorded FAILED" if failed else "")
            + "; what it measured is ingested with this run"
        )
    return lines


def run_local(
    matrix_path: Path,
    out_dir: Path,
    quiet: bool = False,
    report_format: str = "table",
    cwd: Path | None = None,
) -> int:
    """Run every cell of the matrix here; returns the exit status.

    0 when every slot succeeded, 1 when some slot failed (partial results are
    kept and reported), 130 when interrupted. Raises OutputBusy when another
    run holds --out, EnvironmentProblem when --out cannot be written (full,
    read-only).
    """
    from iofleet.plan.matrix import matrix_file_name, plan_matrix_file

    base = (cwd or Path.cwd()).resolve()
    plan = plan_matrix_file(matrix_path, target="local")
    matrix = plan.matrix
    out_dir = resolve_local_path(str(out_dir), base)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a directory")
    made = make_targets(plan, base, matrix_file_name(matrix_path))
    running = False
    try:
        make_out_dir(out_dir)
        with output_lock(out_dir) as lock_fd:
            running = True
            try:
                return _run_locked(matrix, plan, out_dir, base, quiet, report_format, lock_fd)
            except OSError as exc:
                raise _environment(exc) from None
    finally:
        if not running:  # refused before the run began: it leaves nothing behind
            remove_made(made)


def make_targets(plan: Any, base: Path, file: str) -> list[Path]:
    """Create every `local` storage path of the plan (and missing parents) before the run
    creates anything else; returns the directories made, parents first.

    A path that can never be a directory (a file at it or at a parent, a dangling link,
    a place the kernel makes none) is the matrix's problem: `FILE: storage[i].path: why`,
    exit 2; a machine that refuses (permission, read-only, full) exits 3. Either way,
    the directories made so far are removed again.
    """
    from iofleet.errors import Problem, ValidationFailed

    targets = [(i, resolve_local_path(s.path, base)) for i, s in enumerate(plan.matrix.storage)]
    problems = [
        Problem(f"storage[{i}].path", why)
        for i, target in targets
        if (why := not_a_directory(target)) is not None
    ]
    if problems:
        raise ValidationFailed(problems, file=file)
    made: list[Path] = []
    try:
        for i, target in targets:
            missing = [p for p in (target, *target.parents) if not os.path.lexists(p)]
            for path in reversed(missing):
                try:
                    path.mkdir()
                except FileExistsError:
                    continue  # made meanwhile by someone else: not ours to remove
                except OSError as exc:
                    why = f"cannot create {path}: {exc.strerror or exc}"
                    problem = _environment(exc)
                    if problem is exc:
                        raise ValidationFailed(
                            [Problem(f"storage[{i}].path", why)], file=file
                        ) from None
                    raise EnvironmentProblem(f"{file}: storage[{i}].path: {why}") from None
                made.append(path)
    except BaseException:
        remove_made(made)
        raise
    return made


def remove_made(made: list[Path]) -> None:
    """Remove the directories `make_targets` made, deepest first, if still empty."""
    for path in reversed(made):
        try:
            path.rmdir()
        except OSError:
            pass


def _run_locked(matrix, plan, out_dir, base, quiet, report_format, lock_fd) -> int:  # type: ignore[no-untyped-def]
    with StopSignals(deferred=True) as stops:
        with stops.shielded():  # a signal here stops the run before its first cell
            progress = Progress(sys.stderr, quiet)
            raw_root = out_dir / "raw"
            for line in recover_interrupted(out_dir, raw_root):
                _say(line.removeprefix("iofleet: "))
            targets = sorted({resolve_local_path(s.path, base) for s in matrix.storage})
            for target in targets:  # what runners that died left there (leftovers.py)
                for line in remove_dead(target):
                    _say(line)
            plan_doc = plan.to_dict()
            raw_root.mkdir(parents=True, exist_ok=True)
            while True:  # the run's raw folder is created exclusively: its id is ours alone
                started = utc_now()
                run_id = new_run_id(matrix.name, started)
                try:
                    (raw_root / run_id).mkdir()
                    break
                except FileExistsError:
                    continue
            summary = RunSummary(run_id=run_id)
            run_doc = {
                "run_id": run_id,
                "mode": "local",
                "matrix_name": matrix.name,
                "description": matrix.description,
                "started_at": iso(started),
                "finished_at": None,
                "status": "RUNNING",
                "runner_pid": os.getpid(),
                "total_instances": plan.total_instances,
                "matrix": matrix.model_dump(mode="json", exclude_none=True),
                "plan": plan_doc,
            }
            _write_json(raw_root / run_id / "run.json", run_doc)
            for target in targets:  # before the run writes anything there
                mark(target, run_id)
            progress.done(
                f"run {run_id}: {len(plan.cells)} cells, {plan.total_instances} slots -> {out_dir}"
            )
            others = children()  # not ours to kill
            prepare = [prepare_while_starting]  # once, with the first cell
        try:
            stops.deliver()
            set_subreaper(True)  # a dead agent's workload comes to us, not to init
            cell_docs = {c["cell_id"]: c for c in plan_doc["cells"]}
            for cell in plan.cells:
                summary.slots += cell.fleet_size
                burst = cell_docs[cell.cell_id].get("burst")
                _run_cell(
                    cell,
                    plan,
                    run_id,
                    base,
                    out_dir,
                    raw_root,
                    progress,
                    summary,
                    burst,
                    (lock_fd,),
                    others,
                    prepare.pop() if prepare else None,
                    stops,
                )
        except KeyboardInterrupt as exc:  # the cell has stopped and recorded its slots
            summary.aborted = True
            summary.interrupted = (
                exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
            )
        finally:
            pause("runner-cleanup")  # a test delivers a signal here (iofleet.testhook)
            with stops.shielded():
                kill_orphans(others)  # while we are the subreaper: nothing escapes to init
                set_subreaper(False)
                run_doc.update(finished_at=iso(utc_now()), status=summary.status)
                _write_json(raw_root / run_id / "run.json", run_doc)
                for target in targets:
                    unmark(target, run_id)
        hurried = stops.hurry  # a second signal while stopping: no ingest, no report
        try:
            if hurried:
                raise Interrupted(stops.received[1])
            with stops.interruptible():
                return _finish(out_dir, raw_root, run_id, summary, report_format, progress, stops)
        except Interrupted as exc:  # the warehouse's transaction was rolled back
            return _left_for_next_run(out_dir, run_id, summary, exc, hurried)


def _run_cell(  # type: ignore[no-untyped-def]
    cell,
    plan,
    run_id,
    base,
    out_dir,
    raw_root,
    progress,
    summary,
    burst=None,
    keep_fds=(),
    others=frozenset(),
    on_started=None,
    stops=None,
) -> None:
    target = resolve_local_path(cell.storage.path, base)
    target.mkdir(parents=True, exist_ok=True)
    workloads = cell.workload_payloads()
    label = f"[cell {cell.cell_index + 1}/{len(plan.cells)}] {cell.cell_id}"
    cell_started = time.monotonic()
    payloads_dir = out_dir / "payloads" / run_id / cell.cell_id
    barrier_dir = out_dir / "barriers" / run_id / cell.cell_id

    def payload(slot_index: int) -> dict:
        return {
            "version": 1,
            "run_id": run_id,
            "cell": cell.cell_info(),
            "slot_index": slot_index,
            "target": {"kind": "directory", "path": str(target)},
            "workloads": workloads,
            "barrier": {
                "kind": "file",
                "dir": str(barrier_dir),
                "parties": cell.fleet_size,
                "timeout_s": BARRIER_TIMEOUT_S,
            },
            "results": {"kind": "directory", "root": str(raw_root)},
            "time_limit_s": plan.matrix.slot_timeout_s,
            **({"burst": burst} if burst else {}),
        }

    slots: list[SlotProcess] = []
    # a signal interrupts the cell only inside `opened`: the cleanup below is reached
    # with signals waiting, whatever ended the block (stopping.StopSignals(deferred))
    opened = stops.opened() if stops is not None else contextlib.nullcontext()
    try:
        with opened:
            for wi, workload in enumerate(workloads):
                if workload.get("kind") == "app" and workload.get("populate"):
                    from iofleet.agent.slot import run_populate

                    progress.line(f"{label}: populating {workload['name']} once for the cell")
                    rc = run_populate(payload(0), wi)
                    if rc != 0:
                        summary.failed.append(f"{cell.cell_id}/populate")
                        progress.done(f"{label}: populate of {workload['name']} failed (exit {rc})")

            for i in range(cell.fleet_size):
                path = payloads_dir / f"slot-{i:04d}.json"
                _write_json(path, payload(i))
                slots.append(
                    SlotProcess(
                        cell_id=cell.cell_id,
                        slot_index=i,
                        payload_path=path,
                        log_path=out_dir / "logs" / run_id / cell.cell_id / f"slot-{i:04d}.log",
                        raw_dir=raw_root / run_id / cell.cell_id / f"slot-{i:04d}",
                        workloads=len(workloads),
                    )
                )
            _run_slots_of_cell(
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
            )
    except BaseException as exc:
        if isinstance(exc, Interrupted):
            why = f"run interrupted by {exc.name}"
            progress.done(f"{label}: {why}: stopping its slots (a second signal kills them)")
        else:
            why = f"run stopped by {type(exc).__name__}"
        _stop_cell(slots, target, run_id, cell.cell_id, others, why, stops)
        raise
    bad = [s for s in slots if s.exit_code != 0]
    for s in bad:
        summary.failed.append(f"{cell.cell_id}/slot-{s.slot_index:04d}")
    elapsed = time.monotonic() - cell_started
    status = "ok" if not bad else f"{len(bad)} slot(s) failed, see {bad[0].log_path}"
    progress.done(f"{label}: {cell.fleet_size} slots in {elapsed:.0f}s: {status}")


def _run_slots_of_cell(  # type: ignore[no-untyped-def]
    slots, target, run_id, base, progress, label, cell_started, keep_fds, others, on_started
) -> None:
    """Run the cell's slots to their end, recording any agent that dies without
    recording itself; then remove the cell's populate data from the target."""

    def on_exit(slot: SlotProcess, live: set[int]) -> None:
        if slot.exit_code == 0 or (slot.raw_dir / "slot.json").exists():
            return
        kill_orphans(live | others)  # its workload, before its files leave the target
        why = agent_death(slot.exit_code or 0)
        record_dead_agent(slot, run_id, target, why)
        progress.done(f"{label}: slot {slot.slot_index}: {why}; recorded FAILED")

    _run_cell_slots(slots, base, progress, label, cell_started, keep_fds, on_exit, on_started)
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


# What `_finish` imports (ingest, the report), in the order `prepare_finish` loads them.
FINISH_MODULES = (
    "duckdb",
    "iofleet.agent.target",  # a cell's populate data is removed after its slots
    "iofleet.results.warehouse",
    "iofleet.results.parsers.fio",
    "iofleet.results.parsers.ioping",
    "iofleet.results.parsers.app",
    "iofleet.results.source",
    "iofleet.results.compare",
    "iofleet.results.decide",
    "iofleet.results.noise",
    "iofleet.report.cli",
    "iofleet.report.decision",
    "iofleet.report.html",
    "iofleet.report.machine",
    "iofleet.report.text",
)


def prepare_finish(started: Callable[[], bool]) -> int:
    """Import what `_finish` needs (DuckDB, the ingest and report code) while the slots
    start up (their interpreters start, their manifests are written), so that the end of
    the run only loads and reports. One module at a time, and only until `started()`
    says a slot has reached its start barrier: from then on the runner does nothing
    beside the measurement, and what is left is imported by `_finish` as before. Touches
    no file. Returns how many of FINISH_MODULES were imported."""
    import importlib

    done = 0
    for name in FINISH_MODULES:
        if started():
            break
        try:
            importlib.import_module(name)
        except ImportError:  # left to _finish, which says what is missing
            break
        done += 1
    return done


def prepare_while_starting(slots: list[SlotProcess]) -> None:
    """`prepare_finish` until one of `slots` has written its manifest (the agent writes it
    just before it waits at the start barrier)."""
    prepare_finish(lambda: any((s.raw_dir / "manifest.json").exists() for s in slots))


def _finish(
    out_dir: Path,
    raw_root: Path,
    run_id: str,
    summary: RunSummary,
    report_format: str,
    progress: Progress,
    stops: StopSignals | None = None,
) -> int:
    import duckdb

    from iofleet.report.cli import MACHINE_ERRORS, report_command
    from iofleet.results.warehouse import Warehouse

    warehouse_path = out_dir / WAREHOUSE

    def machine_problem(exc: duckdb.Error) -> None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if any(m in first for m in MACHINE_ERRORS):  # the disk, not the input: exit 3
            raise EnvironmentProblem(f"{warehouse_path}: {first}") from None

    try:
        wh = Warehouse(warehouse_path)
    except duckdb.Error as exc:
        machine_problem(exc)
        raise
    interrupting = stops.interrupting(wh.con.interrupt) if stops else contextlib.nullcontext()
    with wh, interrupting:  # the report reads the connection that just ingested
        try:
            summary.finishing = "ingesting"
            stats = wh.ingest_dir(raw_root)  # one transaction: an interrupt rolls it back
            summary.finishing = "reporting"
            # written to the file now, as closing would: a full disk is found here (exit 3)
            # and not after a report of rows that never reached the disk
            wh.con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            machine_problem(exc)
            raise
        progress.done(f"ingested into {warehouse_path}: {stats}")
        html = out_dir / "report.html"
        try:
            rc = report_command(
                warehouse_path, run_id=run_id, fmt=report_format, html=str(html), opened=wh
            )
        except OSError as exc:  # the table, after report.html: stdout is gone
            if summary.interrupted is None or exc.errno not in (errno.EIO, errno.EPIPE):
                raise
            rc = 0  # a hung-up terminal (SIGHUP): the report is in report.html
    progress.done(f"report: {html}")
    if summary.failed:
        progress.done(
            f"run {run_id} {summary.status}: {len(summary.failed)} failed: "
            + ", ".join(summary.failed[:5])
            + (" ..." if len(summary.failed) > 5 else "")
        )
    if summary.interrupted is not None:
        _say(
            f"interrupted by {summary.interrupted.name}: every slot stopped; run {run_id} "
            f"ABORTED, what it measured is in {warehouse_path}"
        )
        return summary.interrupted.exit_status
    return 1 if summary.failed or rc != 0 else 0


def _say(line: str) -> None:
    """One line on stderr, quiet or not; none when stderr is gone (a hung-up terminal)."""
    try:
        print(f"iofleet: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _left_for_next_run(
    out_dir: Path, run_id: str, summary: RunSummary, exc: Interrupted, hurried: bool
) -> int:
    """The run was interrupted before its results were ingested (a second signal while
    it stopped, or a signal while ingesting or reporting): say what is where, in one
    line. Returns the exit status: 128 + the first signal."""
    first = summary.interrupted or exc
    raw = out_dir / "raw" / run_id
    warehouse = out_dir / WAREHOUSE
    if summary.interrupted is not None and hurried:
        what = (
            f"interrupted by {first.name}, then by {exc.name} while stopping: every slot "
            f"killed, run {run_id} ABORTED and not ingested"
        )
    else:
        what = f"interrupted by {exc.name} while {summary.finishing}"
        if summary.interrupted is not None:
            what = f"interrupted by {first.name}, then by {exc.name} while {summary.finishing}"
    if summary.finishing == "reporting" and not hurried:
        where = (
            f"run {run_id} is in {warehouse}; the report was not written "
            f"(iofleet report --warehouse {warehouse} --run {run_id} "
            f"--html {out_dir / 'report.html'} writes it)"
        )
    else:
        where = (
            f"{warehouse} is as it was; what was measured is kept in {raw}, "
            f"the next iofleet local --out {out_dir} ingests it"
        )
    _say(f"{what}; {where}")
    return first.exit_status
