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
import dataclasses
import json
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iofleet.agent.barrier import FileBarrier
from iofleet.agent.reaper import (
    children,
    kill_orphans,
    set_subreaper,
)
from iofleet.errors import EnvironmentProblem, UsageError
from iofleet.local.finish import (  # noqa: F401 - FINISH_MODULES, prepare_finish: tests
    FINISH_MODULES,
    WAREHOUSE,
    RunSummary,
    _finish,
    _left_for_next_run,
    prepare_finish,
    prepare_while_starting,
)
from iofleet.local.leftovers import mark, remove_dead_runs, unmark
from iofleet.local.progress import Progress
from iofleet.local.progress import say as _say
from iofleet.local.runtemp import make_run_temp, remove_recorded, remove_tree, slot_temp, temp_root
from iofleet.local.slots import (
    SlotProcess,
    _run_slots_of_cell,
    _stop_cell,
    record_dead_agent,
)
from iofleet.local.stopping import Interrupted, StopSignals
from iofleet.quote import clip
from iofleet.results.outdir import (
    claim_out_dir,
    make_dirs,
    not_a_directory,
    read_own_json,
    remove_dead_temps,
    remove_made,
)
from iofleet.results.outdir import environment_problem as _environment
from iofleet.testhook import pause

BARRIER_TIMEOUT_S = 600


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id(name: str, now: datetime) -> str:
    """`<name>-<YYYYmmddtHHMMSSz>-<8 hex>`: the random part keeps runs started in the
    same second apart (the `dt` partition comes from the stamp: aws.keys.run_date). Its
    bytes come from os.urandom, as `secrets.token_hex` takes them, without importing
    `secrets` (hmac, hashlib and random: 10-15 ms before the run can start)."""
    return f"{name}-{now.strftime('%Y%m%dt%H%M%Sz').lower()}-{os.urandom(4).hex()}"


def resolve_local_path(raw: str, base: Path) -> Path:
    """A matrix `local.path`: absolute, or relative to the working directory."""
    path = Path(os.path.expanduser(raw))
    return path if path.is_absolute() else (base / path)


def _write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
        pause("temp-json")  # a test SIGKILLs the run here (iofleet.testhook)
        tmp.replace(path)
    except BaseException:  # an interrupt between the two leaves no .tmp behind
        tmp.unlink(missing_ok=True)
        raise


def _make_run_temp() -> Path:
    """The run's temp directory (iofleet.local.runtemp); EnvironmentProblem (exit 3)
    when TMPDIR refuses it, before anything of the run is made."""
    try:
        return make_run_temp()
    except OSError as exc:  # no usable temp dir at all, or the one chosen refused the mkdir
        where = os.path.dirname(exc.filename) if exc.filename else os.environ.get("TMPDIR", "")
        raise EnvironmentProblem(
            f"TMPDIR {clip(where or '(none usable)')}: cannot create the run's temp "
            f"directory: {exc.strerror or exc}"
        ) from None


def _runner_gone(pid: object) -> str:
    return f"runner exited without finishing (pid {pid})"


