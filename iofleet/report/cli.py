"""`iofleet report`: read a warehouse, print a table/JSON/CSV, optionally write HTML."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iofleet.errors import EnvironmentProblem, UsageError
from iofleet.report.model import ReportData

if TYPE_CHECKING:
    from iofleet.results.warehouse import Warehouse

FORMATS = ("table", "json", "csv")

# strerror texts that mean the machine's problem (exit 3), not a bad argument
MACHINE_ERRORS = (
    "No space left on device",
    "Disk quota exceeded",
    "Read-only file system",
    "Input/output error",
)


def load_report_data(wh: object, run_id: str, target: str | None = None) -> ReportData:
    """Everything a report shows for one run, from the warehouse views."""
    from iofleet.report import decision as sections
    from iofleet.results.warehouse import Warehouse

    assert isinstance(wh, Warehouse)
    conditions = []
    if target is not None:
        from iofleet.results.decide import parse_target

        conditions = parse_target(target)
    return ReportData(
        decision=_decision(wh, run_id, conditions),
        target=[c.text for c in conditions],
        fleet_totals=sections.load_fleet_totals(wh, run_id),
        failures=sections.load_failures(wh, run_id),
        environment=sections.load_environment(wh, run_id),
        ioping=sections.load_ioping_latency(wh, run_id),
        noise=_repeat_noise(wh, run_id),
        run_id=run_id,
        run=wh.run_info(run_id),
        percentiles=wh.cell_percentiles(run_id),
        fleet=wh.fleet_latency(run_id),
        slots=wh.query(
            "SELECT cell_id, slot_index, status, exit_code, error FROM slots "
            "WHERE run_id = ? ORDER BY cell_index, cell_id, slot_index",
            [run_id],
        ),
        ingest_errors=wh.ingest_errors(run_id),
        expected=wh.query(
            "SELECT * FROM expected_vs_measured WHERE run_id = ? ORDER BY "
            "workload_index, job, direction, cell_index NULLS LAST, cell_id",
            [run_id],
        ),
        skew=wh.query(
            "SELECT * FROM start_skew WHERE run_id = ? ORDER BY cell_index NULLS LAST, cell_id",
            [run_id],
        ),
    )


def _decision(wh: Warehouse, run_id: str, conditions: list[Any]) -> dict[str, list[dict[str, Any]]]:
    from iofleet.report.decision import load_decision

    return load_decision(wh, run_id, conditions)


def _repeat_noise(wh: Warehouse, run_id: str) -> list[dict[str, Any]] | None:
    """Repeat noise of the run's configurations (None when scipy is not installed)."""
    try:
        from iofleet.results.noise import repeat_noise
    except ImportError:
        return None
    from iofleet.results.compare import load_slot_values

    return repeat_noise(load_slot_values(wh, [run_id]))


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

    if not path.is_file():
        raise UsageError(f"--warehouse {path}: no such file")
    try:
        return Warehouse(path)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if any(m in first for m in MACHINE_ERRORS):  # the disk, not the input: exit 3
            raise EnvironmentProblem(f"--warehouse {path}: cannot open: {first}") from None
        raise UsageError(f"--warehouse {path}: cannot open: {first}") from None


def report_command(
    warehouse: Path,
    run_id: str | None,
    fmt: str,
    html: str | None,
    target: str | None = None,
    view: str | None = None,
    opened: Warehouse | None = None,
) -> int:
    """Print the report of one run (default: the latest) and optionally write HTML.

    `target`: the decision table's target (iofleet.results.decide grammar); `view`:
    print only this section (csv/json; csv prints the decision table without it).
    `opened`: the warehouse already open at `warehouse` (`iofleet local` just
    ingested into it; it stays open), instead of opening the file again."""
    from contextlib import nullcontext

    from iofleet.report.html import render_html
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
    with nullcontext(opened) if opened is not None else open_warehouse(Path(warehouse)) as wh:
        known = wh.run_ids()
        if run_id is None:
            if not known:
                raise UsageError(f"--warehouse {warehouse}: no runs in this warehouse")
            run_id = known[0]
        elif run_id not in known:
            shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
            raise UsageError(f"--run {run_id}: unknown run (known: {shown or 'none'})")
        data = load_report_data(wh, run_id, target)
    text = render(data, fmt, view)
    if html:
        out = Path(html)
        try:
            out.write_text(render_html(data), encoding="utf-8")
        except OSError as exc:
            problem = f"--html {out}: cannot write: {exc.strerror or exc}"
            if exc.strerror in MACHINE_ERRORS:
                raise EnvironmentProblem(problem) from None
            raise UsageError(problem) from None
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0
