"""Run one slot: manifest, target, start barrier, workloads, slot.json.

`iofleet agent --slot FILE` (locally and on EC2) ends up in `run_slot_file`.
A failing workload is recorded with its reason and the slot goes on with the
next one; the exit code is non-zero when anything failed. The raw layout and
the payload are described in docs/internals.md.

Stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iofleet.agent import stops
from iofleet.agent.barrier import Barrier, BarrierError, BarrierResult, barrier_from_config, iso_us
from iofleet.agent.manifest import clock_status, ec2_identity, system_info
from iofleet.agent.payload import (
    BurstAction,
    PayloadError,
    SlotPayload,
    Workload,
    parse_int,
    parse_payload,
)
from iofleet.agent.process import (
    ChildResult,
    child_ended,
    orphans_killed,
    output_taken,
    run_child,
)
from iofleet.agent.stops import STOPS, stops_held
from iofleet.agent.store import ResultsStore, StoreError, store_from_config
from iofleet.agent.target import PreparedTarget, cleanup_target, prepare_target
from iofleet.results.parsers import ParseError
from iofleet.results.parsers.app import format_utc
from iofleet.testhook import pause

SUCCEEDED, FAILED, TIMED_OUT, SKIPPED = "SUCCEEDED", "FAILED", "TIMED_OUT", "SKIPPED"
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def _now() -> str:
    return format_utc(datetime.now(UTC))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


@dataclass
class Outcome:
    status: str
    error: str | None = None
    artifact: str | None = None
    exit_code: int | None = None
    stderr_tail: str = ""
    seconds: float = 0.0


class _Context:
    def __init__(
        self,
        payload: SlotPayload,
        store: ResultsStore,
        target: PreparedTarget,
        prefix: str,
        deadline: float,
        slot_label: str,
    ):
        self.payload = payload
        self.store = store
        self.target = target
        self.prefix = prefix
        self.deadline = deadline
        self.slot_label = slot_label

    def put(self, name: str, text: str) -> str:
        relpath = f"{self.prefix}/{name}"
        self.store.put_text(relpath, text)
        return relpath

    def app_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            IOFLEET_WORKDIR=str(self.target.workdir),
            IOFLEET_SHARED=str(self.target.shared or self.target.workdir),
            IOFLEET_SLOT=self.slot_label,
            IOFLEET_FLEET_SIZE=str(self.payload.fleet_size),
            IOFLEET_CELL_ID=self.payload.cell_id,
            IOFLEET_RUN_ID=self.payload.run_id,
        )
        return env


def _child_failure(what: str, result: ChildResult) -> tuple[str, str | None]:
    if result.error:
        return FAILED, result.error
    if result.timed_out:
        return TIMED_OUT, f"{what} killed at the slot time limit after {result.seconds:.1f} s"
    if result.returncode != 0:
        detail = _last_line(result.stderr_tail)
        return FAILED, f"{what} exited with status {result.returncode}" + (
            f": {detail}" if detail else ""
        )
    return SUCCEEDED, None


_FIO_SAID = re.compile(r"^fio: .*err=\d+.*$", re.MULTILINE)


def fio_said(stdout: str) -> str | None:
    """fio's own reason for a failed job, which it prints on stdout ahead of its JSON
    (`fio: pid=N, err=22/file:engines/io_uring.c:998, func=io_queue_init, error=Invalid
    argument`): the first such line, clipped; None when there is none."""
    start = _fio_json_start(stdout)
    found = _FIO_SAID.search(stdout if start is None else stdout[:start])
    return found.group().strip()[:300] if found else None


def _fio_json_start(text: str) -> int | None:
    """Where fio's JSON document starts in its stdout (at a line's start), None if nowhere."""
    if text.startswith("{"):
        return 0
    cut = text.find("\n{")
    return None if cut < 0 else cut + 1


def fio_job_errors(text: str) -> list[str]:
    """Problems in fio's JSON output: no JSON at all, or jobs with error != 0."""
    start = _fio_json_start(text)
    if start is None:
        return ["fio printed no JSON"]
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError as exc:
        return [f"fio JSON is malformed: {exc}"]
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list) or not jobs:
        return ["fio JSON has no jobs"]
    return [
        f"fio job {job.get('jobname', i)!r} reported error {job.get('error')}"
        for i, job in enumerate(jobs)
        if isinstance(job, dict) and job.get("error") not in (0, None)
    ]


