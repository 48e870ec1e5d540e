"""The benchmark matrix: pydantic models, validation and expansion into cells.

A matrix names instance types, storage options, workloads and fleet sizes. A
cell is one (instance type, storage, fleet size, repeat); each of its
`fleet_size` slots runs every workload in order.

Validation reports every problem at once as `PATH: message` lines (PATH like
`storage[0].iops`): the document is checked first (size, UTF-8, JSON syntax,
duplicate keys, nesting depth, finite numbers, integers in range), then pydantic
checks the shape, then each storage and workload item that has a valid shape
gets its semantic checks (published EBS limits, fio job names and typed
parameters, app presets), then the plan checks the target and counts cells and
instances arithmetically before expanding anything.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from iofleet.agent.payload import CELL_FIELDS, MAX_SLOT_TIMEOUT_S, SHA256_HEX
from iofleet.errors import Problem, ValidationFailed
from iofleet.plan.limits import INSTANCE_TYPE_RE
from iofleet.plan.matrixfile import read_matrix_bytes
from iofleet.quote import clip, quote, quote_json

# --------------------------------------------------------------------------- bounds

# A matrix file larger than this is refused before it is parsed (examples are < 4 KiB).
MAX_MATRIX_BYTES = 1024 * 1024
# Containers nested deeper than this are refused (a valid matrix nests 4 levels).
MAX_DEPTH = 16
# Integers are stored as int64 downstream; a JSON integer literal longer than this is
# refused before Python converts it (int("9" * 5000) raises past sys.int_info digits).
MAX_INT_DIGITS = 19
INT64_MAX = 2**63 - 1
# A plan's cells travel in one Step Functions state (256 KiB payload limit).
MAX_CELLS = 500
MAX_INSTANCES = 100_000
MAX_REPEATS = 1000
# Items of instance_types, storage, workloads and parallelism. A longer list is refused
# in one line; its items are not checked one by one (one line each, beyond the limit).
MAX_ITEMS = 100
# An inline Map (the cells of a run) runs at most 40 iterations at once.
MAX_CELL_CONCURRENCY = 40
MAX_TEXT = 64 * 1024  # an inline app's commands
MAX_DESCRIPTION = 4096

# --------------------------------------------------------------------------- shapes

_NAME_RE = re.compile(r"^[a-z0-9-]{1,48}$")
_LABEL_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,31}$")
_APP_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,47}$")
_AMI_RE = re.compile(r"^ami-[0-9a-f]{8,17}$")
_FS_ID_RE = re.compile(r"^fs-[0-9a-f]{8,17}$")
_PARAM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # the agent's payload: 64 at most


def _matches(regex: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(f"must be {what}, got {quote(value)}")
        return value

    return AfterValidator(check)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


# The characters fio takes in `directory=` (iofleet.plan.fiojobs renders the target there;
# fio splits the value on ':').
_LOCAL_PATH_RE = re.compile(r"[A-Za-z0-9._/+-]{1,4096}")
# The kernel's limits (PATH_MAX 4096 with its NUL, NAME_MAX 255); below the path a run
# puts `iofleet-<run id>/<cell id>/slot-NNNN` (up to about 170 characters) and then
# the workloads' own files and trees: a longer path plans, then fails every workload
# with "File name too long".
MAX_LOCAL_PATH = 3072
NAME_MAX = 255


def _local_path(value: str) -> str:
    _not_blank(value)
    if not _LOCAL_PATH_RE.fullmatch(value):
        raise ValueError(
            f"must be a path of letters, digits and . _ / + - only (fio's directory= "
            f"splits on ':'), got {quote(value)}"
        )
    if len(value) > MAX_LOCAL_PATH:
        raise ValueError(
            f"at most {MAX_LOCAL_PATH} characters (the kernel takes 4096 and the run's "
            f"directories and files go below it), got {len(value)}"
        )
    longest = max(value.split("/"), key=len)
    if len(longest) > NAME_MAX:
        raise ValueError(
            f"each name in the path at most {NAME_MAX} characters (the kernel's limit), "
            f"got {quote(longest)}"
        )
    return value


MatrixName = Annotated[str, _matches(_NAME_RE, "1-48 characters of a-z, 0-9 and '-'")]
Label = Annotated[
    str,
    _matches(_LABEL_RE, "1-32 characters of a-z, 0-9, '.', '_' and '-', starting alphanumeric"),
]
InstanceType = Annotated[
    str,
    Field(max_length=40),
    _matches(INSTANCE_TYPE_RE, "an EC2 instance type like m6i.4xlarge (family.size)"),
]
FileSystemId = Annotated[str, _matches(_FS_ID_RE, "a file system id like fs-0123456789abcdef0")]
AmiId = Annotated[str, _matches(_AMI_RE, "an AMI id like ami-0123456789abcdef0")]
AppName = Annotated[
    str,
    _matches(_APP_NAME_RE, "1-48 characters of a-z, 0-9, '.', '_' and '-', starting alphanumeric"),
]
Command = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_not_blank)]
Filesystem = Literal["xfs", "ext4", "raw"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class EbsStorage(_Model):
    """An EBS volume created per slot and attached to its instance."""

    type: Literal["ebs"]
    label: Label
    volume_type: Literal["gp2", "gp3", "io1", "io2", "st1", "sc1"]
    size_gib: int
    iops: int | None = None
    throughput_mibps: int | None = None
    filesystem: Filesystem = "xfs"

    def detail(self) -> str:
        parts = [self.volume_type, f"{self.size_gib} GiB"]
        if self.iops is not None:
            parts.append(f"{self.iops} IOPS")
        if self.throughput_mibps is not None:
            parts.append(f"{self.throughput_mibps} MiB/s")
        parts.append(self.filesystem)
        return " ".join(parts)


class EfsStorage(_Model):
    """An existing EFS file system, or one created for the run.

    Unset modes of a created file system mean generalPurpose and elastic.
    """

    type: Literal["efs"]
    label: Label
    file_system_id: FileSystemId | None = None
    performance_mode: Literal["generalPurpose", "maxIO"] | None = None
    throughput_mode: Literal["bursting", "elastic", "provisioned"] | None = None
    provisioned_mibps: int | None = Field(default=None, ge=1, le=100_000)

    def detail(self) -> str:
        if self.file_system_id:
            return self.file_system_id
        mode: str = self.throughput_mode or "elastic"
        if mode == "provisioned":
            mode = f"provisioned {self.provisioned_mibps} MiB/s"
        return f"{self.performance_mode or 'generalPurpose'}, {mode}"


class FsxOpenZfsStorage(_Model):
    """An existing FSx for OpenZFS file system, or one created per cell (iofleet/plan/fsx.py).

    `iops` set: USER_PROVISIONED SSD IOPS; unset: AUTOMATIC (3 per GiB).
    """

    type: Literal["fsx-openzfs"]
    label: Label
    file_system_id: FileSystemId | None = None
    deployment_type: (
        Literal["SINGLE_AZ_1", "SINGLE_AZ_2", "SINGLE_AZ_HA_1", "SINGLE_AZ_HA_2", "MULTI_AZ_1"]
        | None
    ) = None
    storage_capacity_gib: int | None = Field(default=None, ge=64, le=524288)
    throughput_capacity: int | None = Field(default=None, ge=64, le=100_000)
    iops: int | None = Field(default=None, ge=1, le=10_000_000)

    def detail(self) -> str:
        if self.file_system_id:
            return self.file_system_id
        parts = [
            self.deployment_type or "SINGLE_AZ_1",
            f"{self.storage_capacity_gib} GiB",
            f"{self.throughput_capacity} MB/s",
        ]
        if self.iops is not None:
            parts.append(f"{self.iops} IOPS")
        return ", ".join(parts)


class FsxLustreStorage(_Model):
    """An existing FSx for Lustre file system, or one created per cell (iofleet/plan/fsx.py)."""

    type: Literal["fsx-lustre"]
    label: Label
    file_system_id: FileSystemId | None = None
    deployment_type: Literal["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] | None = None
    storage_capacity_gib: int | None = Field(default=None, ge=1200, le=2_400_000)
    per_unit_storage_throughput: int | None = Field(default=None, ge=1, le=100_000)

    def detail(self) -> str:
        if self.file_system_id:
            return self.file_system_id
        parts = [self.deployment_type or "PERSISTENT_2", f"{self.storage_capacity_gib} GiB"]
        if self.per_unit_storage_throughput is not None:
            parts.append(f"{self.per_unit_storage_throughput} MB/s/TiB")
        return ", ".join(parts)


class InstanceStoreStorage(_Model):
    """The instance type's local NVMe instance store."""

    type: Literal["instance-store"]
    label: Label
    filesystem: Filesystem = "xfs"

    def detail(self) -> str:
        return f"instance store {self.filesystem}"