def recover_interrupted(out_dir: Path, raw_root: Path) -> dict[str, str]:
    """Runs in this --out whose runner died (run.json still RUNNING; we hold the lock, so
    no live runner owns them): mark them ABORTED with the reason, give every slot that
    has no slot.json a FAILED record, remove their leftover files from the target.
    Returns one line per run for the user, by run id; the next ingest loads what they
    measured."""
    from iofleet.agent.target import remove_workdir

    lines: dict[str, str] = {}
    if not raw_root.is_dir():
        return lines
    for run_file in sorted(raw_root.glob("*/run.json")):
        # a run.json that is a fifo, a link or unreadable is not ours to act on, and
        # is never waited on (read_own_json)
        if run_file.parent.is_symlink():  # iofleet makes none: not a run of this --out
            continue
        doc = read_own_json(run_file)
        if doc is None or doc.get("status") != "RUNNING":
            continue
        run_id = run_file.parent.name
        reason = _runner_gone(doc.get("runner_pid", "unknown"))
        failed = 0
        targets: dict[str, Path] = {}
        for payload_file in sorted((out_dir / "payloads" / run_id).glob("*/slot-*.json")):
            cell_id, name = payload_file.parent.name, payload_file.stem
            payload = read_own_json(payload_file)
            if payload is None:
                continue
            try:
                target = Path(payload["target"]["path"])
                index = int(name.split("-")[1])
            except (ValueError, KeyError, TypeError, IndexError):  # not a payload of ours
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
        remove_recorded(doc.get("temp_dir"))  # its agents' TMPDIR (iofleet.local.runtemp)
        latest = max((p.stat().st_mtime for p in run_file.parent.rglob("*")), default=None)
        doc.update(
            status="ABORTED",
            error=reason,
            finished_at=iso(datetime.fromtimestamp(latest, UTC)) if latest else None,
        )
        _write_json(run_file, doc)
        lines[run_id] = (
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
    matrix_bytes: bytes | None = None,
) -> int:
    """Run every cell of the matrix here; returns the exit status. `matrix_bytes`: the
    matrix file's bytes when the caller has read it (iofleet.cli), not read again.

    0 when every slot succeeded, 1 when some slot failed (partial results are
    kept and reported), 130 when interrupted. Raises OutputBusy when another
    run holds --out, EnvironmentProblem when --out cannot be written (full,
    read-only).
    """
    from iofleet.plan.fiojobs import stop_parse_only_checks
    from iofleet.plan.matrix import matrix_file_name, plan_matrix_file

    base = (cwd or Path.cwd()).resolve()
    try:
        plan = plan_matrix_file(matrix_path, target="local", data=matrix_bytes)
    finally:  # fio checks started ahead of the plan (iofleet.cli) that it did not take
        stop_parse_only_checks()
    matrix = plan.matrix
    check_tools(matrix, matrix_file_name(matrix_path))
    check_host(matrix, matrix_file_name(matrix_path))
    out_dir = resolve_local_path(str(out_dir), base)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a directory")
    made = make_targets(plan, base, matrix_file_name(matrix_path))
    start = _Start()
    try:
        pause("targets-made")  # a test delivers a signal here (iofleet.testhook)
        start.swept = sweep_dead(plan, base)  # a dead run's files are not room this run lacks
        check_room(plan, base, matrix_file_name(matrix_path))  # on the targets just made
        with claim_out_dir(out_dir) as claim:  # refused before the run began: undone
            try:
                return _run_locked(
                    matrix, plan, out_dir, base, quiet, report_format, claim.fd, start
                )
            except OSError as exc:
                raise _environment(exc) from None
            finally:
                claim.kept = start.began
    finally:
        if not start.began:  # refused before the run began: it leaves nothing behind
            if not start.said:  # but what it removed is said (the run says it)
                for line in start.swept.values():
                    _say(line)
            remove_made(made)


@dataclasses.dataclass
class _Start:
    """How far `iofleet local` got: until the run has begun (its folder, run.json and
    marks written), a refusal removes what the command made."""

    swept: dict[str, str] = dataclasses.field(default_factory=dict)  # sweep_dead's lines
    said: bool = False  # those lines were said
    began: bool = False


def check_tools(matrix: Any, file: str) -> None:
    """EnvironmentProblem (exit 3) when a tool the matrix's workloads run (fio, ioping)
    is not on PATH: every slot would fail at it. Before anything is made."""
    import shutil

    from iofleet.plan.matrix import FioWorkload, IopingWorkload

    needs: dict[str, int] = {}  # tool -> the first workload that runs it
    for index, workload in enumerate(matrix.workloads):
        if isinstance(workload, FioWorkload):
            needs.setdefault("fio", index)
        elif isinstance(workload, IopingWorkload):
            needs.setdefault("ioping", index)
    missing = [
        f"workloads[{index}].{tool}: {tool} is not installed (not on PATH)"
        for tool, index in needs.items()
        if shutil.which(tool) is None
    ]
    if missing:
        raise EnvironmentProblem(f"{file}: " + "; ".join(missing) + ": nothing was run")


def sweep_dead(plan: Any, base: Path) -> dict[str, str]:
    """Remove from each target what runs whose runner is gone left there (leftovers.py;
    only marks that show their runner dead); one line per run, by run id, for the run to
    say (unless it says that run's line of its own --out). Before the room check, and
    without the --out lock: what it removes is no live run's, whatever its --out."""
    swept: dict[str, str] = {}
    for target in sorted({resolve_local_path(s.path, base) for s in plan.matrix.storage}):
        swept.update(remove_dead_runs(target))
    return swept


def check_room(plan: Any, base: Path, file: str) -> None:
    """EnvironmentProblem (exit 3) when a cell's files will not fit on its target."""
    from iofleet.local.space import room_problems

    targets = [resolve_local_path(s.path, base) for s in plan.matrix.storage]
    room = room_problems(plan, targets)
    if room:
        index, why = room[0]
        raise EnvironmentProblem(f"{file}: storage[{index}].path: {why}")