def _raw_leftovers(ctx: _Context, what: str) -> str | None:
    """On a raw device the workload's cwd (the agent's scratch dir) must stay empty: a file
    there means the tool did its I/O on a regular file instead of the device."""
    raw = ctx.target.raw_device
    if raw is None:
        return None
    try:
        found = sorted(p.name for p in ctx.target.workdir.iterdir())
    except OSError as exc:
        return f"cannot list {ctx.target.workdir}: {exc.strerror or exc}"
    if not found:
        return None
    return (
        f"{what} created {', '.join(found[:5])} in {ctx.target.workdir} instead of "
        f"doing its I/O on {raw}"
    )


VOID_PREFIX = "void-"  # an artifact the ingest keeps raw and loads nothing of


def _not_about_the_target(ctx: _Context, what: str) -> str | None:
    """Why the output of `what`, which has just run, is not about the target, whatever
    the tool reported: it made files beside a raw device (its I/O went there), or the
    device changed under it (fio caps its I/O to a shrunk device without a word)."""
    return _also(_raw_leftovers(ctx, what), ctx.target.device_change())


def _also(first: str | None, then: str | None) -> str | None:
    return f"{first}; {then}" if first and then else first or then


def _voided(name: str, void: str | None) -> str:
    """The artifact's name: `void-` before it when its figures must not count (the
    workload is FAILED for `void`): the ingest keeps it raw, with one ingest_errors row,
    and makes no rows of it (iofleet.results.ingest), so it is never measured as the
    target's."""
    return VOID_PREFIX + name if void else name


def _run_fio(ctx: _Context, w: Workload) -> Outcome:
    from iofleet.agent.devices import device_bytes, logical_block_size
    from iofleet.plan.fiojobs import job_stdin, render_command

    raw = ctx.target.raw_device
    try:
        if raw is not None:
            argv, job = render_command(
                w.name,
                w.params,
                str(ctx.target.workdir),
                device=str(raw),
                device_bytes=device_bytes(raw),
                device_block_bytes=logical_block_size(raw),
                job_sha256=w.job_sha256,
            )
        else:
            argv, job = render_command(
                w.name, w.params, str(ctx.target.workdir), job_sha256=w.job_sha256
            )
    except KeyError as exc:
        return Outcome(FAILED, str(exc.args[0]) if exc.args else f"unknown fio job {w.name!r}")
    except Exception as exc:  # noqa: BLE001 - ValueError, DeviceError or a broken job library
        return Outcome(FAILED, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    with job_stdin(job) as stdin:
        result = run_child(
            argv,
            cwd=ctx.target.workdir,
            env=os.environ,
            deadline=ctx.deadline,
            hold_output=True,
            stdin=stdin,
        )
    status, error = _child_failure("fio", result)
    if status == SUCCEEDED:
        problems = fio_job_errors(result.stdout)
        if problems:
            status, error = FAILED, "; ".join(problems)
    said = fio_said(result.stdout) if status != SUCCEEDED else None
    if said and error and said not in error:
        error = f"{error} ({said})"
    void = _not_about_the_target(ctx, "fio")
    if void:
        status, error = FAILED, _also(error, void)
    name = f"w{w.index:02d}-fio-{_safe(w.name)}.json"
    artifact = ctx.put(_voided(name, void), result.stdout) if result.stdout else None
    return Outcome(status, error, artifact, result.returncode, result.stderr_tail, result.seconds)


def ioping_argv(w: Workload, target: str, raw_device: bool) -> list[str]:
    interval = "0" if w.interval_ms == 0 else f"{round(w.interval_ms * 1000)}us"
    argv = ["ioping", "-J", "-c", str(w.count), "-i", interval]
    if w.size:
        argv += ["-s", w.size]
    if w.direct:
        argv.append("-D")
    if w.write:
        # ioping wants -WWW before it writes to a device (the guard has checked it)
        argv.append("-WWW" if raw_device else "-W")
    return argv + [target]


# ioping's own messages (err/errx, getopt): "ioping: ..."; a bad option is followed
# by the whole usage text, whose last line says nothing about the failure
_IOPING_MESSAGE = re.compile(r"^(?:\S*/)?ioping: .+$", re.MULTILINE)


def _ioping_complaint(stderr: str) -> str | None:
    lines = _IOPING_MESSAGE.findall(stderr)
    if not lines:
        return None
    line = lines[-1].strip()[:300]
    if re.search(r"option (?:-- )?'-?J'", line):  # ioping 1.1 and older print no JSON
        line += " (iofleet runs ioping -J: ioping 1.2 or later)"
    return line


_IOPING_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}  # ioping's suffixes