class S3MountpointStorage(_Model):
    """Mountpoint for Amazon S3 on a general purpose bucket the stack creates per cell
    (iofleet/aws/s3mount.py); which workloads can run there: iofleet/plan/mountpoint.py."""

    type: Literal["s3-mountpoint"]
    label: Label

    def detail(self) -> str:
        return "general purpose bucket per cell, Mountpoint"


def _az_id(value: str) -> str:
    from iofleet.plan.mountpoint import az_id_problem

    problem = az_id_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class S3ExpressMountpointStorage(_Model):
    """Mountpoint for Amazon S3 on an S3 Express One Zone directory bucket created per cell
    in `az_id` (default: the Availability Zone of the stack's first subnet); the cell's
    instances launch in that zone only."""

    type: Literal["s3express-mountpoint"]
    label: Label
    az_id: Annotated[str, AfterValidator(_az_id)] | None = None

    def detail(self) -> str:
        return f"S3 Express One Zone directory bucket per cell ({self.az_id or 'first subnet AZ'}), Mountpoint"


class LocalStorage(_Model):
    """A directory on this machine (local runs only)."""

    type: Literal["local"]
    label: Label
    path: Annotated[str, AfterValidator(_local_path)]

    def detail(self) -> str:
        return self.path


# Discriminator tags start with "~" so error locations can drop them.
_STORAGE_CLASSES: dict[str, type[_Model]] = {
    "ebs": EbsStorage,
    "efs": EfsStorage,
    "fsx-openzfs": FsxOpenZfsStorage,
    "fsx-lustre": FsxLustreStorage,
    "instance-store": InstanceStoreStorage,
    "local": LocalStorage,
    "s3-mountpoint": S3MountpointStorage,
    "s3express-mountpoint": S3ExpressMountpointStorage,
}
STORAGE_TYPES = tuple(_STORAGE_CLASSES)


def _storage_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return f"~{kind}" if isinstance(kind, str) else None


Storage = Annotated[
    Annotated[EbsStorage, Tag("~ebs")]
    | Annotated[EfsStorage, Tag("~efs")]
    | Annotated[FsxOpenZfsStorage, Tag("~fsx-openzfs")]
    | Annotated[FsxLustreStorage, Tag("~fsx-lustre")]
    | Annotated[InstanceStoreStorage, Tag("~instance-store")]
    | Annotated[LocalStorage, Tag("~local")]
    | Annotated[S3MountpointStorage, Tag("~s3-mountpoint")]
    | Annotated[S3ExpressMountpointStorage, Tag("~s3express-mountpoint")],
    Discriminator(_storage_tag),
]


def _param_value(value: Any) -> str | int:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a string or a number, got {_json_kind(value)}")
    if isinstance(value, float):  # as integer fields: 60.0 is not an integer (decision 42)
        raise ValueError(f"must be a valid integer or a string, got {_json_kind(value)}")
    return value


ParamValue = Annotated[Any, AfterValidator(_param_value)]


class FioWorkload(_Model):
    """`{"fio": NAME, "params": {...}}`: a job from the fio-jobs library."""

    fio: Annotated[str, Field(max_length=128)]
    params: dict[
        Annotated[str, _matches(_PARAM_RE, "a parameter name (at most 64 letters, digits, _)")],
        ParamValue,
    ] = Field(default_factory=dict, max_length=64)
    # the job's text as planned (`iofleet jobs -v`): a library whose job differs is refused
    job_sha256: (
        Annotated[str, _matches(SHA256_HEX, "64 lowercase hex digits (a sha256)")] | None
    ) = None

    def param_strings(self) -> dict[str, str]:
        """Parameter values as fio sees them (strings), names upper-cased."""
        return {k.upper(): _param_text(v) for k, v in self.params.items()}


def _param_text(value: str | int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# one ioping -J artifact of 100,000 requests is 31 MB, and parsing it into rows peaks at
# about 190 MiB; 1,000,000 took 1.68 GB in a full ingest: more than the ingest Lambda has
AWS_IOPING_MAX_COUNT = 100_000


class IopingSettings(_Model):
    count: int = Field(default=100, ge=1, le=1_000_000)
    interval_ms: int = Field(default=1000, ge=0, le=3_600_000)
    write: bool = False

    @field_validator("count")
    @classmethod
    def _times_something(cls, value: int) -> int:
        if value < 2:  # ioping's first request is an untimed warm-up
            raise ValueError(
                "1 request times nothing (ioping's first is an untimed warm-up): use 2 or more"
            )
        return value


class IopingWorkload(_Model):
    """`{"ioping": {...}}`: QD1 latency requests (seed 003)."""

    ioping: IopingSettings = Field(default_factory=IopingSettings)


class AppInline(_Model):
    name: AppName
    populate: Command | None = None
    run: Command


def _app_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "~preset"
    if isinstance(value, dict | AppInline):
        return "~inline"
    return None


class AppWorkload(_Model):
    """`{"app": PRESET}` or `{"app": {"name", "populate", "run"}}`."""

    app: Annotated[
        Annotated[str, Tag("~preset")] | Annotated[AppInline, Tag("~inline")],
        Discriminator(
            _app_tag,
            custom_error_type="app_kind",
            custom_error_message="expected a preset name or an object with name, run",
        ),
    ]


_WORKLOAD_KEYS = ("fio", "ioping", "app")


def _workload_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        present = [k for k in _WORKLOAD_KEYS if k in value]
        return f"~{present[0]}" if len(present) == 1 else None
    for key, cls in (("fio", FioWorkload), ("ioping", IopingWorkload), ("app", AppWorkload)):
        if isinstance(value, cls):
            return f"~{key}"
    return None


Workload = Annotated[
    Annotated[FioWorkload, Tag("~fio")]
    | Annotated[IopingWorkload, Tag("~ioping")]
    | Annotated[AppWorkload, Tag("~app")],
    Discriminator(
        _workload_tag,
        custom_error_type="workload_kind",
        custom_error_message="expected an object with exactly one of fio, ioping, app",
    ),
]


class Limits(_Model):
    max_instances: int = Field(default=100, ge=1, le=MAX_INSTANCES)
    budget_usd: float | None = Field(default=None, gt=0, le=10_000_000)


class Matrix(_Model):
    name: MatrixName
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    instance_types: list[InstanceType] = Field(default_factory=list, max_length=MAX_ITEMS)
    storage: list[Storage] = Field(min_length=1, max_length=MAX_ITEMS)
    workloads: list[Workload] = Field(min_length=1, max_length=MAX_ITEMS)
    parallelism: list[Annotated[int, Field(ge=1, le=MAX_INSTANCES)]] = Field(
        min_length=1, max_length=MAX_ITEMS
    )
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)
    limits: Limits = Field(default_factory=Limits)
    ami_id: AmiId | None = None
    ubuntu_release: Literal["22.04", "24.04"] | None = None  # iofleet/plan/hosts.py
    stop_on_failure: bool = False
    cell_concurrency: int = Field(default=1, ge=1, le=MAX_CELL_CONCURRENCY)
    slot_timeout_s: int = Field(default=7200, ge=1, le=MAX_SLOT_TIMEOUT_S)
    burst_policy: Literal["as-is", "refill", "drain"] = "as-is"
    # rates laid over data/prices.json for the plan's cost (iofleet/plan/prices.py)
    prices: dict[str, Any] | None = None


