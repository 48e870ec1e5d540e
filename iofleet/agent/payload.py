"""Slot payload (docs/internals.md): validated into plain dataclasses.

Problems are collected and reported on one line as `PATH: message; ...`.
Keys the agent does not use are ignored (the payload also carries fields for
other consumers, e.g. an app workload's `populate`).

Stdlib only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from iofleet.errors import UsageError
from iofleet.quote import quote

# Full-string matches only (`$` would let a trailing newline through into paths, S3 keys
# and command lines).
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")
WORKLOAD_KINDS = ("fio", "ioping", "app")
BURST_POLICIES = ("as-is", "refill", "drain")
_FIO_SIZE = re.compile(r"[0-9]{1,15}[kKmMgGtT]?\Z")
_IOPING_SIZE = re.compile(r"[0-9]{1,15}[kKmMgG]?\Z")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
# a job text's digest as the plan records it (plan.fiojobs.JobFile.text_sha256)
SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")
# fio parameter values reach fio's environment; iofleet.plan.fiojobs checks their types
_PARAM_VALUE = re.compile(r"[A-Za-z0-9._:,+-]{1,64}\Z")
# `mount -o` options: comma-separated words, maybe with =values
_MOUNT_OPTIONS = re.compile(r"[A-Za-z0-9_.=:,+-]{1,256}\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
PLATFORMS = ("local", "aws")
DEFAULT_TIME_LIMIT_S = 3600.0
# A slot's time limit (the matrix's slot_timeout_s): a week. The AWS side adds a boot
# margin for the Step Functions task timeout (a standard execution lasts at most a year)
# and an expiry tag (iofleet.aws.launch); longer is a mistake, not a benchmark.
MAX_SLOT_TIMEOUT_S = 7 * 24 * 3600
# Upper bounds of the other values: what the plan can produce, with room to spare.
MAX_TIME_LIMIT_S = float(MAX_SLOT_TIMEOUT_S)
MAX_WAIT_S = 24 * 3600.0
MAX_SLOTS = 100_000
MAX_INT = 2**63 - 1


# A refusal names at most this many problems, then counts the rest: it stays one short
# line (5,000 bad workloads made a line of 300 KB)
MAX_PROBLEMS = 10
# JSON integer literals longer than this are refused when the payload is read (Python's
# int() refuses past 4,300 digits with a ValueError: an "internal error" before)
MAX_INT_DIGITS = 40


def parse_int(text: str) -> int:
    """json.loads' parse_int for payloads: a literal of more than MAX_INT_DIGITS digits is
    a PayloadError (no field of a payload holds one)."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise PayloadError(f"invalid JSON: a {digits}-digit integer (at most {MAX_INT_DIGITS})")
    return int(text)


class PayloadError(UsageError):
    """A slot payload that cannot be run; the message is one line."""


@dataclass(frozen=True)
class Workload:
    index: int
    kind: str  # fio | ioping | app
    name: str  # fio job, "ioping", or the app name
    params: dict[str, str] = field(default_factory=dict)  # fio
    job_sha256: str | None = None  # fio: the job's text as planned (the agent checks it)
    count: int = 0  # ioping
    interval_ms: float = 0.0
    write: bool = False
    size: str | None = None
    direct: bool = False
    run: str = ""  # app
    populate: str | None = None


@dataclass(frozen=True)
class BurstAction:
    """Before fio workload `workload_index`: wait (`refill`) or run a drain phase."""

    workload_index: int
    action: str  # refill | drain
    seconds: float
    rw: str = "randwrite"  # drain only: the fio I/O that empties the bucket
    bs: str = "16k"
    iodepth: int = 32
    size: str = "1g"  # drain on a filesystem target: the scratch file's size


@dataclass(frozen=True)
class Burst:
    policy: str = "as-is"
    actions: tuple[BurstAction, ...] = ()

    def before(self, workload_index: int) -> BurstAction | None:
        for action in self.actions:
            if action.workload_index == workload_index:
                return action
        return None


@dataclass(frozen=True)
class Target:
    kind: str  # directory | block
    path: str | None = None  # directory
    volume_id: str | None = None  # block
    filesystem: str | None = None
    created_by_run: bool = False
    mount_point: str | None = None
    mount_options: str | None = None
    by_id_dir: str | None = None
    attach_wait_s: float = 120.0


