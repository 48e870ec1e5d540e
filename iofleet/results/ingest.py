"""Raw artifact -> results table rows.

Shared by the local warehouse and the ingest Lambda, so stdlib only. One
entry point, `rows_for_artifact(relpath, text)`, maps one raw object (its path
in the raw layout of docs/internals.md, "/"-separated, and its text) to rows for
the tables of `iofleet.results.schema`; each row carries the run id `run_id_of`
gives that path, the id a loader replaces the run's rows by. It never raises for
bad content: an artifact that cannot be read becomes one `ingest_errors` row with
the reason. It is deterministic: the same artifact gives identical rows
(`ingest_errors.ingested_at` is left empty for the loader to fill).

Slots are described by two objects: `manifest.json` (written first: cell and
system info) and `slot.json` (written last: final status). Each gives a partial
`slots` row; `merge_slot_rows` folds them into one row per slot (values from
later rows win, so feed the manifest first).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from iofleet.agent.payload import CELL_FIELDS, SHA256_HEX
from iofleet.quote import quote
from iofleet.results.parsers import FIO_DOCUMENT
from iofleet.results.schema import (
    APP_RUNS,
    BY_NAME,
    CELL_COSTS,
    EXPECTATIONS,
    FIO_LATENCY_HISTOGRAMS,
    FIO_RESULTS,
    INGEST_ERRORS,
    IOPING_REQUESTS,
    RUNS,
    SLOTS,
    Table,
    value_problem,
)

Rows = dict[str, list[dict[str, object]]]

_SEG = r"[^/]+"
_RUN_RE = re.compile(rf"^(?P<run>{_SEG})/run\.json$")
_SLOT_DIR = rf"^(?P<run>{_SEG})/(?P<cell>{_SEG})/slot-(?P<slot>\d+)/"
_MANIFEST_RE = re.compile(_SLOT_DIR + r"manifest\.json$")
_SLOT_RE = re.compile(_SLOT_DIR + r"slot\.json$")
_FIO_RE = re.compile(_SLOT_DIR + r"w(?P<wi>\d+)-fio-(?P<name>[^/]+)\.json$")
_IOPING_RE = re.compile(_SLOT_DIR + r"w(?P<wi>\d+)-ioping\.json$")
_DRAIN_RE = re.compile(_SLOT_DIR + r"w(?P<wi>\d+)-drain\.json$")
# output the agent voided (iofleet.agent.slot.VOID_PREFIX): its workload is FAILED because
# its figures are not about the target, whatever the tool reported
_VOID_RE = re.compile(_SLOT_DIR + r"void-w(?P<wi>\d+)-(?P<tool>fio|ioping)\b[^/]*\.json$")
_APP_RE = re.compile(
    rf"^(?P<run>{_SEG})/(?P<cell>{_SEG})/(?:slot-(?P<slot>\d+)|populate)/"
    r"w(?P<wi>\d+)-app-(?P<name>[^/]+)\.json$"
)


class _Bad(Exception):
    """Content problem inside this module; becomes an ingest_errors row."""


def artifact_kind(relpath: str) -> str | None:
    """run | manifest | slot | fio | ioping | app | drain | void, or None if not an artifact
    path."""
    for kind, pattern in (
        ("run", _RUN_RE),
        ("manifest", _MANIFEST_RE),
        ("slot", _SLOT_RE),
        ("fio", _FIO_RE),
        ("ioping", _IOPING_RE),
        ("app", _APP_RE),
        ("drain", _DRAIN_RE),
        ("void", _VOID_RE),
    ):
        if pattern.match(relpath):
            return kind
    return None


def rows_for_artifact(relpath: str, text: str) -> Rows:
    """Rows (table name -> rows) for one raw artifact; never raises for bad content."""
    rows, blocks = rows_and_bin_blocks(relpath, text)
    if blocks is not None:
        rows[FIO_LATENCY_HISTOGRAMS.name] = histogram_rows(blocks)
    return rows


class BinBlock(NamedTuple):
    """The json+ histogram of one fio record: one `fio_latency_histograms` row.

    `key` holds the values of BIN_BLOCK_COLUMNS; `bins` the (bin_ns, count) pairs
    sorted by bin_ns (from the fio parser: a `Bins`, which also holds them as two
    columns, the row's `bins_ns` and `counts`). A fio json+ artifact has hundreds of
    bins per record: a loader can write them without building a dict per bin.
    """

    key: tuple[object, ...]
    bins: Sequence[tuple[int, int]]


def bin_columns(bins: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """A block's bin values and counts as two lists (no copy for the parser's `Bins`)."""
    values = getattr(bins, "values", None)
    counts = getattr(bins, "counts", None)
    if isinstance(values, list) and isinstance(counts, list):
        return values, counts
    return [value for value, _ in bins], [count for _, count in bins]


# the fio_latency_histograms columns before (bins_ns, counts), in table order (also the
# fio_latency_bins view's columns before (bin_ns, count))
BIN_BLOCK_COLUMNS = (
    "run_id",
    "cell_id",
    "slot_index",
    "workload_index",
    "workload",
    "job",
    "job_index",
    "direction",
)


def histogram_rows(blocks: Iterable[BinBlock]) -> list[dict[str, object]]:
    """The `fio_latency_histograms` rows of some blocks (blocks without bins give none),
    as `rows_for_artifact` gives them."""
    rows: list[dict[str, object]] = []
    for block in blocks:
        if not block.bins:
            continue
        values, counts = bin_columns(block.bins)
        row = dict(zip(BIN_BLOCK_COLUMNS, block.key, strict=True))
        row["bins_ns"], row["counts"] = list(values), list(counts)
        rows.append(row)
    return rows


def fold_bin_rows(rows: Iterable[Mapping[str, object]]) -> list[dict[str, object]]:
    """Rows of the per-bin shape (`fio_latency_bins`: the key, `bin_ns`, `count`) as
    `fio_latency_histograms` rows: one per key, bins ascending, a bin listed twice added
    up (the views sum them alike). For rows made bin by bin (tests, planted data)."""
    folded: dict[tuple[object, ...], dict[int, int]] = {}
    for row in rows:
        key = tuple(row[c] for c in BIN_BLOCK_COLUMNS)
        bins = folded.setdefault(key, {})
        value, count = row["bin_ns"], row["count"]
        assert isinstance(value, int) and isinstance(count, int)
        bins[value] = bins.get(value, 0) + count
    return histogram_rows(BinBlock(key, sorted(bins.items())) for key, bins in folded.items())


def expand_bin_blocks(blocks: Iterable[BinBlock]) -> list[dict[str, object]]:
    """The rows the `fio_latency_bins` view gives for some blocks, one per bin."""
    rows: list[dict[str, object]] = []
    for block in blocks:
        shared = dict(zip(BIN_BLOCK_COLUMNS, block.key, strict=True))
        rows += ({**shared, "bin_ns": value, "count": count} for value, count in block.bins)
    return rows


def rows_and_bin_blocks(relpath: str, text: str) -> tuple[Rows, list[BinBlock] | None]:
    """`rows_for_artifact` with a fio artifact's bins left as blocks (None for other kinds).

    For a fio artifact the rows hold `fio_results` only and the blocks are its
    `fio_latency_histograms`; everything else (errors included) is as `rows_for_artifact`.
    """
    run_id = run_id_of(relpath)
    kind = artifact_kind(relpath)
    try:
        if kind is None:
            raise _Bad("not a known artifact path (see the raw layout in docs/internals.md)")
        if kind == "fio":
            results, blocks = _fio(relpath, text)
            return {FIO_RESULTS.name: results}, blocks
        rows = _HANDLERS[kind](relpath, text)
        _check_rows(rows)
        return rows, None
    except _Bad as exc:
        return {INGEST_ERRORS.name: [error_row(run_id, relpath, str(exc))]}, None
    except Exception as exc:  # noqa: BLE001 - a parser bug must not stop an ingest
        reason = f"{kind} artifact: unexpected {type(exc).__name__}: {exc}"
        return {INGEST_ERRORS.name: [error_row(run_id, relpath, reason)]}, None


def run_id_of(relpath: str) -> str:
    """The run id every row of a raw object carries: the first segment of its path (split
    at "/" only: a backslash is part of a name, as on Linux and in S3 keys), with what
    no string column can hold escaped (`loadable_text`). An artifact whose id needs
    escaping has no rows but its `ingest_errors` row, which holds the escaped id; any
    other gets the segment as is, so a loader deletes a run's rows by this id."""
    return loadable_text(relpath.split("/", 1)[0])