_TAG_CLASSES: dict[str, type[BaseModel]] = {
    **{f"~{k}": v for k, v in _STORAGE_CLASSES.items()},
    "~fio": FioWorkload,
    "~ioping": IopingWorkload,
    "~app": AppWorkload,
    "~inline": AppInline,
}
_STORAGE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Storage)
_WORKLOAD_ADAPTER: TypeAdapter[Any] = TypeAdapter(Workload)

# --------------------------------------------------------------------------- errors

Loc = tuple[str | int, ...]


def format_path(loc: Iterable[str | int]) -> str:
    """`("storage", 0, "iops")` -> `storage[0].iops`.

    A key with odd characters is written as a JSON string (one line, clipped when long:
    iofleet/quote.py); a path longer than MAX_PATH keeps its first and last steps with
    `...` between them."""
    steps: list[str] = []
    for part in loc:
        if isinstance(part, int):
            steps.append(f"[{part}]")
        elif not _PLAIN_KEY_RE.fullmatch(part):
            steps.append(f"[{quote_json(part)}]")
        else:
            steps.append(f".{part}" if steps else part)
    out = "".join(steps)
    if len(out) <= MAX_PATH:
        return out
    head, tail = steps[:1], steps[-1:]
    for step in steps[1:-1]:
        if len("".join(head)) + len(step) > MAX_PATH // 2:
            break
        head.append(step)
    for step in reversed(steps[len(head) : -1]):
        if len("".join(tail)) + len(step) > MAX_PATH // 2:
            break
        tail.insert(0, step)
    return "".join(head) + "..." + "".join(tail).removeprefix(".")