def _ioping_direct_problem(raw: Path, size: str) -> str | None:
    """ioping -D on a device issues requests of `size` at multiples of `size`; the kernel
    rejects (EINVAL) O_DIRECT requests that are not whole logical blocks (a 4Kn device and
    -s 512): say so before ioping runs."""
    from iofleet.agent.devices import DeviceError, logical_block_size

    try:
        block = logical_block_size(raw)
    except DeviceError as exc:
        return str(exc)
    unit = size[-1].lower() if size[-1:].isalpha() else ""
    nbytes = int(size[: len(size) - len(unit)]) * _IOPING_UNITS[unit]
    if nbytes % block:
        return (
            f"ioping size {size} on {raw}: direct I/O needs whole logical blocks of {block} "
            f"bytes (the kernel would refuse it); use a multiple of {block}"
        )
    return None


def _run_ioping(ctx: _Context, w: Workload) -> Outcome:
    from iofleet.results.parsers.ioping import parse_ioping

    raw = ctx.target.raw_device
    if raw is not None and w.direct:
        problem = _ioping_direct_problem(raw, w.size or "4k")
        if problem:
            return Outcome(FAILED, problem)
    argv = ioping_argv(w, str(raw or ctx.target.workdir), raw is not None)
    result = run_child(
        argv, cwd=ctx.target.workdir, env=os.environ, deadline=ctx.deadline, hold_output=True
    )
    status, error = _child_failure("ioping", result)
    void = None
    complaint = _ioping_complaint(result.stderr_tail)
    if status == FAILED and result.returncode and not result.error and complaint:
        error = f"ioping exited with status {result.returncode}: {complaint}"
    if status == SUCCEEDED:
        try:
            out = parse_ioping(result.stdout)
        except ParseError as exc:
            status, error = FAILED, f"ioping output: {exc}"
        else:
            # ioping -c N ends after N requests (its first ignored: a warm-up), or, with
            # status 0 too, at a SIGINT sent to it: the requests it had made by then
            done = len(out.requests) + out.ignored_requests
            if done < w.count:  # its requests are real, but not the run that was asked for
                void = (
                    f"ioping ended after {done} of its {w.count} requests, with status 0 "
                    "(as it does when stopped by a SIGINT from outside iofleet)"
                )
                status, error = FAILED, void
    elsewhere = _not_about_the_target(ctx, "ioping")
    if elsewhere:
        void, status, error = _also(void, elsewhere), FAILED, _also(error, elsewhere)
    name = _voided(f"w{w.index:02d}-ioping.json", void)
    artifact = ctx.put(name, result.stdout) if result.stdout else None
    return Outcome(status, error, artifact, result.returncode, result.stderr_tail, result.seconds)


def _run_app(ctx: _Context, w: Workload, phase: str) -> Outcome:
    if ctx.target.raw_device is not None:
        return Outcome(FAILED, "app workloads need a filesystem target, not a raw device")
    script = w.run if phase == "run" else (w.populate or "")
    env = ctx.app_env()
    try:  # the app's own TMPDIR, where the user's is: what a killed compiler leaves goes
        tmp = tempfile.mkdtemp(prefix=f"iofleet-app-{ctx.slot_label}-")
    except OSError as exc:
        return Outcome(
            FAILED, f"cannot make the app's temp directory in {tempfile.gettempdir()}: {exc}"
        )
    env["TMPDIR"] = tmp
    started_at = _now()
    try:
        result = run_child(
            ["bash", "-c", script],
            cwd=ctx.target.workdir,
            env=env,
            deadline=ctx.deadline,
            keep_stdout=False,
            hold_output=phase == "run",
        )
    finally:  # run_child has killed whatever of the app was left: nothing writes there
        shutil.rmtree(tmp, ignore_errors=True)
    finished_at = _now()
    doc = {
        "app": w.name,
        "phase": phase,
        "exit_code": result.returncode,
        "wall_seconds": round(result.seconds, 6),
        "started_at": started_at,
        "finished_at": finished_at,
        "stdout_tail": result.stdout,
        "stderr_tail": result.stderr_tail,
    }
    artifact = None
    if result.error is None:
        artifact = ctx.put(
            f"w{w.index:02d}-app-{_safe(w.name)}.json", json.dumps(doc, indent=2) + "\n"
        )
    status, error = _child_failure(f"app {w.name} ({phase})", result)
    return Outcome(status, error, artifact, result.returncode, result.stderr_tail, result.seconds)


