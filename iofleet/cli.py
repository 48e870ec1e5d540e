"""`iofleet` command line.

Imports are lazy: `iofleet agent` runs on a bare instance with only the
standard library, and must not pull pydantic or duckdb in.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NoReturn

from iofleet.errors import (
    EXIT_BUSY,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    EnvironmentProblem,
    OutputBusy,
    Problem,
    UsageError,
    ValidationFailed,
    clipped_line,
    one_line,
)


def _cmd_plan(args: argparse.Namespace) -> int:
    from iofleet.plan.matrix import plan_matrix_file, render_plan_table

    plan = plan_matrix_file(args.matrix, target=args.target)
    matrix = plan.matrix
    if args.target == "local":  # what `iofleet local` refuses before it makes anything
        from iofleet.local.runner import preflight
        from iofleet.plan.matrix import matrix_file_name

        preflight(plan, Path.cwd().resolve(), matrix_file_name(args.matrix))
    host = None
    if args.target == "aws":  # the OS the instances run and what their bootstrap adds
        from iofleet.plan.hosts import describe, for_matrix

        host = for_matrix(matrix)[0]
    if args.format == "json":
        doc = plan.to_dict()
        if host is not None:
            doc["host"] = host.to_dict()
        print(json.dumps(doc, indent=2, sort_keys=False))
    else:
        print(render_plan_table(plan) + (f"\n{describe(host)}" if host is not None else ""))
    return 0


def _cmd_jobs(args: argparse.Namespace) -> int:
    from iofleet.plan.fiojobs import JobFileError, list_jobs

    try:
        jobs = list_jobs()
    except JobFileError as exc:  # the message starts with the job file (or the library)
        raise ValidationFailed([Problem("", str(exc))]) from None
    if args.format == "json":
        print(json.dumps([j.to_dict() for j in jobs], indent=2))
        return 0
    width = max(len(j.name) for j in jobs)
    for job in jobs:
        print(f"{job.name:<{width}}  {job.description}")
        if args.verbose:
            print(f"{'':<{width}}    sha256 {job.text_sha256}")
            for name, default in job.params.items():
                kind = job.param_types.get(name)
                what = f"  - {kind.describe()}" if kind else ""
                print(f"{'':<{width}}    ${{{name}}} = {default}{what}")
    return 0


def _cmd_parse(args: argparse.Namespace) -> int:
    from iofleet.results.parsers import parse_file

    def warn(message: str) -> None:
        print(f"warning: {message}", file=sys.stderr)

    for record in parse_file(Path(args.file), kind=args.kind, warn=warn):
        print(json.dumps(record, sort_keys=False))
    return 0


def _cmd_local(args: argparse.Namespace) -> int:
    import shutil

    from iofleet.local.stopping import startup_stops
    from iofleet.plan.fiojobs import stop_parse_only_checks
    from iofleet.testhook import pause

    # SIGINT, SIGTERM and SIGHUP interrupt from here on, until the run takes them
    with startup_stops():
        try:
            with modules_loading(args):
                from iofleet.plan.fiojobs import start_parse_only_checks

                # fio's own checks of the matrix's jobs start now, beside the imports and
                # the validation that take their answers; the file is read once, here
                data = start_parse_only_checks(args.matrix, shutil.which("fio"))
                pause("checks-started")  # a test delivers a signal here (iofleet.testhook)
                import iofleet.plan.matrix  # noqa: F401 - the validation's: loaded here
                from iofleet.local.runner import run_local

            return run_local(
                Path(args.matrix),
                _out_path(args.out),
                quiet=args.quiet,
                report_format=args.format,
                matrix_bytes=data,
            )
        finally:  # what the plan did not take, however it ended (run_local stops them too)
            stop_parse_only_checks()


def _cmd_report(args: argparse.Namespace) -> int:
    from iofleet.report.cli import report_command

    return report_command(
        Path(args.warehouse) if args.warehouse is not None else None,
        run_id=args.run,
        fmt=args.format,
        html=args.html,
        target=args.target,
        view=args.view,
        **_source(args),
    )


def _source(args: argparse.Namespace) -> dict[str, Any]:
    """The Athena options of report/compare (iofleet.report.cli.open_source)."""
    return {
        "athena": args.athena,
        "workgroup": args.workgroup,
        "database": args.database,
        "athena_output": args.athena_output,
    }


def _add_source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warehouse", help="path to warehouse.duckdb (or --athena)")
    p.add_argument(
        "--athena",
        action="store_true",
        help="read the deployed stack's Athena views instead of a warehouse file "
        "(AWS credentials and region from the usual AWS configuration)",
    )
    p.add_argument("--workgroup", help="with --athena: the stack's AthenaWorkGroup output")
    p.add_argument(
        "--database", default="iofleet", help="with --athena: the Glue database (default iofleet)"
    )
    p.add_argument(
        "--athena-output",
        metavar="S3_URI",
        help="with --athena: s3://BUCKET/PREFIX/ for query results, if the workgroup sets none",
    )


def _cmd_compare(args: argparse.Namespace) -> int:
    from iofleet.results.compare import compare_command

    return compare_command(
        Path(args.warehouse) if args.warehouse is not None else None,
        args.runs,
        a_selector=args.a,
        b_selector=args.b,
        fmt=args.format,
        **_source(args),
    )


def _cmd_import(args: argparse.Namespace) -> int:
    from iofleet.local.progress import Progress
    from iofleet.results.importer import import_command

    return import_command(
        [Path(f) for f in args.files],
        _out_path(args.out),
        label=args.label,
        slot_per=args.slot_per,
        # a status line on a terminal only: off one, stderr keeps what was refused and why
        progress=Progress(sys.stderr, quiet=args.quiet or not sys.stderr.isatty()),
    )


def _matrix_arg(value: str) -> str:
    """The matrix path as given; an empty one (an unset `$MATRIX`) is a bad command
    line, not the current directory that Path("") would make of it."""
    if not value:
        raise argparse.ArgumentTypeError("the matrix path is empty")
    return value


def _out_path(value: str) -> Path:
    """`--out`: an empty value would be the working directory (Path("") is ".")."""
    if not value.strip():
        raise UsageError("--out: must not be empty (a directory for raw/, the warehouse)")
    return Path(value)


def _cmd_agent(args: argparse.Namespace) -> int:
    with modules_loading(args):
        from iofleet.agent.manifest import tool_versions_started

    with tool_versions_started():  # the manifest's tool versions load beside the imports
        with modules_loading(args):
            from iofleet.agent.slot import run_slot_file

        return run_slot_file(Path(args.slot))


def modules_loading(args: argparse.Namespace) -> AbstractContextManager[None]:
    """A command's imports without the cyclic garbage collector (iofleet.loading); when
    the command is the whole process (`main()` of the command line), what they made is
    then frozen."""
    from iofleet.loading import collection_paused

    return collection_paused(freeze=getattr(args, "whole_process", False))


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line (`iofleet plan: message (see ...)`),
    exit 2, like every other bad input (README "Exit status"); argparse prints the usage
    line first."""

    def error(self, message: str) -> NoReturn:
        from iofleet.quote import clip

        # argparse writes what the user typed whole (`unrecognized arguments: ...`,
        # `invalid choice: '...'`): a line break or U+2028 in it is escaped, and a long
        # one clipped with its length, as every other refusal quotes (iofleet.quote)
        line = clip(message, MAX_USAGE_LINE)
        self.exit(EXIT_USAGE, f"{self.prog}: {line} (see {self.prog} --help)\n")


