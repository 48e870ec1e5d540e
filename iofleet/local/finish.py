"""The end of an `iofleet local` run: the ingest into the warehouse and the report
(`_finish`), what the runner imports for them while its slots start
(`prepare_finish`), and the one line said when a signal leaves them to the next run."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from iofleet.errors import EnvironmentProblem, OutputBusy
from iofleet.local.progress import Progress
from iofleet.local.progress import say as _say
from iofleet.local.slots import SlotProcess
from iofleet.local.stopping import Interrupted, StopSignals, held

WAREHOUSE = "warehouse.duckdb"  # in --out


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

    from iofleet.loading import collection_paused

    done = 0
    with collection_paused():  # not frozen: this also runs inside other programs
        for name in FINISH_MODULES:
            if started():
                break
            try:
                with held():  # DuckDB's module is not cut as it loads (decision 68)
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
    with held():  # DuckDB's module is not cut as it loads (decision 68)
        import duckdb

    from iofleet.report.cli import MACHINE_ERRORS, lock_holder, report_command
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
        holder = lock_holder(exc)
        if holder is not None:  # another process has the warehouse open: exit 4
            raise OutputBusy(
                f"--out {out_dir}: {WAREHOUSE} is in use by another process{holder}: "
                f"run {run_id} is kept in {raw_root / run_id}, not ingested; the next run "
                "into this --out ingests it"
            ) from None
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


def _left_for_next_run(
    out_dir: Path,
    run_id: str,
    summary: RunSummary,
    exc: Interrupted,
    hurried: bool,
    first: Interrupted | None = None,
) -> int:
    """The run was interrupted before its results were ingested (a second signal while
    it stopped or as it ended, or a signal while ingesting or reporting): say what is
    where, in one line. Returns the exit status: 128 + the first signal (`first`, the
    run's first, when it came as the run ended and `summary` knows none)."""
    first = summary.interrupted or first or exc
    raw = out_dir / "raw" / run_id
    warehouse = out_dir / WAREHOUSE
    if summary.interrupted is not None and hurried:
        what = (
            f"interrupted by {first.name}, then by {exc.name} while stopping: every slot "
            f"killed, run {run_id} ABORTED and not ingested"
        )
    elif hurried:  # both came as its last cell ended: every slot had ended
        what = (
            f"interrupted by {first.name}, then by {exc.name} as the run ended: run "
            f"{run_id} {summary.status} and not ingested"
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