# --- burst_policy: refill waits and drain phases before fio workloads ----------

DRAIN_FILE = "iofleet-drain.dat"


def burst_applies(payload: SlotPayload) -> bool:
    """refill/drain act on EBS volumes only, i.e. block targets; elsewhere no-ops."""
    return payload.burst.policy != "as-is" and payload.target.kind == "block"


def burst_note(payload: SlotPayload) -> str | None:
    policy = payload.burst.policy
    if policy == "as-is":
        return None
    if payload.target.kind != "block":
        return (
            f"burst_policy {policy}: no-op on a {payload.target.kind} target "
            "(refill and drain apply to EBS volumes only)"
        )
    if not payload.burst.actions:
        return f"burst_policy {policy}: the plan computed no wait for this cell"
    return None


def drain_argv(action: BurstAction, filename: str, size: str | None) -> list[str]:
    """fio at full rate for the computed seconds: empties the burst bucket."""
    argv = [
        "fio",
        "--output-format=json",
        "--name=iofleet-drain",
        "--ioengine=libaio",
        "--direct=1",
        f"--rw={action.rw}",
        f"--bs={action.bs}",
        f"--iodepth={action.iodepth}",
        "--time_based",
        f"--runtime={max(1, round(action.seconds * 1000))}ms",
        f"--filename={filename}",
    ]
    return argv + ([f"--size={size}"] if size else [])


def _burst_phase(ctx: _Context, w: Workload) -> dict[str, object] | None:
    """Refill wait or drain phase before fio workload `w`; its slot.json record."""
    action = ctx.payload.burst.before(w.index)
    if w.kind != "fio" or action is None or not burst_applies(ctx.payload):
        return None
    record: dict[str, object] = {
        "workload_index": w.index,
        "action": action.action,
        "planned_s": action.seconds,
        "seconds": 0.0,
        "status": SUCCEEDED,
        "error": None,
        "artifact": None,
    }
    remaining = max(ctx.deadline - time.monotonic(), 0.0)
    if action.action == "refill":
        wait = min(action.seconds, remaining)
        stops.sleep(wait)  # the bucket earns credits while nothing runs
        record["seconds"] = round(wait, 3)
        if wait < action.seconds:
            record["status"] = TIMED_OUT
            record["error"] = "refill wait cut short by the slot time limit"
        return record
    raw = ctx.target.raw_device
    scratch = None if raw is not None else ctx.target.workdir / DRAIN_FILE
    argv = drain_argv(
        action, str(raw) if raw is not None else DRAIN_FILE, action.size if raw is None else None
    )
    try:
        result = run_child(argv, cwd=ctx.target.workdir, env=os.environ, deadline=ctx.deadline)
    finally:
        if scratch is not None:
            scratch.unlink(missing_ok=True)
    if result.stdout:
        record["artifact"] = ctx.put(f"w{w.index:02d}-drain.json", result.stdout)
    status, error = _child_failure("drain fio", result)
    if status == SUCCEEDED:
        problems = fio_job_errors(result.stdout)
        if problems:
            status, error = FAILED, "; ".join(problems)
    leftovers = _raw_leftovers(ctx, "drain fio")
    if leftovers:
        status, error = FAILED, leftovers
    record.update(status=status, error=error, seconds=round(result.seconds, 3))
    return record


def _run_workload(ctx: _Context, w: Workload) -> Outcome:
    if ctx.target.error:
        return Outcome(SKIPPED, "target not prepared")
    if w.kind == "fio":
        return _run_fio(ctx, w)
    if w.kind == "ioping":
        return _run_ioping(ctx, w)
    return _run_app(ctx, w, "run")


def _entry(w: Workload, outcome: Outcome) -> dict[str, object]:
    return {
        "index": w.index,
        "kind": w.kind,
        "name": w.name,
        "status": outcome.status,
        "error": outcome.error,
        "seconds": round(outcome.seconds, 3),
        "artifact": outcome.artifact,
        "exit_code": outcome.exit_code,
        "stderr_tail": outcome.stderr_tail,
    }