def check_paths(plan: Any, base: Path, file: str) -> None:
    """ValidationFailed (exit 2, `FILE: storage[i].path: why`) for each `local` storage
    path that can never be a directory here; nothing is created."""
    from iofleet.errors import Problem, ValidationFailed

    problems = [
        Problem(f"storage[{i}].path", why)
        for i, s in enumerate(plan.matrix.storage)
        if (why := not_a_directory(resolve_local_path(s.path, base))) is not None
    ]
    if problems:
        raise ValidationFailed(problems, file=file)


def preflight(plan: Any, base: Path, file: str) -> None:
    """What `iofleet local` refuses before it makes anything, for `plan --target local`:
    the tools (exit 3), the storage paths (exit 2), the room on each target (exit 3).
    Read-only: what `local` would sweep of a dead run's leftovers still counts as used."""
    check_tools(plan.matrix, file)
    check_host(plan.matrix, file)
    check_paths(plan, base, file)
    check_room(plan, base, file)


def check_host(matrix: Any, file: str) -> None:
    """ValidationFailed (exit 2) for a fio workload pinned to a CPU this machine lacks
    or to a NUMA node it may not use (fio drops the job as it starts), with huge-page
    buffers and no huge pages reserved here (fio fails every I/O), or locking (lockmem)
    more of this machine's memory than it can spare with the largest fleet's slots
    running at once: before anything is made."""
    from iofleet.errors import Problem, ValidationFailed
    from iofleet.plan.fiojobs import (
        Host,
        aio_events_left,
        huge_pages_reserved,
        memory_bytes,
        numa_nodes,
        open_files_limit,
    )
    from iofleet.plan.matrix import workload_host_problems

    here = Host(
        "this machine",
        cpus=os.sysconf("SC_NPROCESSORS_CONF"),  # fio's cpus_configured(), which it checks
        huge_pages=huge_pages_reserved(),
        memory_bytes=memory_bytes(),
        slots=max(matrix.parallelism),
        numa_nodes=numa_nodes(),
        aio_events=aio_events_left(),
        open_files=open_files_limit(),
    )
    problems = [
        Problem(f"workloads[{i}].fio", line) for i, line in workload_host_problems(matrix, here)
    ]
    if problems:
        raise ValidationFailed(problems, file=file)


def make_targets(plan: Any, base: Path, file: str) -> list[Path]:
    """Create every `local` storage path of the plan (and missing parents) before the run
    creates anything else; returns the directories made, parents first.

    A path that can never be a directory (a file at it or at a parent, a dangling link,
    a place the kernel makes none) is the matrix's problem: `FILE: storage[i].path: why`,
    exit 2; a machine that refuses (permission, read-only, full) exits 3. Either way,
    the directories made so far are removed again.
    """
    from iofleet.errors import Problem, ValidationFailed

    check_paths(plan, base, file)
    targets = [(i, resolve_local_path(s.path, base)) for i, s in enumerate(plan.matrix.storage)]
    made: list[Path] = []
    try:
        for i, target in targets:
            try:
                made += make_dirs(target)
            except OSError as exc:
                path = exc.filename or target
                why = f"cannot create {clip(str(path))}: {exc.strerror or exc}"
                problem = _environment(exc)
                if problem is exc:
                    raise ValidationFailed(
                        [Problem(f"storage[{i}].path", why)], file=file
                    ) from None
                raise EnvironmentProblem(f"{file}: storage[{i}].path: {why}") from None
    except BaseException:
        remove_made(made)
        raise
    return made


