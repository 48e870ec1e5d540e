"""`iofleet import`: results made outside iofleet, loaded as a run.

Accepts fio `--output-format=json` / `json+` output (fio 3.x, any job shape:
one job or many, numjobs with or without group_reporting, text before the
JSON) and `ioping -J` output. Each accepted file becomes artifacts of the raw
layout (docs/internals.md) under `OUT/raw/RUN_ID/`, in one cell labelled by
the user (`--label`), and `OUT/warehouse.duckdb` is (re)built from `OUT/raw/`,
so `iofleet report` and `iofleet compare` read it like any run.

Slots. A slot is one instance: by default each file is one slot
(`--slot-per file`); `--slot-per dir` makes each directory one slot (its fio
and ioping files are that instance's workloads). fio client/server output
(`fio --client`, a `client_stats` array) is split by server: one slot per
hostname:port (its "All clients" aggregate is left out; the slot's fio artifact
holds that server's entries as a client document, so its rows keep their `host`).

Workloads. Files measuring the same thing share a workload: a fio workload is
named by its job names (sorted, joined by '+'), ioping is `ioping`. A slot
holding the same workload twice refuses the second file (say which slot each
belongs to with separate files or `--slot-per file`).

Bad files are refused one by one (`PATH: message` on stderr); the others are
imported. Exit 0 when every file was imported, 1 when some were refused (the
rest are imported), 2 when none could be (nothing is written).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iofleet.errors import (
    EnvironmentProblem,
    OutputBusy,
    Problem,
    UsageError,
    ValidationFailed,
)
from iofleet.local.progress import Progress
from iofleet.quote import quote
from iofleet.results.outdir import OutClaim, claim_out_dir, remove_dead_temps

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
SLOT_PER = ("file", "dir")
ALL_CLIENTS = "All clients"
_FIO_DOCUMENT = re.compile(r'(?:^|(?<=\r))\{\s*"fio version"\s*:', re.MULTILINE)


@dataclass
class Piece:
    """One workload of one slot, from one file (or one host of a client file)."""

    path: Path
    kind: str  # fio | ioping
    name: str  # workload name: fio job names; "ioping"
    text: str  # the artifact written (the file verbatim, or one server's client document)
    host: str | None = None  # fio --client output: the server, hostname:port (a slot each)
    hostname: str | None = None  # that server's hostname alone (the slot's manifest)
    failed: str | None = None  # a fio job's error: the workload FAILED, as an agent says it
    fio_version: str | None = None
    started: datetime | None = None
    note: str | None = None  # a warning on the file, printed as `PATH: note`


@dataclass
class Slot:
    key: tuple[str, str | None]
    pieces: list[tuple[int, Piece]] = field(default_factory=list)  # (workload index, piece)


def _workload_name(jobnames: Sequence[str]) -> str:
    """The workload of a file's fio jobs: their names, sorted and joined by '+', when
    that is a safe file name part that tells the set apart; otherwise (a character
    outside A-Z a-z 0-9 . _ + -, a '+' inside a name, over 80 characters) its safe form
    and 8 hex digits of the names' SHA-256, so that distinct sets of jobs ('読み' and
    '書き', 'a b' and 'a_b', 'a+b' and the jobs a and b) are distinct workloads."""
    names = sorted(set(jobnames))
    joined = "+".join(names)
    safe = _NAME_UNSAFE.sub("_", joined).strip("_.")[:80] or "fio"
    if safe == joined and not any("+" in name for name in names):
        return safe
    digest = hashlib.sha256(json.dumps(names).encode()).hexdigest()[:8]
    return f"{safe[:71]}-{digest}"


def _fio_pieces(path: Path, text: str) -> list[Piece]:
    from iofleet.results.parsers import ParseError
    from iofleet.results.parsers.fio import _client_host, _decode, _global_options, parse_fio

    documents = len(_FIO_DOCUMENT.findall(text))
    if documents > 1:
        raise ValueError(
            f"holds {documents} fio JSON documents (fio --status-interval, or runs appended "
            "to one file); give one file per fio run, without --status-interval"
        )
    try:
        doc, _ = _decode(text)
    except ParseError as exc:
        raise ValueError(str(exc)) from None
    version = doc.get("fio version") if isinstance(doc.get("fio version"), str) else None
    stamp = doc.get("timestamp")
    started = (
        datetime.fromtimestamp(stamp, UTC)
        if isinstance(stamp, int | float) and not isinstance(stamp, bool) and stamp > 0
        else None
    )
    hostnames: dict[str | None, str] = {}
    if "jobs" not in doc and isinstance(doc.get("client_stats"), list):
        # one slot per server, as the parser names it (hostname:port: two servers on one
        # machine are two fio instances), each written as a client document of its own
        # entries, so that its rows keep their `host`
        hosts: dict[str | None, list[Any]] = {}
        for i, entry in enumerate(doc["client_stats"]):
            if not isinstance(entry, dict):
                raise ValueError(f"client_stats[{i}]: expected an object")
            if entry.get("jobname") == ALL_CLIENTS:
                continue
            try:
                server = _client_host(entry, str(entry.get("jobname")), f"client_stats[{i}]")
            except ParseError as exc:
                raise ValueError(str(exc)) from None
            hosts.setdefault(server, []).append(entry)
            hostnames.setdefault(server, entry["hostname"])
        if not hosts:
            raise ValueError("client_stats holds no per-host entries")
        # global options stay beside the jobs (the parser reads options from both): one
        # object, or with several servers one per server (client.c), that server's
        texts = {}
        for host, entries in hosts.items():
            piece: dict[str, Any] = {"fio version": version, "timestamp": stamp}
            options = _global_options(entries[0], doc)
            if options:
                piece["global options"] = options
            texts[host] = json.dumps({**piece, "client_stats": entries})
    else:
        texts = {None: text}
    pieces = []
    for host, piece_text in texts.items():
        try:
            out = parse_fio(piece_text)
        except ParseError as exc:
            raise ValueError(str(exc)) from None
        if not any(r.get("iops") is not None and (r.get("io_bytes") or 0) > 0 for r in out.records):
            where = f" (host {host})" if host else ""
            raise ValueError(f"fio output{where}: no job did any I/O")
        pieces.append(
            Piece(
                path=path,
                kind="fio",
                name=_workload_name([str(r["job"]) for r in out.records]),
                text=piece_text,
                host=host,
                hostname=hostnames.get(host),
                failed=_job_errors(out.records),
                fio_version=version,
                started=started,
            )
        )
    return pieces


def _job_errors(records: Sequence[Mapping[str, Any]]) -> str | None:
    """What an agent's slot.json says of fio jobs with an error (iofleet.agent.slot), for
    each job once; None when every job ran without one."""
    failed = {str(r["job"]): r["error"] for r in records if r.get("error")}
    return (
        "; ".join(f"fio job {quote(job)} reported error {e}" for job, e in failed.items()) or None
    )


def _ioping_piece(path: Path, text: str) -> Piece:
    from iofleet.results.parsers import ParseError
    from iofleet.results.parsers.ioping import no_timed_request, parse_ioping

    try:
        out = parse_ioping(text)
    except ParseError as exc:
        raise ValueError(f"ioping output: {exc}") from None
    if not out.requests:
        raise ValueError(f"ioping output: {no_timed_request(out)}")
    stamps = [r["ts"] for r in out.requests if isinstance(r.get("ts"), int | float)]
    started = datetime.fromtimestamp(min(stamps), UTC) if stamps else None
    return Piece(path=path, kind="ioping", name="ioping", text=text, started=started)


def read_pieces(path: Path) -> list[Piece]:
    """The workloads one file holds; ValueError with a one-line reason if it cannot be imported."""
    from iofleet.results.parsers import decode_text, detect_kind

    if path.is_dir():
        raise ValueError("is a directory (give the files)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    note = None
    try:
        text = decode_text(raw)  # UTF-8, or what a byte-order mark names (UTF-16, ...)
    except UnicodeDecodeError as exc:
        refused = f"not {exc.encoding.upper()} text (fio JSON or ioping -J output expected)"
        if exc.encoding != "utf-8":  # a byte-order mark named the encoding: it is wrong
            raise ValueError(refused) from None
        # fio and ioping print job names, file names and mount sources as the system
        # gives them (bytes): a Latin-1 name makes the output not UTF-8 inside a string.
        # Read like `iofleet local` and the ingest Lambda do (U+FFFD for each bad
        # sequence), and say so; a file that does not then parse keeps this reason.
        text = decode_text(raw, errors="replace")
        bad = text.count("\ufffd") - raw.count("\ufffd".encode())
        note = (
            f"not UTF-8 at byte offset {exc.start}: {bad} invalid sequence"
            f"{'s' if bad != 1 else ''} read as U+FFFD (a job, file or mount name in "
            "another encoding?)"
        )
    else:
        refused = ""
    if not text.strip():
        raise ValueError("empty file")
    kind = detect_kind(text)
    try:
        if kind == "app":
            raise ValueError(
                "an iofleet app timing file: not importable (fio or ioping output only)"
            )
        pieces = [_ioping_piece(path, text)] if kind == "ioping" else _fio_pieces(path, text)
    except ValueError:
        if note:
            raise ValueError(refused) from None
        raise
    for piece in pieces:
        piece.note = note
    return pieces


def _slot_key(piece: Piece, slot_per: str) -> tuple[str, str | None]:
    where = piece.path.resolve()
    return (str(where.parent if slot_per == "dir" else where), piece.host)


def plan_slots(
    paths: Sequence[Path], slot_per: str, read: Callable[[int], None] | None = None
) -> tuple[list[Slot], list[tuple[str, str]], list[Problem]]:
    """Slots with their pieces, the workloads [(kind, name)] by index, and the refused
    files. `read(n)` is called as the n-th file is read."""
    problems: list[Problem] = []
    workloads: list[tuple[str, str]] = []
    slots: dict[tuple[str, str | None], Slot] = {}
    seen: set[Path] = set()
    for number, path in enumerate(paths, 1):
        if read:
            read(number)
        if path.resolve() in seen:
            problems.append(Problem(str(path), "given twice"))
            continue
        seen.add(path.resolve())
        try:
            pieces = read_pieces(path)
        except ValueError as exc:
            problems.append(Problem(str(path), " ".join(str(exc).split())))
            continue
        clashes = []
        for piece in pieces:
            slot = slots.get(_slot_key(piece, slot_per))
            key = (piece.kind, piece.name)
            if slot and any((p.kind, p.name) == key for _, p in slot.pieces):
                other = next(p for _, p in slot.pieces if (p.kind, p.name) == key)
                clashes.append(f"its slot already has workload {piece.name} from {other.path}")
        if clashes:
            problems.append(Problem(str(path), clashes[0] + " (use --slot-per file)"))
            continue
        for piece in pieces:
            key = (piece.kind, piece.name)
            if key not in workloads:
                workloads.append(key)
            slot_key = _slot_key(piece, slot_per)
            slots.setdefault(slot_key, Slot(slot_key)).pieces.append((workloads.index(key), piece))
    return list(slots.values()), workloads, problems


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_json(path: Path, doc: object) -> None:
    _write(path, json.dumps(doc, indent=2, default=str) + "\n")


def write_run(
    tmp: Path, run_id: str, label: str, slots: list[Slot], workloads: list[tuple[str, str]]
) -> None:
    """The raw layout of one imported run under `tmp` (which becomes raw/RUN_ID)."""
    now = datetime.now(UTC)
    starts = [p.started for s in slots for _, p in s.pieces if p.started]
    from iofleet.local.finish import RunSummary  # a run's status from its failed slots

    summary = RunSummary(
        run_id,
        slots=len(slots),
        failed=[str(i) for i, s in enumerate(slots) if any(p.failed for _, p in s.pieces)],
    )
    started = min(starts) if starts else now
    cell_id = f"c000-{label}"
    n_files = len({p.path for s in slots for _, p in s.pieces})
    cell = {
        "cell_id": cell_id,
        "cell_index": 0,
        "instance_type": "imported",
        "storage_label": label,
        "storage_type": "imported",
        "storage_detail": f"imported from {n_files} file{'s' if n_files != 1 else ''}",
        "fleet_size": len(slots),
        "repeat": 1,
    }
    workload_docs = [
        {"kind": kind, "name": name} if kind == "fio" else {"kind": kind}
        for kind, name in workloads
    ]
    _write_json(
        tmp / "run.json",
        {
            "run_id": run_id,
            "mode": "import",
            "matrix_name": label,
            "description": f"iofleet import of {n_files} files",
            "started_at": _iso(started),
            "finished_at": _iso(now),
            "status": summary.status,  # as a local run's
            "total_instances": len(slots),
            "plan": {"cells": [cell], "total_instances": len(slots)},
            "imported": [
                {
                    "slot_index": i,
                    "workload_index": wi,
                    "file": str(p.path.resolve()),
                    "host": p.host,
                }
                for i, s in enumerate(slots)
                for wi, p in s.pieces
            ],
        },
    )
    for index, slot in enumerate(slots):
        slot_dir = tmp / cell_id / f"slot-{index:04d}"
        slot_starts = [p.started for _, p in slot.pieces if p.started]
        slot_started = _iso(min(slot_starts)) if slot_starts else _iso(started)
        versions = [p.fio_version for _, p in slot.pieces if p.fio_version]
        _write_json(
            slot_dir / "manifest.json",
            {
                "version": 1,
                "run_id": run_id,
                "slot_index": index,
                "cell": cell,
                "platform": "import",
                "started_at": slot_started,
                "hostname": next((p.hostname for _, p in slot.pieces if p.hostname), None),
                "fio_version": versions[0] if versions else None,
                "workloads": workload_docs,
                "source_files": sorted({str(p.path.resolve()) for _, p in slot.pieces}),
            },
        )
        entries = []
        failed = [p.failed for _, p in sorted(slot.pieces, key=lambda x: x[0]) if p.failed]
        for wi, piece in sorted(slot.pieces, key=lambda x: x[0]):
            if piece.kind == "fio":
                artifact = f"w{wi:02d}-fio-{piece.name}.json"
            else:
                artifact = f"w{wi:02d}-ioping.json"
            _write(slot_dir / artifact, piece.text)
            entries.append(
                {
                    "index": wi,
                    "kind": piece.kind,
                    "name": piece.name,
                    "status": "FAILED" if piece.failed else "SUCCEEDED",
                    "error": piece.failed,
                    "artifact": f"{cell_id}/slot-{index:04d}/{artifact}",
                    "source_file": str(piece.path.resolve()),
                }
            )
        _write_json(
            slot_dir / "slot.json",
            {
                "version": 1,
                "run_id": run_id,
                "cell_id": cell_id,
                "slot_index": index,
                "status": "FAILED" if failed else "SUCCEEDED",
                "exit_code": 1 if failed else 0,  # iofleet.agent.slot's EXIT_FAILED
                "error": failed[0] if failed else None,
                "started_at": slot_started,
                "finished_at": slot_started,
                "workloads": entries,
            },
        )


def new_import_run_id(label: str, now: datetime) -> str:
    return f"{label}-{now.strftime('%Y%m%dt%H%M%Sz').lower()}-{secrets.token_hex(3)}"


class _Reading:
    """`import: reading file N of M` on a terminal, redrawn at most every 0.1 s."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.total, self.shown = progress, total, 0.0

    def __call__(self, number: int) -> None:
        now = time.monotonic()
        if now - self.shown >= 0.1 or number == self.total:
            self.shown = now
            self.progress.line(f"import: reading file {number} of {self.total}", key="reading")