def _manifest(payload: SlotPayload, target: PreparedTarget, started_at: str) -> dict[str, object]:
    identity: dict[str, str | None] = {"instance_type": None, "instance_id": None, "az_id": None}
    if payload.platform == "aws":
        identity = ec2_identity()
    else:
        identity["instance_type"] = str(payload.cell.get("instance_type") or "local")
    return {
        "version": 1,
        "run_id": payload.run_id,
        "slot_index": payload.slot_index,
        "cell": payload.cell,
        "platform": payload.platform,
        "started_at": started_at,
        "clock": clock_status(),
        **system_info(),
        **target.details(),
        **identity,
        "workloads": payload.raw.get("workloads"),
        "burst": payload.raw.get("burst"),
    }


def _say(message: str) -> None:
    try:
        print(f"iofleet agent: {message}", file=sys.stderr, flush=True)
    except OSError:  # stderr went with its terminal (the SIGHUP that stopped the slot)
        pass


def run_slot(payload: dict) -> int:
    """Run every workload of one slot; 0 when all succeeded, 1 otherwise.

    Raises PayloadError (a UsageError: one line, exit 2) for a payload that
    cannot be run at all.
    """
    spec = parse_payload(payload)
    try:
        store = store_from_config(spec.results)
        barrier = barrier_from_config(spec.barrier)
    except (StoreError, BarrierError) as exc:
        raise PayloadError(f"slot payload: {exc}") from None
    try:
        with orphans_killed():  # a guardian killed from outside leaves nothing running
            return _run(spec, store, barrier)
    except (StoreError, BarrierError) as exc:
        _say(f"slot {spec.slot_index} of {spec.cell_id} aborted: {exc}")
        return EXIT_FAILED


# What each kind of workload imports when it runs (`_run_fio`, `_run_ioping`)
WORKLOAD_MODULES = {
    "fio": ("iofleet.plan.fiojobs",),
    "ioping": ("iofleet.results.parsers.ioping",),
}


def load_workload_modules(spec: SlotPayload) -> None:
    """Import what the slot's workloads will import, now, before the start barrier: an
    import in `_run_fio` (fio's job library and option tables, 10-30 ms) sat between the
    release instant and fio's start."""
    import importlib

    for kind in dict.fromkeys(w.kind for w in spec.workloads):
        for name in WORKLOAD_MODULES.get(kind, ()):
            importlib.import_module(name)