def error_row(run_id: str, object_key: str, reason: str) -> dict[str, object]:
    """The `ingest_errors` row of an object; always loadable (strings made valid UTF-8)."""
    one_line = " ".join(str(reason).split())
    return INGEST_ERRORS.row(
        run_id=loadable_text(run_id), object_key=loadable_text(object_key), reason=one_line
    )


def loadable_text(text: str) -> str:
    """`text` with what no string column can hold (lone surrogates, e.g. from a file name
    that is not UTF-8) written as backslash escapes; valid text is returned as is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _check_rows(rows: Rows) -> None:
    """Every value fits its column (schema.value_problem), else the artifact is refused.

    An artifact loads whole or not at all: one value out of range (an integer beyond
    int64, a NaN, a lone surrogate) makes it one ingest_errors row naming the field,
    and costs no other artifact its rows (in DuckDB or in Athena).
    """
    for name, table_rows in rows.items():
        table = BY_NAME[name]
        for row in table_rows:
            problem = table.row_problem(row)
            if problem:
                raise _Bad(f"{name}.{problem}")


def merge_slot_rows(rows: Iterable[Mapping[str, object]]) -> list[dict[str, object]]:
    """One `slots` row per (run_id, cell_id, slot_index): later non-null values win."""
    merged: dict[tuple[object, ...], dict[str, object]] = {}
    for row in rows:
        key = (row["run_id"], row["cell_id"], row["slot_index"])
        into = merged.setdefault(key, SLOTS.row())
        for name, value in row.items():
            if value is not None:
                into[name] = value
    return list(merged.values())


# --- handlers ---------------------------------------------------------------


def _load_json_object(text: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise _Bad(f"{what}: not valid JSON: {exc}") from None
    except RecursionError:
        raise _Bad(f"{what}: not valid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise _Bad(f"{what}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _run(relpath: str, text: str) -> Rows:
    m = _RUN_RE.match(relpath)
    assert m
    run_id = m["run"]
    doc = _load_json_object(text, "run.json")
    if doc.get("run_id") not in (None, run_id):
        raise _Bad(
            f"run.json: run_id {quote(doc.get('run_id'))} does not match its folder {quote(run_id)}"
        )
    matrix = _dict(doc.get("matrix"))
    plan = _dict(doc.get("plan"))
    total = doc.get("total_instances", plan.get("total_instances"))
    row = RUNS.row(
        run_id=run_id,
        matrix_name=_str(doc.get("matrix_name", matrix.get("name"))),
        description=_str(doc.get("description", matrix.get("description"))),
        mode=_str(doc.get("mode")),
        status=_str(doc.get("status")),
        started_at=_ts(doc.get("started_at")),
        finished_at=_ts(doc.get("finished_at")),
        total_instances=_int(total),
        matrix_json=json.dumps(matrix, sort_keys=True) if matrix else None,
    )
    return {
        RUNS.name: [row],
        EXPECTATIONS.name: _expectation_rows(run_id, plan),
        CELL_COSTS.name: _cost_rows(run_id, plan),
    }


def _cost_rows(run_id: str, plan: Mapping[str, Any]) -> list[dict[str, object]]:
    """The plan's per-cell cost estimate (iofleet/plan/cost.py plan_annotations) as rows."""
    rows = []
    cells = plan.get("cells")
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_id"), str):
            continue
        usd = _float(cell.get("estimated_cost_usd"))
        if usd is None:
            continue
        cost = _dict(cell.get("cost"))
        items = cost.get("items")
        hourly = None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and str(item.get("item", "")).startswith("ec2 "):
                hourly = _float(item.get("unit_usd"))
        complete = cost.get("complete")
        rows.append(
            CELL_COSTS.row(
                run_id=run_id,
                cell_id=cell["cell_id"],
                estimated_cost_usd=usd,
                slot_seconds=_float(cell.get("slot_seconds")),
                instance_hour_usd=hourly,
                cost_complete=complete if isinstance(complete, bool) else None,
            )
        )
    return rows