# The slot payload's "cell" object: the cell's identity, written by the plan (local) or
# the launcher (AWS), copied into manifest.json, read back by ingest into `slots`.
CELL_FIELDS = (
    "cell_id",
    "cell_index",
    "instance_type",
    "storage_label",
    "storage_type",
    "storage_detail",
    "fleet_size",
    "repeat",
)


@dataclass(frozen=True)
class SlotPayload:
    run_id: str
    cell: dict[str, Any]
    cell_id: str
    slot_index: int
    target: Target
    workloads: list[Workload]
    barrier: dict[str, Any] | None
    results: dict[str, Any]
    time_limit_s: float
    platform: str
    raw: dict[str, Any]
    burst: Burst = field(default_factory=Burst)

    @property
    def fleet_size(self) -> int:
        size = self.cell.get("fleet_size")
        return size if isinstance(size, int) and not isinstance(size, bool) else 1

    @property
    def slot_prefix(self) -> str:
        return f"{self.run_id}/{self.cell_id}/slot-{self.slot_index:04d}"

    @property
    def populate_prefix(self) -> str:
        return f"{self.run_id}/{self.cell_id}/populate"


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def string(
        self, doc: dict, key: str, path: str, *, required: bool = True, multiline: bool = False
    ) -> str | None:
        value = doc.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            self.add(f"{path}{key}", "required, a non-empty string")
            return None
        problem = _text_problem(value, multiline)
        if problem:
            self.add(f"{path}{key}", problem)
            return None
        return value

    def identifier(self, doc: dict, key: str, path: str) -> str | None:
        value = self.string(doc, key, path)
        if value is not None and not SAFE_ID.match(value):
            self.add(f"{path}{key}", "1-200 letters, digits and . _ - only")
            return None
        return value

    def integer(
        self,
        doc: dict,
        key: str,
        path: str,
        minimum: int,
        default: int | None = None,
        maximum: int = MAX_INT,
    ) -> int:
        value = doc.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            self.add(f"{path}{key}", f"must be an integer from {minimum} to {maximum}")
            return minimum
        return value

    def number(
        self,
        doc: dict,
        key: str,
        path: str,
        default: float,
        *,
        positive: bool = False,
        maximum: float = MAX_WAIT_S,
    ) -> float:
        value = doc.get(key, default)
        bad = isinstance(value, bool) or not isinstance(value, int | float)
        if (
            bad
            or not math.isfinite(value)
            or not 0 <= value <= maximum
            or (positive and value == 0)
        ):
            low = "positive number" if positive else "number from 0"
            self.add(f"{path}{key}", f"must be a {low} up to {maximum:g}")
            return default
        return float(value)

    def boolean(self, doc: dict, key: str, path: str, default: bool) -> bool:
        value = doc.get(key, default)
        if not isinstance(value, bool):
            self.add(f"{path}{key}", "must be true or false")
            return default
        return value


def _text_problem(value: str, multiline: bool = False) -> str | None:
    """Strings reach paths, command lines and JSON files: no control characters (a
    multi-line shell script may hold newlines and tabs), valid Unicode."""
    bad = _CONTROL.search(value.replace("\n", "").replace("\t", "") if multiline else value)
    if bad:
        return f"contains a control character ({bad.group()!r})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid Unicode (lone surrogate)"
    return None


def _absolute(check: _Checker, value: str | None, path: str) -> None:
    if value is not None and (not value.startswith("/") or "/../" in f"{value}/"):
        check.add(path, "must be an absolute path without '..'")


