"""`iofleet report`: read a warehouse, print a table/JSON/CSV, optionally write HTML."""

from __future__ import annotations

import fcntl
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iofleet.errors import EnvironmentProblem, OutputBusy, UsageError
from iofleet.quote import clip
from iofleet.report.model import ReportData
from iofleet.testhook import pause

if TYPE_CHECKING:
    from iofleet.results.source import ResultsSource
    from iofleet.results.warehouse import Warehouse

FORMATS = ("table", "json", "csv")

# strerror texts that mean the machine's problem (exit 3), not a bad argument
MACHINE_ERRORS = (
    "No space left on device",
    "Disk quota exceeded",
    "Read-only file system",
    "Input/output error",
)


def lock_holder(exc: BaseException) -> str | None:
    """When DuckDB's error says (on its first line) that another process holds the
    file's lock: who, as ` (pid N)` (or "" when DuckDB names none); else None."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if "Could not set lock on file" not in first:
        return None
    holder = re.search(r"\(PID (\d+)\)", first)
    return f" (pid {holder[1]})" if holder else ""


def load_report_data(src: ResultsSource, run_id: str, target: str | None = None) -> ReportData:
    """Everything a report shows for one run, from the views of a results source
    (a DuckDB warehouse or Athena: iofleet.results.source)."""
    conditions = []
    if target is not None:
        from iofleet.results.decide import parse_target

        conditions = parse_target(target)
    # a DuckDB warehouse reads on one thread (the same report, byte for byte, each time)
    one_thread = getattr(src, "one_thread", None)
    with one_thread() if one_thread is not None else nullcontext():
        return _load_report_data(src, run_id, conditions)


def _load_report_data(src: ResultsSource, run_id: str, conditions: list[Any]) -> ReportData:
    from iofleet.report import decision as sections
    from iofleet.results import source as read
    from iofleet.results.compare import load_slot_values

    values = load_slot_values(src, [run_id])
    noise, noise_missing = _repeat_noise(values)
    return ReportData(
        decision=sections.load_decision(src, run_id, conditions, slot_values=values),
        target=[c.text for c in conditions],
        fleet_totals=sections.load_fleet_totals(src, run_id),
        failures=sections.load_failures(src, run_id),
        environment=sections.load_environment(src, run_id),
        ioping=sections.load_ioping_latency(src, run_id),
        noise=noise,
        noise_missing=noise_missing,
        run_id=run_id,
        run=read.run_info(src, run_id),
        percentiles=read.cell_percentiles(src, run_id),
        fleet=read.fleet_latency(src, run_id),
        slots=read.slots(src, run_id),
        ingest_errors=read.ingest_errors(src, run_id),
        expected=read.expected_vs_measured(src, run_id),
        skew=read.start_skew(src, run_id),
    )


def _repeat_noise(values: list[dict[str, Any]]) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(noise rows, None), or (None, why) when numpy/scipy cannot be imported: the
    report then says the section is missing and why (scipy is imported only once a
    configuration has 2+ repeats, so a run without repeats never gets here)."""
    try:
        from iofleet.results.noise import repeat_noise

        return repeat_noise(values), None
    except ImportError as exc:
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]


def render(data: ReportData, fmt: str, view: str | None = None) -> str:
    if fmt == "json":
        from iofleet.report.machine import render_json

        return render_json(data, view)
    if fmt == "csv":
        from iofleet.report.machine import render_csv

        return render_csv(data, view or "decision")
    if fmt == "table":
        from iofleet.report.text import render_text

        return render_text(data)
    raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")


def open_warehouse(path: Path) -> Warehouse:
    """An existing warehouse file, or UsageError (`--warehouse PATH: ...`, exit 2)."""
    import duckdb

    from iofleet.results.warehouse import Warehouse

    if path.is_dir():
        raise UsageError(f"--warehouse {path}: is a directory, expected a warehouse.duckdb file")
    if not path.is_file():
        raise UsageError(f"--warehouse {path}: no such file")
    try:
        # looked at read-only first: opening for writing brings the schema up to date,
        # which must never happen to a DuckDB file that is not a warehouse
        with duckdb.connect(str(path), read_only=True) as con:
            found = con.execute(
                "SELECT count(DISTINCT table_name) FROM duckdb_columns() "
                "WHERE database_name = current_database() "
                "AND table_name IN ('runs', 'slots') AND column_name = 'run_id'"
            ).fetchone()
        if not found or found[0] != 2:
            raise UsageError(
                f"--warehouse {path}: not an iofleet warehouse (no runs and slots tables "
                "with a run_id); left as it is"
            )
        return Warehouse(path, read_only=True)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if any(m in first for m in MACHINE_ERRORS):  # the disk, not the input: exit 3
            raise EnvironmentProblem(f"--warehouse {path}: cannot open: {first}") from None
        holder = lock_holder(exc)
        if holder is not None:  # another process writes it: exit 4
            raise OutputBusy(f"--warehouse {path}: in use by another process{holder}") from None
        raise UsageError(f"--warehouse {path}: cannot open: {first}") from None