# A path longer than this (deep nesting of long keys) is shown by its ends.
MAX_PATH = 120
_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str | int) and not isinstance(value, bool):
        return quote(value)
    return json.dumps(value)


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class whose field sits at `loc` (tags included), if known."""
    current: type[BaseModel] | None = Matrix
    for part in loc:
        if isinstance(part, str) and part.startswith("~"):
            current = _TAG_CLASSES.get(part)
        elif isinstance(part, str):
            info = current.model_fields.get(part) if current else None
            ann = info.annotation if info else None
            current = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return current


def _problem_from_error(err: Any, prefix: Loc = ()) -> tuple[Loc, str]:
    raw_loc: Loc = prefix + tuple(err["loc"])
    loc: Loc = tuple(
        p for p in raw_loc if not (isinstance(p, str) and (p.startswith("~") or p == "[key]"))
    )
    kind = err["type"]
    value = err.get("input")
    if kind == "missing":
        return loc, "required"
    if kind == "extra_forbidden":
        model = _model_at(raw_loc[:-1])
        allowed = f" (allowed: {', '.join(model.model_fields)})" if model else ""
        return loc, f"unknown key{allowed}"
    if kind in ("union_tag_not_found", "union_tag_invalid") or (
        loc and loc[0] == "storage" and kind == "model_attributes_type"
    ):
        # only the storage union has string tags from the data itself
        types = ", ".join(STORAGE_TYPES)
        if isinstance(value, dict):
            if "type" not in value:
                return loc + ("type",), f"required (one of: {types})"
            return loc + (
                "type",
            ), f"unknown storage type {_json_kind(value['type'])} (one of: {types})"
        return loc, f"expected an object, got {_json_kind(value)}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return loc, f"expected an object, got {_json_kind(value)}"
    if kind == "list_type":
        return loc, f"expected an array, got {_json_kind(value)}"
    if kind == "too_short":
        return loc, "must not be empty"
    if kind == "too_long":
        limit = err.get("ctx", {}).get("max_length")
        actual = err.get("ctx", {}).get("actual_length")
        if actual is None and isinstance(value, dict | list):  # pydantic leaves it out for dicts
            actual = len(value)
        return loc, f"at most {limit} items, got {actual}"
    if kind == "string_too_long":
        limit = err.get("ctx", {}).get("max_length")
        return loc, f"at most {limit} characters, got {len(value)}"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return loc, f"must be one of {expected}, got {_json_kind(value)}"
    if kind == "value_error":
        return loc, str(err.get("ctx", {}).get("error", err["msg"]))
    if kind == "workload_kind" and isinstance(value, dict):
        present = [k for k in _WORKLOAD_KEYS if k in value]
        if present:
            return loc, f"has {' and '.join(present)}; expected exactly one of fio, ioping, app"
        names = [k if _PLAIN_KEY_RE.fullmatch(k) else quote_json(k) for k in list(value)[:3]]
        more = f" and {len(value) - 3} more" if len(value) > 3 else ""
        keys = ", ".join(names) + more
        return loc, f"expected exactly one of fio, ioping, app (keys: {keys or 'none'})"
    if kind in ("workload_kind", "app_kind"):
        return loc, f"{err['msg']}, got {_json_kind(value)}"
    message = err["msg"].replace("Input should be", "must be", 1)
    return loc, f"{message}, got {_json_kind(value)}"


def _pydantic_problems(exc: ValidationError, prefix: Loc = ()) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    for err in exc.errors(include_url=False):
        problem = _problem_from_error(err, prefix)
        # one line per place: a bad key's value is not reported beside the key itself
        if all(loc != problem[0] for loc, _ in problems):
            problems.append(problem)
    return problems


# --------------------------------------------------------------------------- semantic checks


def _storage_problems(item: Any) -> list[tuple[str, str]]:
    """Rules beyond the shape of one storage item: (field, message)."""
    from iofleet.plan.limits import check_ebs_volume

    if isinstance(item, EbsStorage):
        return check_ebs_volume(item.volume_type, item.size_gib, item.iops, item.throughput_mibps)
    problems: list[tuple[str, str]] = []
    if isinstance(item, EfsStorage):
        if item.file_system_id is not None:
            for name in ("performance_mode", "throughput_mode", "provisioned_mibps"):
                if getattr(item, name) is not None:
                    problems.append(
                        (name, "not allowed with file_system_id (existing file system)")
                    )
            return problems
        if item.throughput_mode == "provisioned" and item.provisioned_mibps is None:
            problems.append(("provisioned_mibps", "required when throughput_mode is provisioned"))
        if item.throughput_mode != "provisioned" and item.provisioned_mibps is not None:
            problems.append(("provisioned_mibps", "only with throughput_mode provisioned"))
        if item.performance_mode == "maxIO" and item.throughput_mode in (None, "elastic"):
            problems.append(("performance_mode", "maxIO is not supported with elastic throughput"))
    elif isinstance(item, FsxOpenZfsStorage | FsxLustreStorage):
        from iofleet.plan import fsx

        lustre = isinstance(item, FsxLustreStorage)
        settings = (
            ("storage_capacity_gib", "deployment_type", "per_unit_storage_throughput")
            if lustre
            else ("storage_capacity_gib", "throughput_capacity", "deployment_type", "iops")
        )
        if item.file_system_id is not None:
            for name in settings:
                if getattr(item, name) is not None:
                    problems.append(
                        (name, "not allowed with file_system_id (existing file system)")
                    )
            return problems
        for name in settings[: 1 if lustre else 2]:
            if getattr(item, name) is None:
                problems.append((name, "required without file_system_id"))
        if isinstance(item, FsxLustreStorage):
            problems += fsx.lustre_problems(
                item.deployment_type, item.storage_capacity_gib, item.per_unit_storage_throughput
            )
        else:
            problems += fsx.openzfs_problems(
                item.deployment_type, item.storage_capacity_gib, item.throughput_capacity, item.iops
            )
    return problems


def _ioping_seconds(item: IopingWorkload) -> float:
    return item.ioping.count * item.ioping.interval_ms / 1000.0


def _timeout_problems(raw: dict[str, Any], matrix: Matrix) -> list[tuple[Loc, str]]:
    """Workloads that cannot finish inside slot_timeout_s: one whose duration (a given
    parameter, or one left at the job's default) reaches it, or all of them together (the
    slot runs them one after the other) when what they last at the least reaches it."""
    from iofleet.plan.fiojobs import param_seconds

    problems: list[tuple[Loc, str]] = []
    limit = matrix.slot_timeout_s
    least: list[tuple[int, float]] = []  # (workload, seconds it lasts at the least)
    for index, item in enumerate(matrix.workloads):
        if isinstance(item, IopingWorkload):
            least.append((index, _ioping_seconds(item)))
            if _ioping_seconds(item) > limit:
                problems.append(
                    (
                        ("workloads", index, "ioping"),
                        f"count x interval_ms is {_ioping_seconds(item):.0f} s, longer than "
                        f"slot_timeout_s ({limit} s)",
                    )
                )
        elif isinstance(item, FioWorkload):
            given = {str(key).upper() for key in item.params}
            # a duration parameter may be an upper bound (a size-based job's runtime): one
            # longer than the limit is refused; one as long, only through what the
            # workloads last at the least (below)
            for name, seconds in param_seconds(item.fio, item.params, defaults=True).items():
                if seconds <= limit:
                    continue
                default = str(name).upper() not in given
                problems.append(
                    (
                        ("workloads", index, "params", name),
                        f"{seconds:g} s{' (the job default)' if default else ''} is longer than "
                        f"slot_timeout_s ({limit} s)",
                    )
                )
            least.append((index, _fio_least_seconds(item)))
    total = sum(seconds for _, seconds in least)
    lasting = [(i, s) for i, s in least if s > 0]
    if not problems and total >= limit:
        if len(lasting) == 1:
            what = f"workloads[{lasting[0][0]}] lasts at least {total:g} s (its start delays,"
            what += " ramps, time_based runtimes, rate-capped sizes, thinktime, loops and wait_for"
            what += " order)"
        else:
            parts = ", ".join(f"workloads[{i}] {s:g} s" for i, s in lasting)
            what = f"the workloads run one after the other and last at least {total:g} s "
            what += f"({parts})"
        problems.append((("slot_timeout_s",), f"{what}, not less than slot_timeout_s ({limit} s)"))
    return problems


def _fio_least_seconds(item: FioWorkload) -> float:
    """What a fio workload lasts at the least, on fio's own timeline: the stonewall groups
    run one after the other; a section starts when its group does, but not before its
    start delay (counted from fio's start: backend.c run_threads) nor before the end of
    the job it waits for (`wait_for`), and then runs its `JobProfile.busy_seconds`. The
    end of the last group; 0 when unknown."""
    from iofleet.plan.expect import job_profiles

    try:
        profiles = job_profiles(item.fio, item.params)
    except (KeyError, OSError, ValueError):
        return 0.0
    group, group_start, group_end = -1, 0.0, 0.0
    ends: dict[str, float] = {}
    for profile in profiles:
        if profile.group != group:
            group, group_start = profile.group, group_end
        start = max(group_start, profile.startdelay_s, ends.get(profile.waits_for or "", 0.0))
        ends[profile.job] = start + profile.busy_seconds()
        group_end = max(group_end, ends[profile.job])
    return group_end


def _workload_problems(item: Any) -> list[tuple[str, str]]:
    if isinstance(item, FioWorkload):
        from iofleet.plan.fiojobs import param_problems

        problems = param_problems(item.fio, item.params)
        if item.job_sha256 is not None and not any(where == "fio" for where, _ in problems):
            problems += _pin_problems(item.fio, item.job_sha256)
        return problems
    if isinstance(item, AppWorkload) and isinstance(item.app, str):
        from iofleet.plan.apps import get_preset

        try:
            get_preset(item.app)
        except KeyError as exc:
            return [("app", str(exc.args[0]))]
    return []


def _pin_problems(name: str, pinned: str) -> list[tuple[str, str]]:
    """The pinned job text against the library's (param_problems has loaded it)."""
    from iofleet.plan.fiojobs import JobFileError, get_job

    try:
        job = get_job(name)
    except (KeyError, JobFileError):
        return []  # reported by param_problems
    if job.text_sha256 == pinned:
        return []
    return [
        (
            "job_sha256",
            f"job {quote(name)} is not the text this matrix pins: {job.path} has sha256 "
            f"{job.text_sha256[:16]}..., the pin {pinned[:16]}... (run with the library it "
            "was pinned from, or pin this one: iofleet jobs -v)",
        )
    ]


def _items(raw: dict[str, Any], key: str) -> list[Any] | None:
    """The list at `key` when its items are checked one by one: None for another kind or
    a list over MAX_ITEMS (refused as too long, in one line, by the whole-matrix pass)."""
    items = raw.get(key)
    return items if isinstance(items, list) and len(items) <= MAX_ITEMS else None


def _item_problems(
    raw: dict[str, Any], key: str, adapter: TypeAdapter[Any], check: Any
) -> tuple[list[tuple[Loc, str]], list[tuple[int, Any]]]:
    items = _items(raw, key)
    problems: list[tuple[Loc, str]] = []
    valid: list[tuple[int, Any]] = []
    if items is None:
        return problems, valid
    for index, item in enumerate(items):
        try:
            model = adapter.validate_python(item, strict=True)
        except ValidationError:
            continue  # reported by the whole-matrix pass
        valid.append((index, model))
        # a name like "params.RUNTIME" is two steps of the path
        problems += [((key, index, *name.split(".", 1)), msg) for name, msg in check(model)]
    return problems, valid


def _duplicates(raw: dict[str, Any], key: str, get: Any, what: str) -> list[tuple[Loc, str]]:
    items = _items(raw, key)
    problems: list[tuple[Loc, str]] = []
    if items is None:
        return problems
    seen: dict[object, int] = {}
    for index, item in enumerate(items):
        value = get(item)
        if value is None:
            continue
        if value in seen:
            path = format_path((key, seen[value]))
            problems.append(((key, index), f"duplicate {what} {quote(value)} (also {path})"))
        else:
            seen[value] = index
    return problems


_FIELD_ORDER = {name: i for i, name in enumerate(Matrix.model_fields)}


def _sort_key(problem: tuple[Loc, str]) -> tuple[int, int]:
    loc = problem[0]
    first = _FIELD_ORDER.get(str(loc[0]), len(_FIELD_ORDER)) if loc else -1
    second = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else -1
    return first, second


def _collect_problems(raw: dict[str, Any]) -> tuple[Matrix | None, list[tuple[Loc, str]]]:
    problems: list[tuple[Loc, str]] = []
    matrix: Matrix | None = None
    try:
        matrix = Matrix.model_validate(raw, strict=True)
    except ValidationError as exc:
        problems += _pydantic_problems(exc)
    storage_problems, _ = _item_problems(raw, "storage", _STORAGE_ADAPTER, _storage_problems)
    workload_problems, _ = _item_problems(raw, "workloads", _WORKLOAD_ADAPTER, _workload_problems)
    problems += storage_problems + workload_problems

    def label_of(item: object) -> object:
        label = item.get("label") if isinstance(item, dict) else None
        return label if isinstance(label, str) else None

    def hashable(item: object) -> object:
        return item if isinstance(item, str | int) and not isinstance(item, bool) else None

    problems += [
        ((loc + ("label",)), msg)
        for loc, msg in _duplicates(raw, "storage", label_of, "storage label")
    ]
    problems += _duplicates(raw, "instance_types", hashable, "instance type")
    problems += _duplicates(raw, "parallelism", hashable, "fleet size")
    if isinstance(raw.get("prices"), dict):
        from iofleet.plan.prices import problems as price_problems

        problems += [(("prices", *loc), msg) for loc, msg in price_problems(raw["prices"])]
    if matrix is not None and not problems:
        problems += _timeout_problems(raw, matrix)
        from iofleet.plan.mountpoint import matrix_problems  # workloads Mountpoint cannot run

        problems += matrix_problems(matrix)
        problems += _raw_device_problems(matrix)
        problems += _job_reading_problems(matrix)
        problems += _size_below_block_problems(matrix)
    problems.sort(key=_sort_key)
    return (matrix if not problems else None), problems


def _raw_device_problems(matrix: Matrix) -> list[tuple[Loc, str]]:
    """Fio workloads that a raw EBS volume of the matrix cannot run (a job option that would
    move I/O off the agent's per-process region, or regions that do not fit the volume):
    the agent would refuse them on the instance; the plan says so first."""
    from iofleet.plan.fiojobs import raw_plan_problem

    problems: list[tuple[Loc, str]] = []
    for si, storage in enumerate(matrix.storage):
        if getattr(storage, "filesystem", None) == "raw":  # an app builds in a directory
            problems += [
                (
                    ("workloads", wi, "app"),
                    f"app {quote(w.app if isinstance(w.app, str) else w.app.name)} cannot run "
                    f"on storage[{si}] "
                    f"({quote(storage.label)}, a raw device): an app needs a filesystem "
                    "(filesystem xfs or ext4)",
                )
                for wi, w in enumerate(matrix.workloads)
                if isinstance(w, AppWorkload)
            ]
        if not (isinstance(storage, EbsStorage) and storage.filesystem == "raw"):
            continue
        for wi, w in enumerate(matrix.workloads):
            if not isinstance(w, FioWorkload):
                continue
            try:
                why = raw_plan_problem(w.fio, w.params, storage.size_gib * 2**30)
            except KeyError:
                continue  # an unknown job is reported by the matrix validation
            if why:
                where = f"storage[{si}] ({quote(storage.label)}, a raw volume)"
                problems.append(
                    (("workloads", wi, "fio"), f"job {quote(w.fio)} cannot run on {where}: {why}")
                )
    return problems


def _job_reading_problems(matrix: Matrix) -> list[tuple[Loc, str]]:
    """Fio workloads whose job file asks fio for something iofleet cannot plan for (a size
    fio takes as a share of an existing file, a block-size range, the host's $ncpus...):
    refused rather than planned on a guess (iofleet/plan/fiojobs.py reading_problems)."""
    from iofleet.plan.fiojobs import JobFileError, reading_problems

    # a raw EBS volume or instance store: fio's size=N% is a share of the device
    raw_only = all(getattr(s, "filesystem", None) == "raw" for s in matrix.storage)
    problems: list[tuple[Loc, str]] = []
    for i, w in enumerate(matrix.workloads):
        if not isinstance(w, FioWorkload):
            continue
        try:
            found = reading_problems(w.fio, w.params, raw_only)
        except (KeyError, JobFileError):
            continue  # reported by the matrix validation
        problems += [(("workloads", i, *where.split(".", 1)), msg) for where, msg in found]
    return problems


def _size_below_block_problems(matrix: Matrix) -> list[tuple[Loc, str]]:
    """Fio workloads with a job whose size (per clone) is below its block size: fio
    refuses them as it starts ("size too small, must not be less than minimum block
    size"), after the slot has been set up."""
    from iofleet.plan.expect import job_profiles
    from iofleet.plan.fiojobs import JobFileError

    problems: list[tuple[Loc, str]] = []
    for i, w in enumerate(matrix.workloads):
        if not isinstance(w, FioWorkload):
            continue
        try:
            profiles = job_profiles(w.fio, w.params)
        except (KeyError, OSError, ValueError, JobFileError):
            continue  # reported by the matrix validation
        for profile in profiles:
            block = min(profile.block_sizes.values(), default=0)  # fio's td_min_bs
            if profile.size_bytes is None or not 0 <= profile.size_bytes < block:
                continue
            size_key = next((k for k in w.params if str(k).upper() == "SIZE"), None)
            where: Loc = (
                ("workloads", i, "params", size_key) if size_key else ("workloads", i, "fio")
            )
            problems.append(
                (
                    where,
                    f"job {quote(w.fio)} section {quote(profile.job)}: its size "
                    f"({profile.size_bytes} bytes) is below its smallest block size ({block} bytes): "
                    "fio refuses it",
                )
            )
            break
    return problems


# More keys or items of one object or array than this with the same problem are
# reported in one line that counts them; more problems than MAX_LINES in all end with
# one line that counts the rest (a 1 MiB matrix can hold 100,000 bad keys).
MAX_SAME = 10
MAX_LINES = 100


def _step(part: str | int) -> str:
    return f"[{part}]" if isinstance(part, int) else quote(part)


def _grouped(problems: list[tuple[Loc, str]]) -> list[tuple[Loc, str]]:
    """`problems` with each run of more than MAX_SAME siblings that share a message
    written once, at their parent, and at most MAX_LINES lines in all."""
    problems = list(dict.fromkeys(problems))  # a line said twice is said once
    siblings: dict[tuple[Loc, str], list[str | int]] = {}
    for loc, msg in problems:
        if loc:
            siblings.setdefault((loc[:-1], msg), []).append(loc[-1])
    out: list[tuple[Loc, str]] = []
    written: set[tuple[Loc, str]] = set()
    for loc, msg in problems:
        steps = siblings.get((loc[:-1], msg), []) if loc else []
        if len(steps) <= MAX_SAME:
            out.append((loc, msg))
        elif (loc[:-1], msg) not in written:  # the group's first: one line for all of it
            written.add((loc[:-1], msg))
            noun = "items" if isinstance(steps[0], int) else "keys"
            shown = ", ".join(_step(part) for part in steps[:3])
            out.append(
                (loc[:-1], f"{len(steps)} {noun} ({shown} and {len(steps) - 3} more): {msg}")
            )
    if len(out) > MAX_LINES:
        rest = len(out) - (MAX_LINES - 1)
        out = out[: MAX_LINES - 1] + [
            ((), f"and {rest} more problems (the first {MAX_LINES - 1} are shown)")
        ]
    return out


def _fail(problems: list[tuple[Loc, str]]) -> ValidationFailed:
    return ValidationFailed([Problem(format_path(loc), msg) for loc, msg in _grouped(problems)])


# --------------------------------------------------------------------------- loading


class _BadNumber:
    """A JSON number literal that has no finite int64 / float value (kept for its path)."""

    def __init__(self, text: str, why: str) -> None:
        self.text, self.why = text, why


class _JsonObject(dict):  # type: ignore[type-arg]
    """A parsed JSON object that remembers the keys it saw twice."""

    duplicates: tuple[str, ...] = ()


def _parse_int(text: str) -> int | _BadNumber:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _BadNumber(text, f"a {digits}-digit integer is out of range")
    return int(text)


def _parse_float(text: str) -> float | _BadNumber:
    value = float(text)
    if not math.isfinite(value):
        return _BadNumber(text, f"{clip(text)} is out of range of a finite number")
    return value


def _parse_constant(text: str) -> _BadNumber:
    return _BadNumber(text, f"{clip(text)} is not a JSON number (only finite numbers are allowed)")


def _object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    duplicates = []
    for key, value in pairs:
        if key in obj and key not in duplicates:
            duplicates.append(key)
        obj[key] = value
    if duplicates:
        obj.duplicates = tuple(duplicates)
    return obj


def _child(path: Loc, key: str | int) -> Loc:
    return (*path, key)


def _document_problems(doc: object) -> list[tuple[Loc, str]]:
    """Problems of the JSON document itself, each at its path; walks without recursion.

    Also run on an already-parsed matrix (the Plan Lambda's event), so it checks what
    Python's json module lets through: NaN and Infinity, integers beyond int64, lone
    surrogates and NUL characters in strings, non-string keys, deep nesting.
    """
    problems: list[tuple[Loc, str]] = []
    stack: list[tuple[Loc, object, int]] = [((), doc, 0)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, dict | list) and depth >= MAX_DEPTH:
            problems.append((path, f"nested deeper than {MAX_DEPTH} levels"))
            continue
        if isinstance(value, dict):
            for key in getattr(value, "duplicates", ()):
                problems.append((_child(path, key), "duplicate key (each key at most once)"))
            children: list[tuple[Loc, object, int]] = []
            bad_keys: dict[str, int] = {}  # the object's bad keys, counted by problem
            for key, item in value.items():
                if not isinstance(key, str):
                    problems.append((path, f"keys must be strings, got {type(key).__name__}"))
                    continue
                key_problem = _string_problem(key)
                if key_problem:
                    bad_keys[key_problem] = bad_keys.get(key_problem, 0) + 1
                    continue
                children.append((_child(path, key), item, depth + 1))
            problems += [
                (path, f"key {why}" if n == 1 else f"{n} keys, each: {why}")
                for why, n in bad_keys.items()
            ]
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(
                reversed([(_child(path, i), item, depth + 1) for i, item in enumerate(value)])
            )
        elif isinstance(value, _BadNumber):
            problems.append((path, value.why))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if not -INT64_MAX - 1 <= value <= INT64_MAX:
                problems.append((path, "integer out of range (beyond 64 bits)"))
        elif isinstance(value, float):
            if not math.isfinite(value):
                problems.append((path, f"{json.dumps(value)} is not a finite number"))
        elif isinstance(value, str):
            problem = _string_problem(value)
            if problem:
                problems.append((path, problem))
        else:
            problems.append((path, f"not a JSON value ({type(value).__name__})"))
    return problems


def _string_problem(value: str) -> str | None:
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid Unicode (lone surrogate at character {exc.start})"
    return None


def validate_matrix_dict(d: object) -> Matrix:
    """A validated Matrix; ValidationFailed listing every problem otherwise.

    Takes a parsed document (from load_matrix_bytes or the Plan Lambda's event).
    """
    try:
        document = _document_problems(d)
    except RecursionError:  # a container nested past Python's limit (not from our parser)
        document = [((), f"nested deeper than {MAX_DEPTH} levels")]
    if document:
        raise _fail(document)
    if not isinstance(d, dict):
        raise ValidationFailed(
            [Problem("", f"the matrix must be a JSON object, got {_json_kind(d)}")]
        )
    matrix, problems = _collect_problems(d)
    if problems or matrix is None:
        raise _fail(problems)
    return matrix


def _refuse(message: str) -> ValidationFailed:
    return ValidationFailed([Problem("", message)])


def load_matrix_text(text: str) -> Matrix:
    if len(text) > MAX_MATRIX_BYTES:
        raise _refuse(f"the matrix is over the {MAX_MATRIX_BYTES} byte limit")
    if text.startswith("\ufeff"):
        raise _refuse("the matrix starts with a byte order mark (save it as UTF-8 without BOM)")
    if not text.strip():
        raise _refuse("the matrix is empty (expected a JSON object)")
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except json.JSONDecodeError as exc:
        hint = ""
        if exc.pos == len(text) - len(text.lstrip()) and exc.msg == "Expecting value":
            hint = " (a matrix is JSON, an object starting with '{': no YAML, no comments)"
        raise _refuse(f"line {exc.lineno} column {exc.colno}: {exc.msg}{hint}") from None
    except RecursionError:
        raise _refuse(f"nested deeper than {MAX_DEPTH} levels") from None
    return validate_matrix_dict(doc)


def load_matrix_bytes(data: bytes) -> Matrix:
    """Validate a matrix from its bytes: size, BOM and UTF-8 first, then the JSON."""
    if len(data) > MAX_MATRIX_BYTES:
        raise _refuse(f"the matrix is over the {MAX_MATRIX_BYTES} byte limit")
    if data.startswith(b"\xef\xbb\xbf"):
        raise _refuse("the matrix starts with a byte order mark (save it as UTF-8 without BOM)")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise _refuse("the matrix is UTF-16 text (save it as UTF-8)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _refuse(
            f"line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    return load_matrix_text(text)


STDIN_NAME = "<stdin>"  # the file name problems of a matrix read from stdin ("-") start with


def matrix_file_name(path: str | Path) -> str:
    """How problem lines name the matrix file: as given, `<stdin>` for "-"."""
    return STDIN_NAME if str(path) == "-" else str(path)


def load_matrix_file(path: str | Path, data: bytes | None = None) -> Matrix:
    """Load and validate a matrix file; "-" reads stdin. Reads at most the size limit.

    `data`: the file's bytes, read by the caller already (`iofleet local` reads them
    once, before its imports: fiojobs.start_parse_only_checks); the file is not read
    again. Every problem, the file's own (missing, a directory, unreadable) included,
    is a ValidationFailed whose lines start with the file (`matrix_file_name`).
    """
    name = matrix_file_name(path)
    try:
        if data is not None:
            return load_matrix_bytes(data)
        if str(path) == "-":
            return load_matrix_bytes(sys.stdin.buffer.read(MAX_MATRIX_BYTES + 1))
        if str(path) == "":  # not ".", which Path("") is
            raise _refuse("no such matrix file (the path is empty)")
        p = Path(path)
        try:
            data = read_matrix_bytes(p, MAX_MATRIX_BYTES + 1)
        except FileNotFoundError:
            raise _refuse("no such matrix file") from None
        except IsADirectoryError:
            raise _refuse("is a directory, expected a matrix JSON file") from None
        except OSError as exc:
            raise _refuse(f"cannot read: {exc.strerror or exc}") from None
        return load_matrix_bytes(data)
    except ValidationFailed as exc:
        raise exc.in_file(name) from None


def plan_matrix_file(path: str | Path, target: str = "aws", data: bytes | None = None) -> Plan:
    """`load_matrix_file` then `build_plan`: every problem line starts with the file."""
    matrix = load_matrix_file(path, data)
    try:
        return build_plan(matrix, target=target)
    except ValidationFailed as exc:
        raise exc.in_file(matrix_file_name(path)) from None


# --------------------------------------------------------------------------- plan

Target = Literal["aws", "local"]


@dataclass(frozen=True)
class Cell:
    cell_index: int
    cell_id: str
    instance_type: str
    storage: Any  # one of the storage models
    storage_label: str
    storage_type: str
    storage_detail: str
    fleet_size: int
    repeat: int
    workloads: tuple[Any, ...] = field(default=(), repr=False)
    # per workload: the sha256 of a fio job's text as planned (None for the others)
    job_sha256: tuple[str | None, ...] = field(default=(), repr=False)

    @property
    def slots(self) -> int:
        return self.fleet_size

    def cell_info(self) -> dict[str, Any]:
        """The slot payload's "cell" object."""
        return {name: getattr(self, name) for name in CELL_FIELDS}

    def workload_payloads(self) -> list[dict[str, Any]]:
        """The slot payload's "workloads", app presets resolved."""
        digests = self.job_sha256 or (None,) * len(self.workloads)
        return [workload_payload(w, d) for w, d in zip(self.workloads, digests, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.cell_info(),
            "storage": self.storage.model_dump(mode="json"),
            "slots": self.slots,
            "workloads": self.workload_payloads(),
        }


def workload_payload(workload: Any, job_sha256: str | None = None) -> dict[str, Any]:
    """A workload as the agent's payload gives it; a fio job with `job_sha256`, the
    digest of its text as planned, when given (Cell.workload_payloads)."""
    if isinstance(workload, FioWorkload):
        doc = {"kind": "fio", "name": workload.fio, "params": workload.param_strings()}
        if job_sha256 is not None:
            doc["job_sha256"] = job_sha256
        return doc
    if isinstance(workload, IopingWorkload):
        return {"kind": "ioping", **workload.ioping.model_dump()}
    if isinstance(workload, AppWorkload):
        if isinstance(workload.app, str):
            from iofleet.plan.apps import get_preset

            spec = get_preset(workload.app)
            return {"kind": "app", "name": spec.name, "run": spec.run, "populate": spec.populate}
        app = workload.app
        return {"kind": "app", "name": app.name, "run": app.run, "populate": app.populate}
    raise TypeError(f"not a workload: {workload!r}")


@dataclass(frozen=True)
class Plan:
    matrix: Matrix
    target: str
    cells: list[Cell]

    @property
    def total_instances(self) -> int:
        return sum(c.fleet_size for c in self.cells)

    def to_dict(self) -> dict[str, Any]:
        from iofleet.plan.cost import plan_annotations

        notes = plan_annotations(self)
        return {
            "name": self.matrix.name,
            "target": self.target,
            "cell_count": len(self.cells),
            "total_instances": self.total_instances,
            "max_instances": self.matrix.limits.max_instances,
            **notes["run"],
            "cells": [
                {**c.to_dict(), **n} for c, n in zip(self.cells, notes["cells"], strict=True)
            ],
        }


# The share of a new EBS volume a file system leaves for files, a lower bound by volume
# size: measured with mkfs.xfs (xfsprogs 6.1) and mkfs.ext4 (e2fsprogs 1.47) on empty
# images (free blocks after mkfs; ext4's root-reserved 5% counted as free, the agent runs
# fio as root): 1 GiB xfs 93.7%, ext4 95.1%; 4 GiB 98.4% / 96.5%; 16 GiB 99.6% / 97.4%
# (docs/decisions.md #84). (smallest size in GiB, share) from the largest size down.
FORMATTED_SHARE = ((16, 0.97), (4, 0.96), (1, 0.93))
# OpenZFS keeps 1/32 of a pool back (spa_slop_shift 5) from every writer
ZFS_SHARE = 1 - 1 / 32


def _capacity_problems(matrix: Matrix) -> list[tuple[Loc, str]]:
    """Storage whose files will not fit: a formatted EBS volume (each slot its own) that
    the slot's fio files and ioping's working set do not fit, and an FSx file system the
    stack creates (a cell's slots share it) that the largest fleet's files do not fit.
    Raw volumes are checked per job (_raw_device_problems); EFS, S3 and an existing
    file_system_id have no size the plan knows; instance store sizes are not tabled."""
    from iofleet.plan.expect import slot_file_bytes

    per_slot, uncounted = slot_file_bytes([workload_payload(w) for w in matrix.workloads])
    if per_slot == 0:
        return []
    besides = f"; not counted: {', '.join(uncounted)}" if uncounted else ""
    fleet = max(matrix.parallelism)
    problems: list[tuple[Loc, str]] = []
    for i, s in enumerate(matrix.storage):
        if isinstance(s, EbsStorage) and s.filesystem != "raw":
            share = next((f for gib, f in FORMATTED_SHARE if s.size_gib >= gib), 0.93)
            room = int(s.size_gib * 2**30 * share)
            if per_slot > room:
                problems.append(
                    (
                        ("storage", i, "size_gib"),
                        f"each slot lays out ~{_gib(per_slot)} of files{besides}, and a "
                        f"{s.size_gib} GiB volume formatted {s.filesystem} leaves about "
                        f"{_gib(room)} for them: use a larger size_gib or a smaller SIZE",
                    )
                )
        elif isinstance(s, FsxOpenZfsStorage | FsxLustreStorage) and not s.file_system_id:
            if s.storage_capacity_gib is None:
                continue  # refused by the FSx settings check
            share = ZFS_SHARE if isinstance(s, FsxOpenZfsStorage) else 1.0
            room = int(s.storage_capacity_gib * 2**30 * share)
            if per_slot * fleet > room:
                keeps = " (OpenZFS keeps 1/32 back)" if share < 1 else ""
                problems.append(
                    (
                        ("storage", i, "storage_capacity_gib"),
                        f"a cell of {fleet} slots lays out ~{_gib(per_slot * fleet)} of files "
                        f"at once ({fleet} x {_gib(per_slot)}{besides}) on the file system "
                        f"it shares, which holds about {_gib(room)}{keeps}: use a larger "
                        "storage_capacity_gib, a smaller SIZE or parallelism",
                    )
                )
    return problems


def workload_host_problems(matrix: Matrix, *hosts: Any) -> list[tuple[int, str]]:
    """(workload index, line) for each fio workload that asks of one of `hosts`
    (iofleet.plan.fiojobs.Host) what it lacks (iofleet.plan.fiojobs.host_problems): a CPU
    it pins (cpus_allowed, cpumask), huge-page buffers, memory it locks (lockmem). The
    AWS plan checks the instance types with the fewest vCPUs and the least memory (the
    instances reserve no huge pages), `iofleet local` this machine, with the largest
    fleet's slots running on it at once."""
    from iofleet.plan.fiojobs import JobFileError, host_problems

    problems: list[tuple[int, str]] = []
    for i, w in enumerate(matrix.workloads):
        if not isinstance(w, FioWorkload):
            continue
        try:
            lines = [line for host in hosts for line in host_problems(w.fio, w.params, host)]
        except (KeyError, JobFileError):
            continue  # reported by the matrix validation
        problems += [(i, line) for line in dict.fromkeys(lines)]
    return problems


def _host_problems(matrix: Matrix) -> list[tuple[Loc, str]]:
    """Fio workloads pinned to a CPU that the instance type with the fewest vCPUs lacks,
    locking more memory than the one with the least memory can spare, with huge-page
    buffers (the instances reserve no huge pages), or asking for more libaio events or
    open files than the bootstrap gives an instance (fiojobs.AWS_AIO_MAX_NR,
    AWS_OPEN_FILES)."""
    from iofleet.plan.expect import instance_catalogue
    from iofleet.plan.fiojobs import AWS_AIO_MAX_NR, AWS_OPEN_FILES, Host

    types = instance_catalogue()["types"]
    known = [t for t in matrix.instance_types if t in types]
    if not known:
        return []  # an unknown instance type is reported by the matrix validation
    fewest_cpus = min(known, key=lambda t: (types[t]["vcpus"], t))
    least_memory = min(known, key=lambda t: (types[t]["memory_mib"], t))
    # the libaio events and open files the bootstrap gives every instance (userdata)
    booted = "an iofleet instance"
    hosts = [Host(fewest_cpus, cpus=types[fewest_cpus]["vcpus"], huge_pages=False)]
    hosts.append(Host(least_memory, memory_bytes=types[least_memory]["memory_mib"] << 20))
    hosts.append(Host(booted, aio_events=AWS_AIO_MAX_NR, open_files=AWS_OPEN_FILES))
    return [(("workloads", i, "fio"), line) for i, line in workload_host_problems(matrix, *hosts)]


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def _target_problems(matrix: Matrix, target: str) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    if target == "aws":
        if not matrix.instance_types:
            problems.append((("instance_types",), "required for an AWS plan"))
        from iofleet.plan.hosts import for_matrix  # presets vs the release the instances run

        problems += for_matrix(matrix)[1]
        for i, s in enumerate(matrix.storage):
            if s.type == "local":
                problems.append(
                    (
                        ("storage", i, "type"),
                        "'local' storage is for local runs only (iofleet local)",
                    )
                )
        problems += _capacity_problems(matrix)
        problems += _host_problems(matrix)
        for i, w in enumerate(matrix.workloads):
            if isinstance(w, IopingWorkload) and w.ioping.count > AWS_IOPING_MAX_COUNT:
                problems.append(
                    (
                        ("workloads", i, "ioping", "count"),
                        f"at most {AWS_IOPING_MAX_COUNT:,} requests on AWS, got "
                        f"{w.ioping.count:,}: ioping -J writes about 310 bytes per request "
                        "and the ingest Lambda (1024 MB) reads the artifact whole "
                        "(local runs take up to 1,000,000)",
                    )
                )
    elif target == "local":
        for i, s in enumerate(matrix.storage):
            if s.type != "local":
                problems.append(
                    (
                        ("storage", i, "type"),
                        f"{quote(s.type)} storage needs an AWS run; local runs take only 'local' storage",
                    )
                )
        from iofleet.plan.apps import get_preset

        for i, w in enumerate(matrix.workloads):
            if isinstance(w, AppWorkload) and isinstance(w.app, str):
                spec = get_preset(w.app)
                if not spec.local_ok:
                    problems.append(
                        (
                            ("workloads", i, "app"),
                            f"preset {quote(spec.name)} needs AWS"
                            f"{' and network access' if spec.needs_network else ''}; "
                            "not available for local runs",
                        )
                    )
    else:
        problems.append(((), f"unknown target {quote(target)} (aws or local)"))
        return problems
    return problems + _fio_option_problems(matrix, target)


def _fio_option_problems(matrix: Matrix, target: str) -> list[tuple[Loc, str]]:
    """Options of the matrix's fio jobs that the fio the run uses refuses or misreads:
    checked against fio's option table of that release (iofleet/plan/fioopts.py), and,
    for a local run with fio installed, by that fio's own `--parse-only` too."""
    import shutil

    from iofleet.plan import fioopts
    from iofleet.plan.fiojobs import JobFileError, option_problems, parse_only_problem

    fio = shutil.which("fio") if target == "local" else None
    fio_workloads = [(i, w) for i, w in enumerate(matrix.workloads) if isinstance(w, FioWorkload)]
    target_dir = next((s.path for s in matrix.storage if isinstance(s, LocalStorage)), "/tmp")
    # the option table of the fio the run uses first; the installed fio's own verdict
    # (`--parse-only`) only for a job the table finds nothing in: a job it refuses gets
    # no run, and one started ahead for it (iofleet.cli) is not waited for
    if target == "aws":
        from iofleet.plan.hosts import for_matrix

        release = fioopts.release_for_host(for_matrix(matrix)[0].release)
    else:
        version = fioopts.start_version(fio if fio_workloads else None)
        release = fioopts.release_for_version(version())
    problems: list[tuple[Loc, str]] = []
    for i, w in fio_workloads:
        try:
            found = option_problems(w.fio, w.params, release)
            said = (
                None
                if found or fio is None
                else parse_only_problem(w.fio, w.params, target_dir, fio)
            )
        except (KeyError, JobFileError):
            continue  # reported by the matrix validation
        if said:
            found = [("fio", said)]
        problems += [(("workloads", i, *where.split(".", 1)), msg) for where, msg in found]
    return problems


def _cell_id(
    index: int, width: int, label: str, instance_type: str | None, fleet: int, rep: int
) -> str:
    parts = [f"c{index:0{width}d}", label]
    if instance_type is not None:
        parts.append(instance_type)
    parts += [f"x{fleet}", f"r{rep}"]
    return "-".join(parts)


def plan_size(matrix: Matrix, target: str) -> tuple[int, int]:
    """(cells, instances) of the plan for `target`, counted without expanding it."""
    types = len(matrix.instance_types) if target == "aws" else 1
    per_fleet = types * len(matrix.storage) * matrix.repeats
    return per_fleet * len(matrix.parallelism), per_fleet * sum(matrix.parallelism)


def size_problems(matrix: Matrix, target: str, max_instances: int | None = None) -> list[Problem]:
    """The plan's counts against the limits, before anything is expanded.

    `max_instances` is a deployment's own cap (the Plan Lambda's), checked besides the
    matrix's `limits.max_instances`.
    """
    cells, instances = plan_size(matrix, target)
    problems: list[Problem] = []
    limit = matrix.limits.max_instances
    if instances > limit:
        problems.append(
            Problem(
                "limits.max_instances",
                f"plan needs {instances} instances, over the limit of {limit}",
            )
        )
    elif max_instances is not None and instances > max_instances:
        problems.append(
            Problem(
                "limits.max_instances",
                f"plan needs {instances} instances, over this deployment's "
                f"max_instances_per_run of {max_instances}",
            )
        )
    if cells > MAX_CELLS:
        problems.append(
            Problem(
                "",
                f"plan has {cells} cells (instance types x storage x parallelism x repeats), "
                f"over the limit of {MAX_CELLS} cells per run",
            )
        )
    return problems


def _planned_digests(matrix: Matrix) -> tuple[str | None, ...]:
    """Per workload, the sha256 of a fio job's text as planned: the matrix's pin (checked
    against the library when it was validated), else the library's job as it is now.
    Each job is read once, however many cells run it."""
    from iofleet.plan.fiojobs import JobFileError, get_job

    known: dict[str, str] = {}
    digests: list[str | None] = []
    for i, workload in enumerate(matrix.workloads):
        if not isinstance(workload, FioWorkload):
            digests.append(None)
            continue
        if workload.job_sha256 is not None:
            digests.append(workload.job_sha256)
            continue
        if workload.fio not in known:
            try:
                known[workload.fio] = get_job(workload.fio).text_sha256
            except (KeyError, JobFileError) as exc:  # gone or broken since it was checked
                why = str(exc) if isinstance(exc, JobFileError) else "no longer in the library"
                where = format_path(("workloads", i, "fio"))
                raise ValidationFailed(
                    [Problem(where, f"job {quote(workload.fio)}: {why}")]
                ) from None
        digests.append(known[workload.fio])
    return tuple(digests)


def build_plan(matrix: Matrix, target: str = "aws", max_instances: int | None = None) -> Plan:
    """Expand a matrix into cells for `target` ("aws" or "local").

    The cell and instance counts are checked first, arithmetically, so an oversized
    matrix is refused without expanding it.
    """
    problems = _target_problems(matrix, target)
    if problems:
        raise _fail(problems)
    too_big = size_problems(matrix, target, max_instances)
    if too_big:
        raise ValidationFailed(too_big)
    instance_types: list[str | None] = list(matrix.instance_types) if target == "aws" else [None]
    combos = [
        (itype, storage, fleet, rep)
        for itype in instance_types
        for storage in matrix.storage
        for fleet in matrix.parallelism
        for rep in range(1, matrix.repeats + 1)
    ]
    width = max(3, len(str(len(combos) - 1)))
    digests = _planned_digests(matrix)
    cells = [
        Cell(
            cell_index=i,
            cell_id=_cell_id(i, width, storage.label, itype, fleet, rep),
            instance_type=itype or "local",
            storage=storage,
            storage_label=storage.label,
            storage_type=storage.type,
            storage_detail=storage.detail(),
            fleet_size=fleet,
            repeat=rep,
            workloads=tuple(matrix.workloads),
            job_sha256=digests,
        )
        for i, (itype, storage, fleet, rep) in enumerate(combos)
    ]
    plan = Plan(matrix=matrix, target=target, cells=cells)
    from iofleet.plan.cost import budget_problem

    over_budget = budget_problem(plan)
    if over_budget:
        raise ValidationFailed([Problem("limits.budget_usd", over_budget)])
    return plan


# --------------------------------------------------------------------------- table


def _workload_summary(payload: dict[str, Any]) -> str:
    if payload["kind"] == "fio":
        params = " ".join(f"{k}={v}" for k, v in payload["params"].items())
        return f"fio {payload['name']}" + (f" ({params})" if params else "")
    if payload["kind"] == "ioping":
        mode = "write" if payload["write"] else "read"
        return f"ioping {payload['count']} {mode} requests, {payload['interval_ms']} ms apart"
    populate = " (populate once per cell)" if payload.get("populate") else ""
    return f"app {payload['name']}{populate}"


def render_plan_table(plan: Plan) -> str:
    """An aligned table of cells, the workloads and the total."""
    headers = ["#", "cell_id", "instance_type", "storage", "type", "detail", "fleet", "repeat"]
    rows = [
        [
            str(c.cell_index),
            c.cell_id,
            c.instance_type,
            c.storage_label,
            c.storage_type,
            c.storage_detail,
            str(c.fleet_size),
            str(c.repeat),
        ]
        for c in plan.cells
    ]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    numeric = {0, 6, 7}

    def line(row: list[str]) -> str:
        cells = [
            v.rjust(widths[i]) if i in numeric else v.ljust(widths[i]) for i, v in enumerate(row)
        ]
        return "  ".join(cells).rstrip()

    out = [
        f"plan {plan.matrix.name} (target {plan.target})",
        line(headers),
        line(["-" * w for w in widths]),
        *(line(r) for r in rows),
        "",
        "workloads (every slot, in order):",
    ]
    if plan.cells:
        payloads = plan.cells[0].workload_payloads()
    else:
        payloads = [workload_payload(w) for w in plan.matrix.workloads]
    out += [f"  w{i:02d}  {_workload_summary(p)}" for i, p in enumerate(payloads)]
    out.append("")
    out.append(
        f"{len(plan.cells)} cells, total instances: {plan.total_instances} "
        f"(limit {plan.matrix.limits.max_instances})"
    )
    from iofleet.plan.cost import render_annotations

    out.insert(-1, render_annotations(plan).lstrip("\n") + "\n")
    return "\n".join(out)