def _expectation_rows(run_id: str, plan: Mapping[str, Any]) -> list[dict[str, object]]:
    """The plan's per-cell `expected` entries (docs/expectations.md) as rows."""
    rows = []
    cells = plan.get("cells")
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_id"), str):
            continue
        entries = cell.get("expected")
        for e in entries if isinstance(entries, list) else []:
            if not isinstance(e, dict):
                continue
            upper = e.get("upper_bound")
            rows.append(
                EXPECTATIONS.row(
                    run_id=run_id,
                    cell_id=cell["cell_id"],
                    workload_index=_int(e.get("workload_index")),
                    workload=_str(e.get("workload")),
                    job=_str(e.get("job")),
                    direction=_str(e.get("direction")),
                    block_size=_int(e.get("block_size")),
                    expected_iops=_float(e.get("expected_iops")),
                    expected_bw_bytes=_int(e.get("expected_bw_bytes")),
                    limited_by=_str(e.get("limited_by")),
                    upper_bound=upper if isinstance(upper, bool) else None,
                    seconds_to_exhaust=_float(e.get("seconds_to_exhaust")),
                    burst_source=_str(e.get("burst_source")),
                    runtime_s=_float(e.get("runtime_s")),
                    burst_policy=_str(e.get("burst_policy")),
                )
            )
    return rows