def _run(spec: SlotPayload, store: ResultsStore, barrier: Barrier) -> int:
    start = time.monotonic()
    deadline = start + spec.time_limit_s
    started_at = _now()
    prefix = spec.slot_prefix
    made: list[PreparedTarget] = []  # the target as far as it was prepared: cleaned up
    error: str | None = None
    waited = 0.0
    passage: BarrierResult | None = None
    clock_at_pass: dict[str, object] | None = None
    interrupted = False
    running: int | None = None
    entries: list[dict[str, object]] = []
    phases: list[dict[str, object]] = []
    with contextlib.ExitStack() as tail:  # a signal that came meanwhile: on leaving
        kept = tail.enter_context(outputs_kept())
        try:
            # a stop from here on (even in the target's set-up) is recorded in slot.json,
            # and what was set up by then is undone (before, set-up was outside: no record)
            load_workload_modules(spec)
            with stops_held():
                # Python's first look for a temp dir writes and removes a probe file in
                # it; a stop between the two left the file in TMPDIR (mkdtemp looks first)
                tempfile.gettempdir()
            target = prepare_target(spec, f"slot-{spec.slot_index:04d}", made)
            store.put_json(f"{prefix}/manifest.json", _manifest(spec, target, started_at))
            ctx = _Context(spec, store, target, prefix, deadline, str(spec.slot_index))
            if target.error:
                barrier.announce(spec.slot_index)  # the other slots need not wait for us
                error = f"target: {target.error}"
            else:
                remaining = max(deadline - time.monotonic(), 0.0)
                try:
                    passage = barrier.wait(spec.slot_index, timeout_s=remaining)
                except BarrierError as exc:  # the barrier broke while waiting: nothing runs
                    error = f"start barrier: {exc}"
                else:
                    waited = passage.waited_s
                    error = passage.error
                    if passage.passed:
                        clock_at_pass = clock_status()  # the kernel's error bound at the start
            for w in spec.workloads:
                if error is not None:  # target or barrier trouble: nothing runs
                    outcome = Outcome(SKIPPED, "not run: " + error)
                elif time.monotonic() >= deadline:
                    outcome = Outcome(
                        SKIPPED, f"slot time limit of {spec.time_limit_s:g} s reached"
                    )
                else:
                    running = w.index
                    moved = target.device_change()  # raw: the device the guard claimed, still?
                    if moved:
                        outcome = Outcome(FAILED, f"not run: {moved}")
                    else:
                        phase = None if target.error else _burst_phase(ctx, w)
                        if phase is not None:
                            phases.append(phase)
                        outcome = _run_workload(ctx, w)  # (a device that changed while
                        # it ran voids its output: _not_about_the_target)
                entries.append(_entry(w, outcome))
                kept.release()  # a signal that came since the workload ended: now
        except KeyboardInterrupt:  # one of STOPS (sigterm_interrupts): the child group is gone
            interrupted = True
            error = "slot interrupted by a signal"
            done = {e["index"] for e in entries}
            for w in spec.workloads:
                if w.index not in done:
                    status = FAILED if w.index == running else SKIPPED
                    entries.append(_entry(w, Outcome(status, error)))
        finally:
            # from here the slot only cleans up and records: no signal cuts that
            tail.enter_context(stops_held())
            pause("slot-cleanup")  # a test sends a second stop here (iofleet.testhook)
            cleanup_problem = cleanup_target(made[0]) if made else None
        failed = [e for e in entries if e["status"] != SUCCEEDED]
        failed_phases = [p for p in phases if p["status"] != SUCCEEDED]
        if error is None and failed_phases and not failed:
            first_phase = failed_phases[0]
            error = (
                f"burst_policy {spec.burst.policy} before workload {first_phase['workload_index']}: "
                f"{first_phase['status']}: {first_phase['error']}"
            )
        if error is None and failed:
            first = failed[0]
            error = (
                f"{len(failed)} of {len(entries)} workloads did not succeed; first: "
                f"workload {first['index']} ({first['kind']} {first['name']}): {first['status']}: {first['error']}"
            )
        exit_code = EXIT_INTERRUPTED if interrupted else EXIT_FAILED if error else EXIT_OK
        store.put_json(
            f"{prefix}/slot.json",
            {
                "version": 1,
                "run_id": spec.run_id,
                "cell_id": spec.cell_id,
                "slot_index": spec.slot_index,
                "status": SUCCEEDED if exit_code == EXIT_OK else FAILED,
                "exit_code": exit_code,
                "error": error,
                "started_at": started_at,
                "finished_at": _now(),
                "barrier_waited_s": round(waited, 3),
                # the agreed start instant and the one this slot passed (its wall clock)
                "barrier_released_at": iso_us(passage.released_us) if passage else None,
                "barrier_passed_at": iso_us(passage.passed_us) if passage else None,
                "barrier_late_s": round(passage.late_us / 1e6, 6)
                if passage and passage.passed
                else None,
                "clock": clock_at_pass,
                "cleanup_problem": cleanup_problem,
                "workloads": entries,
                "burst": {
                    "policy": spec.burst.policy,
                    "applied": burst_applies(spec),
                    "note": burst_note(spec),
                    "phases": phases,
                },
            },
        )
        if error:
            _say(f"slot {spec.slot_index} of {spec.cell_id} FAILED: {error}")
    return exit_code