def _workload(check: _Checker, index: int, doc: object) -> Workload | None:
    path = f"workloads[{index}]."
    if not isinstance(doc, dict):
        check.add(f"workloads[{index}]", "must be an object")
        return None
    kind = doc.get("kind")
    if kind not in WORKLOAD_KINDS:
        check.add(f"{path}kind", f"must be one of {', '.join(WORKLOAD_KINDS)}, got {quote(kind)}")
        return None
    if kind == "fio":
        name = check.identifier(doc, "name", path) or "?"
        params = doc.get("params") or {}
        if not isinstance(params, dict):
            check.add(f"{path}params", "must be an object")
            params = {}
        clean = {}
        for key, value in params.items():
            if not isinstance(key, str) or not _PARAM_NAME.match(key):
                check.add(f"{path}params", f"parameter name {quote(key)} must be a plain name")
            elif isinstance(value, bool) or not isinstance(value, str | int | float):
                check.add(f"{path}params.{key}", "must be a string or a number")
            elif isinstance(value, float) and not math.isfinite(value):
                check.add(f"{path}params.{key}", "must be a finite number")
            elif not _PARAM_VALUE.match(str(value)) or ".." in str(value):
                check.add(
                    f"{path}params.{key}",
                    f"{quote(str(value))} is not a plain token (letters, digits and . _ : , + -)",
                )
            else:
                clean[str(key)] = str(value)
        digest = doc.get("job_sha256")
        if digest is not None and not (isinstance(digest, str) and SHA256_HEX.fullmatch(digest)):
            check.add(f"{path}job_sha256", "must be 64 lowercase hex digits (a sha256) or null")
            digest = None
        return Workload(index, "fio", name, params=clean, job_sha256=digest)
    if kind == "ioping":
        size = check.string(doc, "size", path, required=False)
        if size is not None and not _IOPING_SIZE.match(size):
            check.add(f"{path}size", "an ioping size like 4k or 1m")
        return Workload(
            index,
            "ioping",
            "ioping",
            count=check.integer(doc, "count", path, 1, maximum=1_000_000),
            interval_ms=check.number(doc, "interval_ms", path, 0.0, maximum=3_600_000),
            write=check.boolean(doc, "write", path, False),
            size=size,
            direct=check.boolean(doc, "direct", path, False),
        )
    name = check.identifier(doc, "name", path) or "?"
    run = check.string(doc, "run", path, multiline=True) or ""
    populate = doc.get("populate")
    if populate is not None and not isinstance(populate, str):
        check.add(f"{path}populate", "must be a string or null")
        populate = None
    elif populate is not None and _text_problem(populate, multiline=True):
        check.add(f"{path}populate", str(_text_problem(populate, multiline=True)))
        populate = None
    return Workload(index, "app", name, run=run, populate=populate)


def _target(check: _Checker, doc: object) -> Target:
    if not isinstance(doc, dict):
        check.add("target", "required, an object")
        return Target("directory", path="/")
    kind = doc.get("kind")
    if kind == "directory":
        path = check.string(doc, "path", "target.") or "/"
        if not path.startswith("/"):
            check.add("target.path", "must be an absolute path")
        return Target("directory", path=path)
    if kind == "block":
        volume_id = check.string(doc, "volume_id", "target.")
        filesystem = doc.get("filesystem")
        if filesystem not in ("xfs", "ext4", "raw"):
            check.add(
                "target.filesystem", f"must be one of xfs, ext4, raw, got {quote(filesystem)}"
            )
        mount_point = check.string(doc, "mount_point", "target.", required=filesystem != "raw")
        if filesystem == "raw":
            mount_point = None
        elif mount_point is not None and not mount_point.startswith("/"):
            check.add("target.mount_point", "must be an absolute path")
        mount_options = check.string(doc, "mount_options", "target.", required=False)
        if mount_options is not None and not _MOUNT_OPTIONS.match(mount_options):
            check.add("target.mount_options", "mount options: letters, digits and _ . = : , + -")
        by_id_dir = check.string(doc, "by_id_dir", "target.", required=False)
        _absolute(check, by_id_dir, "target.by_id_dir")
        return Target(
            "block",
            volume_id=volume_id,
            filesystem=filesystem if isinstance(filesystem, str) else None,
            created_by_run=check.boolean(doc, "created_by_run", "target.", False),
            mount_point=mount_point,
            mount_options=mount_options,
            by_id_dir=by_id_dir,
            attach_wait_s=check.number(doc, "attach_wait_s", "target.", 120.0),
        )
    check.add("target.kind", f"must be one of directory, block, got {quote(kind)}")
    return Target("directory", path="/")