MAX_USAGE_LINE = 300  # argparse's message, before the prog and the --help hint


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="iofleet",
        description="Storage benchmarks at fleet scale: plan, run locally, parse, report.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plan", help="validate a matrix and expand it into cells (offline)")
    p.add_argument("matrix", type=_matrix_arg, help="matrix JSON file ('-' for stdin)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument(
        "--target",
        choices=["aws", "local"],
        default="aws",
        help="plan for an AWS run (default) or a local run",
    )
    p.set_defaults(func=_cmd_plan)

    p = sub.add_parser("jobs", help="list the fio job library")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show each job's sha256 (a matrix's job_sha256), parameters and defaults",
    )
    p.set_defaults(func=_cmd_jobs)

    p = sub.add_parser("parse", help="parse a raw fio or ioping output file into JSON lines")
    p.add_argument("file")
    p.add_argument("--kind", choices=["auto", "fio", "ioping", "app"], default="auto")
    p.set_defaults(func=_cmd_parse)

    p = sub.add_parser("local", help="run a matrix here against local paths")
    p.add_argument("matrix", type=_matrix_arg, help="matrix JSON file ('-' for stdin)")
    p.add_argument("--out", required=True, help="output directory (raw/, warehouse, report)")
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=_cmd_local)

    p = sub.add_parser("report", help="percentile report from a warehouse or Athena")
    _add_source_args(p)
    p.add_argument(
        "--run",
        help="run id (default: the run that started last; an import starts at its "
        "earliest measurement)",
    )
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")
    p.add_argument("--html", help="also write an HTML report to this path")
    p.add_argument(
        "--target",
        help="decision target, e.g. 'p98_build_minutes<=105' (README: Report, targets)",
    )
    p.add_argument(
        "--view",
        help="with --format csv|json: only this section (decision, pivot, scaling, "
        "fleet_totals, failures, environment, cell_percentiles, ...; csv default: decision)",
    )
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "compare",
        help="is B better than A? per workload and metric, with intervals and a verdict",
        description="Compare two runs, or configurations within runs (README 'Compare').",
    )
    _add_source_args(p)
    p.add_argument("runs", nargs="+", metavar="RUN", help="RUN_A [RUN_B] (one run: --a and --b)")
    p.add_argument("--a", metavar="SELECTOR", help="side A: FIELD=VALUE[,FIELD=VALUE...]")
    p.add_argument("--b", metavar="SELECTOR", help="side B: FIELD=VALUE[,FIELD=VALUE...]")
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser(
        "import",
        help="load existing fio JSON/JSON+ and ioping -J files as a run",
        description="Import results made outside iofleet (README 'Import').",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--out", required=True, help="output directory (raw/, warehouse)")
    p.add_argument("--label", required=True, help="storage label (and run name) of these results")
    p.add_argument(
        "--slot-per",
        choices=["file", "dir"],
        default="file",
        help="what one slot (instance) is: each file (default) or each directory; "
        "fio client/server output is one slot per host",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser("agent", help="run one slot from a slot payload (used by local and EC2)")
    p.add_argument("--slot", required=True, help="slot payload JSON file")
    p.set_defaults(func=_cmd_agent)
    return parser


def _version() -> str:
    from iofleet import __version__

    return f"iofleet {__version__}"


# Commands whose process ends with the command: once they return, everything they write
# is written and closed, so the program (argv None: the command line) leaves at once
# instead of tearing the interpreter down, which frees every module and object: about
# 0.1 s with DuckDB and pydantic loaded, paid at the end of every `iofleet local` and of
# every slot's agent (docs/benchmarks.md, harness overhead).
EXIT_AT_ONCE = frozenset({"local", "agent"})


def main(argv: Sequence[str] | None = None, sigint: Any = None) -> int:
    """`sigint`: the SIGINT handler to put back once the command line is parsed
    (iofleet.__main__ holds Ctrl-C's default action until then)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.whole_process = argv is None  # the command line's process (modules_loading)
    if sigint is not None:
        import signal

        signal.signal(signal.SIGINT, sigint)
    code = _run(args)
    if argv is None and args.command in EXIT_AT_ONCE:
        exit_at_once(code)
    return code


def exit_at_once(code: int) -> NoReturn:
    """End the process with `code` now: flush stdout and stderr, run the atexit handlers,
    then _exit. What is skipped is the interpreter's teardown (module and object
    finalisation), so the caller has closed what it wrote."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream
            pass
    atexit._run_exitfuncs()
    os._exit(code)


# Stopped by the first SIGINT/SIGTERM/SIGHUP wherever they are, a DuckDB statement
# included: exit 128 + the signal, one line (iofleet.local.stopping.command_stops).
STOPPABLE = frozenset({"import", "report", "compare"})


def _interrupt_warehouses() -> None:
    """Stop the open warehouses' statements (from the stop signals' watcher thread):
    none is open before the warehouse module is loaded, which the command does once its
    stops are in place (importing DuckDB takes a tenth of a second)."""
    warehouse = sys.modules.get("iofleet.results.warehouse")
    interrupt = getattr(warehouse, "interrupt_open_warehouses", None)
    if interrupt is not None:
        interrupt()


def _call(args: argparse.Namespace) -> int:
    if args.command not in STOPPABLE:
        return int(args.func(args) or 0)
    from iofleet.local.stopping import command_stops, held

    to_the_end = getattr(args, "whole_process", False)
    with command_stops(_interrupt_warehouses, to_the_end=to_the_end):
        if not getattr(args, "athena", False):
            # DuckDB's extension module calls back into Python as it loads: a stop
            # signal's Interrupted raised there aborts the process (nanobind's "Critical
            # error", SIGABRT or SIGSEGV). It is loaded with the signals held, then
            # the first one that came is raised (decision 68).
            with held():
                import duckdb  # noqa: F401
        return int(args.func(args) or 0)


def _run(args: argparse.Namespace) -> int:
    try:
        return _call(args)
    except ValidationFailed as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(clipped_line(f"iofleet: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except EnvironmentProblem as exc:
        print(clipped_line(f"iofleet: {exc}"), file=sys.stderr)
        return EXIT_ENVIRONMENT
    except OutputBusy as exc:
        print(clipped_line(f"iofleet: {exc}"), file=sys.stderr)
        return EXIT_BUSY
    except KeyboardInterrupt as exc:  # `iofleet local` names the signal (local.stopping)
        name = getattr(exc, "name", None)
        outcome = getattr(exc, "outcome", None) or getattr(exc.__cause__, "outcome", None)
        if outcome is None and args.command == "report" and args.html:
            outcome = f"--html {args.html} not written (left as it was)"
        print(
            one_line(
                "iofleet: interrupted"
                + (f" by {name}" if name else "")
                + (f": {outcome}" if outcome else "")
            ),
            file=sys.stderr,
        )
        return int(getattr(exc, "exit_status", EXIT_INTERRUPTED))
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI never shows a traceback by default
        from iofleet.results.parsers import ParseError

        if isinstance(exc, ParseError):  # a file given to parse is bad input: `PATH: message`
            print(clipped_line(str(exc)), file=sys.stderr)
            return EXIT_USAGE
        if os.environ.get("IOFLEET_DEBUG"):
            raise
        print(
            one_line(
                f"iofleet: internal error: {type(exc).__name__}: {exc} "
                "(set IOFLEET_DEBUG=1 for a traceback)"
            ),
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