def run_slot_file(path: Path) -> int:
    """`iofleet agent --slot FILE`: load the payload JSON and run it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PayloadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PayloadError(f"{path}: not UTF-8 (byte offset {exc.start})") from None
    try:
        payload = json.loads(text, parse_int=parse_int)
    except PayloadError as exc:  # a number no payload field holds
        raise PayloadError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PayloadError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise PayloadError(f"{path}: invalid JSON: nested too deeply") from None
    raise_open_files_limit()
    with sigterm_interrupts():
        try:
            return run_slot(payload)
        except PayloadError as exc:  # the payload's own problems, named by its file
            raise PayloadError(f"{path}: {exc}") from None


def raise_open_files_limit() -> None:
    """Raise this process's soft limit of open files to its hard limit, for the workloads
    it starts: a fio job opens all its `nrfiles` at once (fio fails 'try reducing/setting
    openfiles' past the soft limit), and a shell's soft limit is often 1,024 of a hard
    limit far higher. The plan checks the hard limit (fiojobs.host_problems)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@contextlib.contextmanager
def sigterm_interrupts(after: signal.Handlers | None = None) -> Iterator[None]:
    """Inside the block SIGTERM (and SIGHUP) stops the slot the way Ctrl-C does:
    KeyboardInterrupt, so the running child's process group is killed and slot.json
    written. Once only, for all of STOPS: after the first, later ones are ignored, so
    that unwinding (and, on EC2, the upload after it) is not cut short, and the slot's
    FAILED line is its only line (a second Ctrl-C during cleanup added "iofleet:
    interrupted"). On leaving, each gets its previous handler back (SIGTERM `after`,
    when given). A stop whose KeyboardInterrupt a finalizer dropped is taken back and
    raised at the slot's next point (iofleet.agent.stops)."""

    def interrupt(signum: int, frame: object) -> None:
        for stop in STOPS:
            signal.signal(stop, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = {stop: signal.signal(stop, interrupt) for stop in STOPS}
    if after is not None:
        previous[signal.SIGTERM] = after
    try:
        with stops.dropped_stops_kept():
            yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


class _OutputsKept:
    """The STOPS as before, except between a workload's end and the moment its output and
    outcome are saved (`iofleet.agent.process.child_ended`): a signal there waits for
    `release`, so a workload that ran to its end is never lost to it."""

    def __init__(self) -> None:
        self.held: list[int] = []
        self.previous: dict[int, Any] = {}

    def handle(self, signum: int, frame: object) -> None:
        if child_ended():
            self.held.append(signum)
            return
        self._meet(signum, self.previous[signum])

    @staticmethod
    def _meet(signum: int, handler: Any) -> None:
        if callable(handler):
            handler(signum, None)  # raises KeyboardInterrupt (sigterm_interrupts, Ctrl-C)
        elif handler == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    def release(self) -> None:
        output_taken()
        # a stop a finalizer dropped (iofleet.agent.stops) came first: the one raised
        stops.raise_dropped()
        if self.held:
            first, self.held = self.held[0], []
            self._meet(first, self.previous[first])


@contextlib.contextmanager
def outputs_kept() -> Iterator[_OutputsKept]:
    """Installs `_OutputsKept` over the STOPS' handlers of the moment (the
    main thread only); on leaving, whichever handler a signal left is kept (SIGTERM's
    own sets SIG_IGN), else the previous one comes back."""
    kept = _OutputsKept()
    if threading.current_thread() is not threading.main_thread():
        yield kept
        return
    for signum in STOPS:
        kept.previous[signum] = signal.signal(signum, kept.handle)
    try:
        yield kept
    finally:
        output_taken()
        for stop, handler in kept.previous.items():
            if signal.getsignal(stop) == kept.handle:
                signal.signal(stop, handler)


def run_populate(payload: dict, workload_index: int) -> int:
    """Run workloads[workload_index]'s populate command once for the cell (0 = ok).

    Writes `{run_id}/{cell_id}/populate/w{WI:02d}-app-{app}.json`; an app
    without a populate command is a no-op.
    """
    spec = parse_payload(payload)
    matches = [w for w in spec.workloads if w.index == workload_index]
    if not matches or matches[0].kind != "app":
        raise PayloadError(f"workloads[{workload_index}]: not an app workload")
    w = matches[0]
    if not w.populate:
        return EXIT_OK
    try:
        store = store_from_config(spec.results)
    except StoreError as exc:
        raise PayloadError(f"slot payload: {exc}") from None
    target = prepare_target(spec, "populate")
    if target.error:
        _say(f"populate {w.name} for {spec.cell_id} FAILED: target: {target.error}")
        return EXIT_FAILED
    ctx = _Context(
        spec, store, target, spec.populate_prefix, time.monotonic() + spec.time_limit_s, "populate"
    )
    try:
        with orphans_killed():
            outcome = _run_app(ctx, w, "populate")
    except StoreError as exc:
        outcome = Outcome(FAILED, str(exc))
    finally:
        cleanup_target(target)
    if outcome.status != SUCCEEDED:
        _say(f"populate {w.name} for {spec.cell_id} FAILED: {outcome.error}")
        return EXIT_FAILED
    return EXIT_OK