_SYSTEM_FIELDS = (
    "iofleet_version",
    "hostname",
    "kernel",
    "fio_version",
    "ioping_version",
    "cpus",
    "memory_bytes",
    "instance_id",
    "az_id",
    "distro",
    "distro_release",
)
# slots column -> key inside a nested "target" object (the agent writes the
# columns' names at the top level; see docs/internals.md)
_TARGET_FIELDS = {
    "target_path": "path",
    "target_fstype": "fstype",
    "target_device": "device",
    "mount_options": "mount_options",
}
_CELL_FIELDS = tuple(f for f in CELL_FIELDS if f != "cell_id")  # cell_id: from the path


def _slot_identity(pattern: re.Pattern[str], relpath: str) -> dict[str, object]:
    m = pattern.match(relpath)
    assert m
    return {"run_id": m["run"], "cell_id": m["cell"], "slot_index": int(m["slot"])}


def _first(docs: Iterable[Mapping[str, Any]], *names: str) -> Any:
    for doc in docs:
        for name in names:
            value = doc.get(name)
            if value not in (None, ""):
                return value
    return None


def _manifest(relpath: str, text: str) -> Rows:
    ident = _slot_identity(_MANIFEST_RE, relpath)
    doc = _load_json_object(text, "manifest.json")
    cell = _dict(doc.get("cell"))
    system = _dict(doc.get("system"))
    target = _dict(doc.get("target"))
    ec2 = _dict(doc.get("ec2")) or _dict(doc.get("aws"))
    places = (system, ec2, doc)
    values: dict[str, object] = dict(ident)
    for name in _CELL_FIELDS:
        value = cell.get(name, doc.get(name))
        values[name] = _str(value) if name.startswith(("instance", "storage")) else _int(value)
    if values.get("instance_type") is None:
        values["instance_type"] = _str(_first(places, "instance_type"))
    for name in _SYSTEM_FIELDS:
        value = _first(places, name)
        values[name] = _int(value) if name in ("cpus", "memory_bytes") else _str(value)
    for column, key in _TARGET_FIELDS.items():
        values[column] = _str(_first((doc,), column) or _first((target,), key))
    values["volume_id"] = _str(_first((doc,), "target_volume_id") or _first((target,), "volume_id"))
    values["started_at"] = _ts(doc.get("started_at"))
    values.update(_clock_values(doc.get("clock")))
    values["fio_jobs"] = fio_jobs_text(doc.get("workloads"))
    return {SLOTS.name: [SLOTS.row(**values)]}


JOB_DIGEST_CHARS = 16


def fio_jobs_text(workloads: object) -> str | None:
    """slots.fio_jobs from a manifest's workloads: `w00=<16 hex>,...` for each fio
    workload the plan gave a job_sha256 (docs/decisions.md #95); None without any."""
    parts = []
    for index, w in enumerate(_list(workloads)):
        if not isinstance(w, dict) or w.get("kind") != "fio":
            continue
        digest = w.get("job_sha256")
        if isinstance(digest, str) and SHA256_HEX.fullmatch(digest):
            parts.append(f"w{index:02d}={digest[:JOB_DIGEST_CHARS]}")
    return ",".join(parts) or None


def fio_job_text(fio_jobs: object, workload_index: int) -> str | None:
    """The digest prefix `fio_jobs_text` recorded for fio workload `workload_index`."""
    tag = f"w{workload_index:02d}="
    for part in str(fio_jobs or "").split(","):
        if part.startswith(tag):
            return part[len(tag) :]
    return None


def _clock_values(clock: object) -> dict[str, object]:
    """slots.clock_* from a manifest's or slot.json's `clock` (the kernel's adjtimex view)."""
    doc = _dict(clock)
    synced = doc.get("synced")
    return {
        "clock_synced": synced if isinstance(synced, bool) else None,
        "clock_max_error_us": _int(doc.get("max_error_us")),
        "clock_est_error_us": _int(doc.get("est_error_us")),
    }