@contextmanager
def open_source(
    warehouse: Path | str | None,
    *,
    athena: bool = False,
    workgroup: str | None = None,
    database: str | None = "iofleet",
    athena_output: str | None = None,
) -> Iterator[Any]:
    """The results source the command line names (iofleet.results.source): a DuckDB
    warehouse (`--warehouse PATH`) or Athena (`--athena --workgroup W --database D`)."""
    if athena:
        if warehouse is not None:
            raise UsageError("--warehouse: not with --athena (read one source)")
        from iofleet.aws.athena import open_athena

        yield open_athena(workgroup, database, athena_output)
        return
    for flag, value in (("--workgroup", workgroup), ("--athena-output", athena_output)):
        if value is not None:
            raise UsageError(f"{flag}: only with --athena")
    if warehouse is None:
        raise UsageError("--warehouse: required (or --athena --workgroup NAME)")
    with open_warehouse(Path(warehouse)) as wh:
        yield wh


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return a.resolve() == b.resolve()


def _write_whole(path: Path, text: str) -> None:
    """Write `path` whole or not at all: a temp file beside it, renamed over it. An
    interrupt or a full disk leaves the previous file (or none), never half of one."""
    from iofleet.local.stopping import held

    tmp = ""
    renamed = False
    try:
        with held():  # made and named in one step: a stop signal comes after, not between
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # held until the file closes, however the process ends: a run sweeping its
            # --out leaves a temp file alone while its writer lives (results.outdir)
            fcntl.flock(fd, fcntl.LOCK_EX)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # as a plain open would make it, not mkstemp's 0600
            handle.write(text)
            handle.flush()
            pause("temp-html")  # a test stops or kills the writer here (iofleet.testhook)
            with held():  # renamed and known to be, in one step: a stop comes after
                os.replace(tmp, path)
                renamed = True
    except BaseException as exc:
        if renamed:  # a stop just after the rename: the line says the report is there
            if isinstance(exc, KeyboardInterrupt):
                exc.outcome = f"--html {path} written"  # type: ignore[attr-defined]
        elif tmp:
            Path(tmp).unlink(missing_ok=True)
        raise


def report_command(
    warehouse: Path | None,
    run_id: str | None,
    fmt: str,
    html: str | None,
    target: str | None = None,
    view: str | None = None,
    opened: Warehouse | None = None,
    **source: Any,
) -> int:
    """Print the report of one run (default: the latest) and optionally write HTML.

    `target`: the decision table's target (iofleet.results.decide grammar); `view`:
    print only this section (csv/json; csv prints the decision table without it).
    `opened`: the warehouse already open at `warehouse` (`iofleet local` just
    ingested into it; it stays open), instead of opening the file again.
    `source`: `open_source`'s Athena options (athena, workgroup, database, athena_output)."""
    from iofleet.report.machine import VIEWS

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if view is not None:
        if fmt == "table":
            raise UsageError("--view: only with --format csv or json")
        if view not in VIEWS:
            raise UsageError(f"--view {view}: expected one of {', '.join(VIEWS)}")
    if target is not None:
        from iofleet.results.decide import parse_target

        parse_target(target)  # a bad target is refused before anything is read
    if html == "":  # not "no --html": a path left empty
        raise UsageError("--html: empty path (give the file to write)")
    if html and warehouse is not None and _same_file(Path(html), Path(warehouse)):
        raise UsageError(f"--html {html}: is the warehouse being read (give another path)")
    # stopped by a signal, the command line says --html was not written, unless
    # _write_whole says it was (the Interrupted's `outcome`)
    text = _report_text(warehouse, run_id, fmt, html, target, view, opened, source)
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _report_text(  # type: ignore[no-untyped-def]
    warehouse, run_id, fmt, html, target, view, opened, source
) -> str:
    """Read the run, write --html (whole or not at all); the text to print."""
    from iofleet.report.html import render_html
    from iofleet.results import source as read

    with nullcontext(opened) if opened is not None else open_source(warehouse, **source) as src:
        if run_id is None:
            known = read.run_ids(src)
            if not known:
                raise UsageError(f"{src.where}: no runs")
            run_id = known[0]
        elif run_id not in read.known_runs(src, [run_id]):
            raise UsageError(f"--run {clip(run_id)}: unknown run {read.known_text(src)}")
        data = load_report_data(src, run_id, target)
    text = render(data, fmt, view)
    if html:
        out = Path(html)
        try:
            _write_whole(out, render_html(data))
        except OSError as exc:
            problem = f"--html {out}: cannot write: {exc.strerror or exc}"
            if exc.strerror in MACHINE_ERRORS:
                raise EnvironmentProblem(problem) from None
            raise UsageError(problem) from None
    return text