def _burst(check: _Checker, doc: object) -> Burst:
    if doc is None:
        return Burst()
    if not isinstance(doc, dict):
        check.add("burst", "must be an object")
        return Burst()
    policy = doc.get("policy", "as-is")
    if policy not in BURST_POLICIES:
        check.add(
            "burst.policy", f"must be one of {', '.join(BURST_POLICIES)}, got {quote(policy)}"
        )
        return Burst()
    raw_actions = doc.get("actions")
    raw_actions = [] if raw_actions is None else raw_actions
    if not isinstance(raw_actions, list):
        check.add("burst.actions", "must be a list")
        return Burst(policy)
    actions = []
    for i, item in enumerate(raw_actions):
        path = f"burst.actions[{i}]."
        if not isinstance(item, dict):
            check.add(f"burst.actions[{i}]", "must be an object")
            continue
        kind = item.get("action", policy)
        if kind not in ("refill", "drain"):
            check.add(f"{path}action", f"must be refill or drain, got {quote(kind)}")
            continue
        rw = item.get("rw", "randwrite")
        if rw not in ("randwrite", "write", "randread", "read"):
            check.add(f"{path}rw", f"must be randwrite, write, randread or read, got {quote(rw)}")
        sizes = {}
        for key, default in (("bs", "16k"), ("size", "1g")):
            value = item.get(key, default)
            if not isinstance(value, str) or not _FIO_SIZE.match(value) or value[0] == "0":
                check.add(f"{path}{key}", "a fio size like 16k or 1g")
                value = default
            sizes[key] = value
        actions.append(
            BurstAction(
                workload_index=check.integer(item, "workload_index", path, 0, maximum=1000),
                action=kind,
                seconds=check.number(item, "seconds", path, 0.0),
                rw=str(rw),
                bs=sizes["bs"],
                iodepth=check.integer(item, "iodepth", path, 1, default=32, maximum=65536),
                size=sizes["size"],
            )
        )
    return Burst(str(policy), tuple(actions))


def parse_payload(doc: object) -> SlotPayload:
    """Validate a slot payload; PayloadError listing every problem on one line."""
    if not isinstance(doc, dict):
        raise PayloadError("slot payload: must be a JSON object")
    check = _Checker()
    if doc.get("version", 1) != 1:
        check.add(
            "version",
            f"unsupported payload version {quote(doc.get('version'))} (this agent reads 1)",
        )
    run_id = check.identifier(doc, "run_id", "") or "?"
    cell = doc.get("cell")
    cell_id = "?"
    if not isinstance(cell, dict):
        check.add("cell", "required, an object")
        cell = {}
    else:
        cell_id = check.identifier(cell, "cell_id", "cell.") or "?"
        if "fleet_size" in cell:
            check.integer(cell, "fleet_size", "cell.", 1, maximum=MAX_SLOTS)
    slot_index = check.integer(doc, "slot_index", "", 0, maximum=MAX_SLOTS - 1)
    target = _target(check, doc.get("target"))
    raw_workloads = doc.get("workloads")
    workloads: list[Workload] = []
    if not isinstance(raw_workloads, list):
        check.add("workloads", "required, a list")
    else:
        for index, item in enumerate(raw_workloads):
            workload = _workload(check, index, item)
            if workload is not None:
                workloads.append(workload)
    barrier = doc.get("barrier")
    if barrier is not None and not isinstance(barrier, dict):
        check.add("barrier", "must be an object")
        barrier = None
    results = doc.get("results")
    if not isinstance(results, dict):
        check.add("results", "required, an object")
        results = {}
    time_limit_s = check.number(
        doc, "time_limit_s", "", DEFAULT_TIME_LIMIT_S, positive=True, maximum=MAX_TIME_LIMIT_S
    )
    platform = doc.get("platform", "local")
    if platform not in PLATFORMS:
        check.add("platform", f"must be one of {', '.join(PLATFORMS)}, got {quote(platform)}")
    burst = _burst(check, doc.get("burst"))
    if check.problems:
        shown = check.problems[:MAX_PROBLEMS]
        if len(check.problems) > MAX_PROBLEMS:
            shown.append(f"and {len(check.problems) - MAX_PROBLEMS} more problems")
        raise PayloadError("slot payload: " + "; ".join(shown))
    return SlotPayload(
        run_id=run_id,
        cell=cell,
        cell_id=cell_id,
        slot_index=slot_index,
        target=target,
        workloads=workloads,
        barrier=barrier,
        results=results,
        time_limit_s=time_limit_s,
        platform=str(platform),
        raw=doc,
        burst=burst,
    )