def _barrier_values(doc: Mapping[str, Any]) -> dict[str, object]:
    """slots.barrier_* from slot.json: the agreed instant, this slot's pass, its lateness."""
    late = _float(doc.get("barrier_late_s"))
    late_us = late * 1e6 if late is not None and late >= 0 else None
    return {
        "barrier_released_at": _ts(doc.get("barrier_released_at")),
        "barrier_passed_at": _ts(doc.get("barrier_passed_at")),
        "barrier_passed_us": _epoch_us(doc.get("barrier_passed_at")),
        "barrier_late_us": round(late_us)
        if late_us is not None and math.isfinite(late_us)
        else None,
    }


def _slot(relpath: str, text: str) -> Rows:
    ident = _slot_identity(_SLOT_RE, relpath)
    doc = _load_json_object(text, "slot.json")
    status = _str(doc.get("status"))
    error = _str(doc.get("error"))
    failed = [
        w
        for w in _list(doc.get("workloads"))
        if isinstance(w, dict) and str(w.get("status", "")).upper() not in ("SUCCEEDED", "")
    ]
    reasons = [
        f"w{_int(w.get('index')) or 0:02d} {w.get('kind', '')} {w.get('name', '')}: "
        f"{w.get('error') or w.get('status')}".replace("  ", " ")
        for w in failed
    ]
    if error is None:
        error = "; ".join(reasons) or None
    elif len(reasons) > 1 and " workloads did not succeed; first: " in error:
        # the agent's summary names the first failed workload only: add the others
        error += "; then " + "; ".join(reasons[1:])
    row = SLOTS.row(
        **ident,
        status=status.upper() if status else None,
        exit_code=_int(doc.get("exit_code")),
        error=" ".join(error.split()) if error else None,
        started_at=_ts(doc.get("started_at")),
        finished_at=_ts(doc.get("finished_at")),
        **_barrier_values(doc),
        **_clock_values(doc.get("clock")),  # read when the slot passed the barrier
    )
    return {SLOTS.name: [row]}


_EMPTY_FIO_ROW = FIO_RESULTS.row()


# What fio prints on stdout, before its figures, when SIGTERM or SIGINT ends its run
# ("fio: terminating on signal %d"); it then prints the figures of the part it ran,
# with every job's error 0, and exits 128 (SIGHUP kills it: no figures)
_FIO_TERMINATED = re.compile(r"^fio: terminating on signal (\d+)", re.MULTILINE)


def _fio(relpath: str, text: str) -> tuple[list[dict[str, object]], list[BinBlock]]:
    from iofleet.results.parsers import ParseError
    from iofleet.results.parsers.fio import parse_fio

    m = _FIO_RE.match(relpath)
    assert m
    # fio prints it before its figures: in the text before its JSON document (not before
    # the first "{", which may be a job name's in fio's normal report: "x{1}: (g=0)")
    doc = FIO_DOCUMENT.search(text)
    cut = _FIO_TERMINATED.search(text, 0, doc.start() if doc else len(text))
    if cut:  # a shortened run's figures are not the workload's: not beside full runs
        raise _Bad(
            f"fio was stopped by signal {cut[1]} before its run ended (the slot's time "
            "limit, or a signal from outside): its figures cover part of the run and are "
            "not loaded; the output is kept as it was"
        )
    key = {
        "run_id": m["run"],
        "cell_id": m["cell"],
        "slot_index": int(m["slot"]),
        "workload_index": int(m["wi"]),
        "workload": m["name"],
    }
    try:
        out = parse_fio(text)
    except ParseError as exc:
        raise _Bad(f"fio output: {exc}") from None
    # The parser has checked every figure against its column (parse_fio's
    # _check_columns: records and bins, the same types as both tables); what is left
    # is the key from the path, the same for every row and every bin: checked once,
    # with the message _check_rows would give for the first row.
    if out.records:
        for col in FIO_RESULTS.columns[: len(key)]:
            problem = value_problem(col.type, key[col.name])
            if problem:
                raise _Bad(f"{FIO_RESULTS.name}.{col.name}: {problem}")
    # the parser's records hold typed values (int, finite float, str, None) for
    # columns of this table only: a row is the key, the record, None elsewhere
    # where each job lies in time (fleet_totals): fio's end of the run, the job's group
    # and (fio 3.36 and later) the job's own start
    results = [
        {
            **_EMPTY_FIO_ROW,
            **key,
            **rec,
            "groupid": out.groups.get(rec["job_index"]),
            "fio_ended_ms": out.ended_ms,
            "fio_started_ms": out.started_ms.get(rec["job_index"]),
        }
        for rec in out.records
    ]
    # bins are the bulk of the rows (hundreds per job and direction): one block per
    # record, straight from the parser's histograms ((bin_ns, count) sorted by bin_ns)
    prefix = tuple(key.values())
    blocks = [
        BinBlock((*prefix, job, job_index, direction), hist)
        for job, job_index, direction, hist in out.histograms
    ]
    return results, blocks