def import_command(
    files: Sequence[Path],
    out: Path,
    label: str,
    slot_per: str = "file",
    progress: Progress | None = None,
) -> int:
    """`progress`: the status line, used as given (the command line makes it quiet off a
    terminal, where stderr keeps only what was refused and why); none by default."""
    progress = progress or Progress(sys.stderr, quiet=True)
    if not LABEL_RE.match(label):
        raise ValidationFailed(
            [
                Problem(
                    "--label",
                    f"{quote(label)}: letters, digits, '.', '_' and '-' only, "
                    "starting with a letter or digit, at most 63 characters",
                )
            ]
        )
    if slot_per not in SLOT_PER:
        raise ValidationFailed([Problem("--slot-per", f"expected one of {', '.join(SLOT_PER)}")])
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    slots, workloads, problems = plan_slots(files, slot_per, _Reading(progress, len(files)))
    progress.clear()
    if not slots:
        raise ValidationFailed(problems or [Problem("FILES", "no file given")])
    for problem in problems:
        print(problem, file=sys.stderr)
    notes = {str(p.path): p.note for slot in slots for _, p in slot.pieces if p.note}
    for where, note in notes.items():
        print(f"{where}: {note}", file=sys.stderr)
    # one writer per --out: a second one exits 4; an import that does not land leaves
    # no --out, lock file or directory it made
    with claim_out_dir(out, "iofleet import") as claim:
        remove_dead_temps(out)  # what a killed writer of this --out left (outdir.py)
        try:
            run_id, warehouse, stats, errors = _import_locked(
                out, label, slots, workloads, progress, claim
            )
        finally:
            progress.clear()
    for e in errors:  # the parsers accepted every file above: a mismatch is a bug
        print(f"{out / 'raw' / e['object_key']}: {e['reason']}", file=sys.stderr)
    imported = len(files) - len(problems)
    print(
        f"imported {imported} of {len(files)} files as run {run_id}: {len(slots)} slots, "
        f"{len(workloads)} workloads -> {warehouse} ({stats})"
    )
    return 1 if problems or errors else 0