def _run_locked(matrix, plan, out_dir, base, quiet, report_format, lock_fd, start) -> int:  # type: ignore[no-untyped-def]
    with StopSignals(deferred=True) as stops:
        with stops.shielded():  # a signal here stops the run before its first cell
            progress = Progress(sys.stderr, quiet)
            raw_root = out_dir / "raw"
            temps = remove_dead_temps(out_dir)  # first: a dead agent's slot.json.tmp too
            if temps:
                _say(
                    f"{out_dir}: removed {len(temps)} temp file(s) a killed run left "
                    f"(as {temps[0].relative_to(out_dir)})"
                )
            recovered = recover_interrupted(out_dir, raw_root)
            for line in recovered.values():
                _say(line.removeprefix("iofleet: "))
            for run_id, line in start.swept.items():  # one line per run: recovered said it
                if run_id not in recovered:
                    _say(line)
            start.said = True
            targets = sorted({resolve_local_path(s.path, base) for s in matrix.storage})
            plan_doc = plan.to_dict()
            run_temp = _make_run_temp()  # every agent's TMPDIR is below it (runtemp.py)
            raw_made: list[Path] = []
            run_dir: Path | None = None
            marked: list[Path] = []
            try:  # a refusal from here (--out full) leaves nothing of the run behind
                raw_made = make_dirs(raw_root)
                while True:  # the run's raw folder is created exclusively: its id is ours alone
                    started = utc_now()
                    run_id = new_run_id(matrix.name, started)
                    try:
                        (raw_root / run_id).mkdir()
                        run_dir = raw_root / run_id
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
                    "temp_dir": str(run_temp),  # removed by the next run here if this one dies
                    "total_instances": plan.total_instances,
                    "matrix": matrix.model_dump(mode="json", exclude_none=True),
                    "plan": plan_doc,
                }
                _write_json(raw_root / run_id / "run.json", run_doc)
                for target in targets:  # before the run writes anything there
                    marked.append(target)
                    mark(target, run_id, run_temp)
            except BaseException:
                for target in marked:
                    unmark(target, run_id)
                if run_dir is not None:
                    remove_tree(run_dir)
                remove_made(raw_made)
                remove_tree(run_temp)
                raise
            start.began = True
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
                    run_temp=run_temp,
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
                problem = remove_tree(run_temp)  # what SIGKILLed agents' apps left there
                if problem:
                    _say(problem)
                run_doc.update(finished_at=iso(utc_now()), status=summary.status)
                _write_json(raw_root / run_id / "run.json", run_doc)
                for target in targets:
                    unmark(target, run_id)
        hurried = stops.hurry  # a second signal while stopping: no ingest, no report
        # the first signal, also when it came only as the run ended (it waited there)
        first = Interrupted(stops.received[0]) if stops.received else None
        try:
            if hurried:
                raise Interrupted(stops.received[1])
            with stops.interruptible():
                return _finish(out_dir, raw_root, run_id, summary, report_format, progress, stops)
        except Interrupted as exc:  # the warehouse's transaction was rolled back
            return _left_for_next_run(out_dir, run_id, summary, exc, hurried, first)


def _recorded_succeeded(slot: SlotProcess) -> bool:
    """Whether the slot's own record (slot.json, written last) says SUCCEEDED. An agent
    sent a stop signal of its own while it wrote that record writes it, then meets the
    signal and exits 130: its slot ran to its end, and the run counts it so, as the
    slots table does."""
    doc = read_own_json(slot.raw_dir / "slot.json")
    return doc is not None and doc.get("status") == "SUCCEEDED"


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
    *,
    run_temp: Path,
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
                    with temp_root(run_temp):
                        rc = run_populate(payload(0), wi)
                    if rc != 0:
                        # as on AWS (PopulateOnce fails the cell): the fleet would time its
                        # runs on data that is not there, and they would be ranked
                        summary.failed.append(f"{cell.cell_id}/populate")
                        progress.done(
                            f"{label}: populate of {workload['name']} failed (exit {rc}): "
                            "the cell's slots are not run"
                        )
                        return

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
                        tmp_dir=slot_temp(run_temp, cell.cell_index, i),
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
                FileBarrier(barrier_dir, cell.fleet_size, BARRIER_TIMEOUT_S),
                stops.deliver if stops is not None else None,
            )
    except BaseException as exc:
        if isinstance(exc, Interrupted):
            why = f"run interrupted by {exc.name}"
            progress.done(f"{label}: {why}: stopping its slots (a second signal kills them)")
        else:
            why = f"run stopped by {type(exc).__name__}"
        _stop_cell(slots, target, run_id, cell.cell_id, others, why, stops)
        raise
    finally:  # every agent of the cell has exited (or never started): their temp dirs go
        for slot in slots:
            if slot.tmp_dir is not None and (problem := remove_tree(slot.tmp_dir)):
                progress.done(f"{label}: slot {slot.slot_index}: {problem}")
    bad = [s for s in slots if s.exit_code != 0 and not _recorded_succeeded(s)]
    for s in bad:
        summary.failed.append(f"{cell.cell_id}/slot-{s.slot_index:04d}")
    elapsed = time.monotonic() - cell_started
    status = "ok" if not bad else f"{len(bad)} slot(s) failed, see {bad[0].log_path}"
    progress.done(f"{label}: {cell.fleet_size} slots in {elapsed:.0f}s: {status}")