def _ioping(relpath: str, text: str) -> Rows:
    from iofleet.results.parsers import ParseError
    from iofleet.results.parsers.ioping import no_timed_request, parse_ioping

    m = _IOPING_RE.match(relpath)
    assert m
    key = {
        "run_id": m["run"],
        "cell_id": m["cell"],
        "slot_index": int(m["slot"]),
        "workload_index": int(m["wi"]),
    }
    try:
        out = parse_ioping(text)
    except ParseError as exc:
        raise _Bad(f"ioping output: {exc}") from None
    if not out.requests:  # `ioping -c 1`: its one request is the untimed warm-up
        raise _Bad(f"ioping output: {no_timed_request(out)}")
    return {IOPING_REQUESTS.name: [_table_row(IOPING_REQUESTS, key, r) for r in out.requests]}


def _app(relpath: str, text: str) -> Rows:
    from iofleet.results.parsers import ParseError
    from iofleet.results.parsers.app import parse_app

    m = _APP_RE.match(relpath)
    assert m
    try:
        doc = parse_app(text)
    except ParseError as exc:
        raise _Bad(f"app timing: {exc}") from None
    phase = doc.get("phase") or ("run" if m["slot"] is not None else "populate")
    row = APP_RUNS.row(
        run_id=m["run"],
        cell_id=m["cell"],
        slot_index=int(m["slot"]) if m["slot"] is not None else None,
        workload_index=int(m["wi"]),
        app=_str(doc.get("app")) or m["name"],
        phase=_str(phase),
        exit_code=_int(doc.get("exit_code")),
        wall_seconds=_float(doc.get("wall_seconds")),
        started_at=_ts(doc.get("started_at")),
        finished_at=_ts(doc.get("finished_at")),
    )
    return {APP_RUNS.name: [row]}


def _void(relpath: str, text: str) -> Rows:
    """Output the agent voided: kept raw, one ingest_errors row, no rows of its figures."""
    m = _VOID_RE.match(relpath)
    assert m
    raise _Bad(
        f"{m['tool']} output of workload {int(m['wi'])} voided by its agent: the workload is "
        "FAILED because these figures are not about the target (slot.json says why); "
        "kept raw, not loaded"
    )


def _drain(relpath: str, text: str) -> Rows:
    """A burst_policy drain phase: fio output kept raw, counted in no results table."""
    return {}


_HANDLERS = {  # fio: rows_and_bin_blocks calls _fio itself
    "drain": _drain,
    "void": _void,
    "run": _run,
    "manifest": _manifest,
    "slot": _slot,
    "ioping": _ioping,
    "app": _app,
}


# --- value normalisation ------------------------------------------------------

_INT_TYPES = ("int", "bigint")


def _table_row(table: Table, key: Mapping[str, object], record: Mapping[str, Any]) -> dict:
    values: dict[str, object] = dict(key)
    for col in table.columns:
        if col.name in values or col.name not in record:
            continue
        value = record[col.name]
        if col.type in _INT_TYPES:
            values[col.name] = _int(value)
        elif col.type == "double":
            values[col.name] = _float(value)
        elif col.type == "timestamp":
            values[col.name] = _ts(value)
        else:
            values[col.name] = _str(value)
    return table.row(**values)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _float(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond double
        return None
    return number if math.isfinite(number) else None


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = _float(value)
    return round(number) if number is not None else None


def _epoch_us(value: object) -> int | None:
    """An ISO-8601 instant (a string, as the agent writes it) as exact microseconds since
    the Unix epoch, else None."""
    if not isinstance(value, str) or _ts(value) is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        if when.tzinfo is not None:
            when = when.astimezone(UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        return None
    return (when - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def _ts(value: object) -> str | None:
    """A UTC timestamp as 'YYYY-MM-DD HH:MM:SS.ffffff' (Hive/DuckDB friendly), else None."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            when = datetime.fromtimestamp(float(value), tz=UTC)
        else:
            when = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
            if when.tzinfo is not None:
                when = when.astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None
    # isoformat pads the year to four digits (strftime's %Y does not, below 1000)
    return when.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