def _remove_run(run_dir: Path, tmp: Path) -> None:
    """Remove a run that did not land: out of raw/ in one step first, back to its temp
    name, so that a removal cut short (a SIGKILL after the first stop signal) leaves
    `.import-RUN/`, which the next writer of --out removes (outdir.remove_dead_temps),
    not part of a run in raw/, which the next ingest would load as if it were whole."""
    try:
        os.replace(run_dir, tmp)
    except FileNotFoundError:  # not renamed into raw/ yet
        pass
    shutil.rmtree(tmp, ignore_errors=True)


def _imported(warehouse: Path, run_id: str) -> bool:
    """Whether the warehouse holds `run_id` (its ingest committed)."""
    import duckdb

    try:
        with duckdb.connect(str(warehouse), read_only=True) as con:
            row = con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone()
    except duckdb.Error:  # no warehouse (or no runs table): nothing of it landed
        return False
    return bool(row and row[0])


def _lock_holder(exc: BaseException) -> str | None:
    """` (pid N)` when `exc` is DuckDB's refusal of a file another process holds open."""
    import duckdb

    from iofleet.report.cli import lock_holder

    return lock_holder(exc) if isinstance(exc, duckdb.Error) else None


def _import_locked(
    out: Path, label: str, slots: Any, workloads: Any, progress: Progress, claim: OutClaim
) -> tuple[str, Path, Any, list[dict[str, Any]]]:
    """Write the run into raw/ and ingest it. When it does not land, nothing of it is
    left, nor what this import made for it (`give_up`, then the claim on --out)."""
    from iofleet.results.warehouse import Warehouse

    run_id = new_import_run_id(label, datetime.now(UTC))
    raw = out / "raw"
    tmp = out / f".import-{run_id}"
    # made here, not between the rename below and the ingest's `try`: a signal handled
    # there (at the call of Path's `/`) would leave the run in raw/ and not in the tables
    warehouse = out / "warehouse.duckdb"
    raw_new, warehouse_new = not os.path.lexists(raw), not os.path.lexists(warehouse)

    def give_up() -> None:
        """The run did not land: remove what this import made for it, the warehouse (with
        DuckDB's write-ahead log) and raw/ (only when empty) when they were not there
        before (the claim, not kept, then removes the lock file and the --out it made)."""
        if warehouse_new:
            for path in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
                with contextlib.suppress(OSError):
                    path.unlink()
        if raw_new:
            with contextlib.suppress(OSError):
                raw.rmdir()

    try:
        progress.line(f"import: writing run {run_id} to {raw}")
        raw.mkdir(exist_ok=True)
        write_run(tmp, run_id, label, slots, workloads)
        os.replace(tmp, raw / run_id)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        give_up()
        raise EnvironmentProblem(f"--out {out}: cannot write: {exc.strerror or exc}") from None
    except KeyboardInterrupt as exc:  # before the run was in place: nothing imported
        _remove_run(raw / run_id, tmp)  # the rename may have happened
        give_up()
        exc.outcome = f"nothing imported, no file of it left in {out}"  # type: ignore[attr-defined]
        raise
    try:
        progress.line(f"import: loading it into {warehouse}")
        with Warehouse(warehouse) as wh:
            stats = wh.ingest_dir(raw)
            errors = wh.ingest_errors(run_id)
    except BaseException as exc:
        # A stop signal (iofleet.local.stopping.command_stops: it may reach here as
        # DuckDB's own "Query interrupted" RuntimeError), a full disk. The ingest is one
        # transaction: when it did not commit, the run is taken out of raw/ too, so that
        # the import did not happen at all (a later ingest of this --out would otherwise
        # bring it in). Whether it committed, the warehouse says.
        landed = claim.kept = _imported(warehouse, run_id)
        if not landed:
            _remove_run(raw / run_id, tmp)
            give_up()
        holder = _lock_holder(exc)
        if holder is not None and not landed:  # another process has it open: exit 4
            raise OutputBusy(
                f"--out {out}: warehouse.duckdb is in use by another process{holder}: "
                "nothing imported"
            ) from None
        exc.outcome = (  # type: ignore[attr-defined]
            f"run {run_id} was imported whole into {warehouse} before it"
            if landed
            else f"nothing imported, no row of it in {warehouse} and no file of it in {raw}"
        )
        raise
    claim.kept = True
    return run_id, warehouse, stats, errors
