"""What a cell should measure, before it runs: promised ceilings and burst buckets.

For every fio job of a cell this module works out the ceiling the storage and
the instance promise (the smaller of the two), which one limits
(`limited_by`), and, where a burst bucket is involved, when it empties at the
job's demand (`seconds_to_exhaust`). The figures come from dated data files:
`data/ebs_limits.json` (creation limits, gp3 defaults), `data/limits_catalogue.json`
(burst and throughput models) and `data/instance_types.json` (EBS-optimized
figures per instance type). A figure those files lack is unknown: the answer
is then `limited_by: "unknown"`, never a guess.

Model (docs/expectations.md has the worked seed examples):
- Every limit is one dimension (operations/s or bytes/s) with a sustained
  rate, optionally a burst rate and a credit bucket that drains at
  (rate - sustained) and starts full (a new volume; an idle instance).
- A job's rate is the smallest cap (its own `rate=` cap included); the run
  is split into phases at each moment a bucket empties.
- `limited_by` is `volume`, `instance`, `burst-bucket` (a storage burst
  bucket sets the rate: the figure lasts only while credits do), `job-rate`
  (the job's own rate cap is below every ceiling) or `unknown`.

Stdlib only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from iofleet.plan.jobtext import (
    Job,
    Percent,
    fio_lines,
    fio_size,
    fio_time_us,
    read_jobs,
    size_bytes,
    stonewall_groups,
    value_pieces,
)

DATA = Path(__file__).resolve().parent / "data"
KIB = 1024
MIB = 1024 * 1024
TIB_MIB = 1024 * 1024  # MiB per TiB
BURST_POLICIES = ("as-is", "refill", "drain")
LIMITED_BY = ("volume", "instance", "burst-bucket", "job-rate", "unknown")


# --------------------------------------------------------------------------- data


@cache
def catalogue() -> dict[str, Any]:
    return json.loads((DATA / "limits_catalogue.json").read_text(encoding="utf-8"))


@cache
def instance_catalogue() -> dict[str, Any]:
    return json.loads((DATA / "instance_types.json").read_text(encoding="utf-8"))


@cache
def _ebs_creation_limits() -> dict[str, Any]:
    return json.loads((DATA / "ebs_limits.json").read_text(encoding="utf-8"))["volume_types"]


def instance_ebs(instance_type: str) -> dict[str, Any] | None:
    """The snapshot's record for an instance type, or None if it is not there."""
    record = instance_catalogue().get("types", {}).get(instance_type)
    return dict(record) if record else None


def sources() -> dict[str, str]:
    """The data files' dates, for plan output."""
    return {
        "limits_catalogue": catalogue()["as_of"],
        "instance_types": instance_catalogue()["as_of"],
    }


# ------------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class StorageSpec:
    """The storage of a cell, as far as ceilings go."""

    type: str  # gp2 gp3 io1 io2 st1 sc1 | efs | fsx-openzfs | instance-store | local
    size_gib: float | None = None
    iops: float | None = None
    throughput_mibps: float | None = None
    throughput_mode: str | None = None  # EFS: bursting | elastic | provisioned
    performance_mode: str | None = None  # EFS: generalPurpose | maxIO
    deployment_type: str | None = None  # FSx (iofleet/plan/fsx.py)
    per_unit_mbps: float | None = None  # FSx for Lustre persistent: MB/s per TiB

    @property
    def is_ebs(self) -> bool:
        return self.type in catalogue()["ebs"]["volume_types"]

    @property
    def is_shared(self) -> bool:
        return self.type in ("efs", "fsx-openzfs", "fsx-lustre")

    @property
    def over_network(self) -> bool:
        """Reached over the instance's network (its bandwidth is a ceiling)."""
        from iofleet.plan.mountpoint import MOUNTPOINT_TYPES

        return self.is_shared or self.type in MOUNTPOINT_TYPES


def storage_spec(storage: Any) -> StorageSpec:
    """A StorageSpec from a matrix storage model (or a dict with the same fields)."""

    def get(name: str) -> Any:
        if isinstance(storage, Mapping):
            return storage.get(name)
        return getattr(storage, name, None)

    kind = get("type")
    if kind == "ebs":
        return StorageSpec(
            type=str(get("volume_type")),
            size_gib=get("size_gib"),
            iops=get("iops"),
            throughput_mibps=get("throughput_mibps"),
        )
    if kind == "efs":
        created = get("file_system_id") is None
        return StorageSpec(
            type="efs",
            size_gib=get("size_gib"),
            throughput_mibps=get("provisioned_mibps"),
            # a created file system's unset modes are elastic and generalPurpose
            # (iofleet/aws/cell.py); an existing one's are not known offline (None)
            throughput_mode=get("throughput_mode") or ("elastic" if created else None),
            performance_mode=get("performance_mode") or ("generalPurpose" if created else None),
        )
    if kind == "fsx-openzfs":
        return StorageSpec(
            type="fsx-openzfs",
            size_gib=get("storage_capacity_gib"),
            iops=get("iops"),
            throughput_mibps=get("throughput_capacity"),
            deployment_type=get("deployment_type"),
        )
    if kind == "fsx-lustre":
        return StorageSpec(
            type="fsx-lustre",
            size_gib=get("storage_capacity_gib"),
            deployment_type=get("deployment_type"),
            per_unit_mbps=get("per_unit_storage_throughput"),
        )
    return StorageSpec(type=str(kind))


@dataclass(frozen=True)
class JobProfile:
    """One fio job section, as it loads the storage."""

    job: str  # fio's jobname (section name unless name= overrides it)
    shares: dict[str, float]  # direction -> fraction of the job's I/Os
    block_sizes: dict[str, int]  # direction -> bytes per I/O
    numjobs: int = 1
    runtime_s: float | None = None
    time_based: bool = False
    startdelay_s: float = 0.0  # fio waits this long before the section starts
    ramp_s: float = 0.0  # ramp_time: I/O before the measured runtime starts
    waits_for: str | None = None  # wait_for: the job this one starts after
    io_limited: bool = False  # io_size= or number_ios= may end a size-based job sooner
    size_bytes: int | None = None  # per clone
    rate_bytes: dict[str, float] = field(default_factory=dict)  # direction -> per clone
    rate_iops: dict[str, float] = field(default_factory=dict)  # direction -> per clone
    group: int = 0  # stonewall-separated group; sections in a group run together
    # with filesize=: the bytes of one clone's files (nrfiles x the largest filesize)
    layout_bytes: int | None = None
    # where I/O starts in each new file (offset=, and offset_increment= more per clone):
    # fio lays a new file out from byte 0 to that offset plus the file's share of size
    offset_bytes: int = 0
    offset_increment: int = 0
    nrfiles: int = 1
    loops: int = 1  # fio runs a size-based job this many times (its runtime bounds them all)
    # thinktime: fio pauses this long after every think_blocks I/Os (0: no pause, or
    # paced by thinktime_iotime instead, which this does not count)
    think_s: float = 0.0
    think_blocks: int = 1

    @property
    def bytes_per_io(self) -> float:
        return sum(share * self.block_sizes[d] for d, share in self.shares.items())

    def demand_iops(self) -> float:
        """The job's own cap in I/Os per second (inf when it is not rate-limited)."""
        caps = []
        for d, share in self.shares.items():
            if share <= 0:
                continue
            if d in self.rate_bytes:
                caps.append(self.rate_bytes[d] * self.numjobs / self.block_sizes[d] / share)
            if d in self.rate_iops:
                caps.append(self.rate_iops[d] * self.numjobs / share)
        return min(caps) if caps else math.inf

    def busy_seconds(self) -> float:
        """How long the section runs at the least once it has started (its start delay
        not included: fio counts that from its own start): a time_based runtime after
        its ramp, or for a size-based job, `loops` times over (fio's runtime bounds all
        of them: it counts from the first), the longer of the time its rate caps need to
        move its size (its ramp's I/O counts toward the size), when every direction it
        uses is capped in one unit (fio moves on to an uncapped direction), and its
        thinktime pauses (one after every thinktime_blocks I/Os, the last one's too:
        backend.c handle_thinktime), when nothing else ends it sooner (io_size,
        number_ios; a runtime); 0 when nothing bounds it."""
        if self.time_based and self.runtime_s:
            return self.ramp_s + self.runtime_s
        if not self.size_bytes or self.io_limited or self.bytes_per_io <= 0:
            return 0.0
        used = [d for d, share in self.shares.items() if share > 0]
        ios = self.size_bytes / self.bytes_per_io
        capped = 0.0
        if used and all(self.rate_bytes.get(d) for d in used):
            capped = self.size_bytes / sum(self.rate_bytes[d] for d in used)
        elif used and all(self.rate_iops.get(d) for d in used):
            capped = ios / sum(self.rate_iops[d] for d in used)
        paused = (math.floor(ios) // self.think_blocks) * self.think_s
        once = max(capped, paused)
        if once <= 0:
            return 0.0
        total = once * self.loops
        return min(total, self.runtime_s) if self.runtime_s else total

    def total_ios(self) -> float | None:
        if self.size_bytes is None:
            return None
        return self.size_bytes * self.numjobs / self.bytes_per_io

    def clone_file_bytes(self, clone: int) -> int | None:
        """The bytes of clone `clone`'s files: with filesize=, each of the nrfiles files at
        its filesize (the top of a range: at most); else its size, which fio divides
        between nrfiles files, each laid out from byte 0 to its start offset (offset= +
        clone x offset_increment=: filesetup.c setup_files, real_file_size = io_size +
        file_offset) plus its share. None when not known."""
        if self.layout_bytes is not None:
            return self.layout_bytes
        if self.size_bytes is None:
            return None
        start = self.offset_bytes + clone * self.offset_increment
        return self.size_bytes + max(self.nrfiles, 1) * start

    @property
    def file_bytes(self) -> int | None:
        """The bytes of the files the section lays out, over its numjobs clones
        (`clone_file_bytes`); None when not known."""
        sizes = [self.clone_file_bytes(k) for k in range(self.numjobs)]
        return None if None in sizes else sum(s for s in sizes if s is not None)


# ioping on a directory first writes its working-set file (-S, 1 MiB by default)
IOPING_WORKING_SET = 1024**2


def slot_file_bytes(payloads: Sequence[Mapping[str, Any]]) -> tuple[int, list[str]]:
    """(bytes of the files one slot lays out, what is not counted), from its workload
    payloads. A slot keeps every workload's fio files until it ends
    (iofleet/agent/target.py cleanup_target), all in one directory, where fio names a
    section's files after it and its clone (`randrw.0.0`): a later workload with a
    section of the same name reuses that clone's file, growing it to its own size. So
    each (section, clone) counts once, at its largest size over the workloads; plus
    IOPING_WORKING_SET per ioping workload. Apps bring their own trees: not counted,
    nor a section whose size is not known."""
    total, uncounted = 0, []
    clones: dict[tuple[str, int], int] = {}  # (section, clone) -> its largest bytes
    for p in payloads:
        if p["kind"] == "ioping":
            total += IOPING_WORKING_SET
        elif p["kind"] == "app":
            uncounted.append(f"app {p.get('name', '?')}")
        elif p["kind"] == "fio":
            try:
                profiles = job_profiles(str(p["name"]), p.get("params") or {})
            except (KeyError, OSError, ValueError):
                uncounted.append(f"fio job {p['name']}")
                continue
            for profile in profiles:
                if profile.file_bytes is None:
                    uncounted.append(f"fio job {p['name']} [{profile.job}] (size unknown)")
                    continue
                for clone in range(profile.numjobs):
                    key = (profile.job, clone)
                    clones[key] = max(clones.get(key, 0), profile.clone_file_bytes(clone) or 0)
    return total + sum(clones.values()), uncounted


# ----------------------------------------------------------------- fio job files

_DIRECTIONS = {
    "read": {"read": 1.0},
    "randread": {"read": 1.0},
    "write": {"write": 1.0},
    "randwrite": {"write": 1.0},
    "trim": {"trim": 1.0},
    "randtrim": {"trim": 1.0},
    # each block is trimmed, then written (fio's TD_DDIR_TRIMWRITE)
    "trimwrite": {"trim": 0.5, "write": 0.5},
    "randtrimwrite": {"trim": 0.5, "write": 0.5},
}
_MIXED = ("rw", "readwrite", "randrw")
_SLOTS = {"read": 0, "write": 1, "trim": 2}  # fio's read,write,trim value order
# block sizes fio draws from a range or a split: the bytes per I/O are not one figure
BLOCK_SIZE_SPREADS = ("bsrange", "bssplit", "bs_unaligned", "blockalign")


def parse_size(text: str, kb_base: int = 1024) -> int | None:
    """A fio size in bytes as fio reads it (jobtext.size_bytes: "4k" = 4096, "010" = 10,
    and with fio's default kb_base=1024 "4KiB" = 4000), None if fio would not read it as a
    size (or it is a percentage)."""
    try:
        return size_bytes(text, kb_base)
    except ValueError:
        return None


def parse_seconds(text: str) -> float | None:
    """A time with fio's units (seconds when bare), as fio reads it; None if it refuses it."""
    us = fio_time_us(text, is_seconds=True)
    return None if us is None else us / 1e6


def parse_job_text(text: str, env: Mapping[str, str], path: Path | None = None) -> list[JobProfile]:
    """The job sections of a fio job file, `${VAR}`s taken from `env` (`path`: the file the
    text is, for its includes). ValueError (one line) for what cannot be read."""
    where = str(path or Path("job.fio"))
    return _profiles(read_jobs(path or Path("job.fio"), env, fio_lines(text, where)))


def _profiles(jobs: list[Job]) -> list[JobProfile]:
    return [
        _profile(job, group)
        for group, sections in enumerate(stonewall_groups(jobs))
        for job in sections
    ]


def _read_share(job: Job) -> float:
    """rwmixread / rwmixwrite as fio applies them, in order (each sets both): the read %."""
    read = 50
    for a in job.assignments:
        if a.name not in ("rwmixread", "rwmixwrite") or a.value is None:
            continue
        if not a.known:
            raise ValueError(f"{a.name}={a.value}: the value is known only where fio runs")
        for text, _ in value_pieces(a.value):
            value = fio_size(text.split(",", 1)[0], a.kb_base)
            if isinstance(value, int):
                read = value if a.name == "rwmixread" else 100 - value
    return read


def _profile(job: Job, group: int) -> JobProfile:
    rw = job.last("rw")
    head = re.split(r"[,:]", rw.value or "", maxsplit=1)[0] if rw is not None else "read"
    if head in _DIRECTIONS:
        shares = dict(_DIRECTIONS[head])
    elif head in _MIXED:
        read_pct = _read_share(job)
        shares = {"read": read_pct / 100, "write": 1 - read_pct / 100}
        shares = {d: s for d, s in shares.items() if s > 0}
    else:
        raise ValueError(f"[{job.section.name}] rw={head}: not a direction fio knows")
    bs = job.numbers("bs", (4 * KIB, 4 * KIB, 4 * KIB))
    block_sizes: dict[str, int] = {}
    for d in shares:
        size = bs[_SLOTS[d]]
        if size is None or size <= 0:
            raise ValueError(f"[{job.section.name}] bs: the {d} block size is not known")
        block_sizes[d] = size
    rate_bytes: dict[str, float] = {}
    rate_iops: dict[str, float] = {}
    for key, target in (("rate", rate_bytes), ("rate_iops", rate_iops)):
        values = job.numbers(key, (0, 0, 0))
        for d in ("read", "write"):
            value = values[_SLOTS[d]]
            if value:
                target[d] = float(value)
    numjobs = job.number("numjobs", 1)
    if numjobs is None:
        raise ValueError(f"[{job.section.name}] numjobs: the value is known only where fio runs")
    amount = job.last_number("size")
    size = amount if isinstance(amount, int) and amount > 0 else None
    layout = None
    if job.last("filesize") is not None:  # files of their own size (FIO_OPT_STR_VAL: low, high)
        low, _, high = job.numbers("filesize", (None, None, None))  # high: the last piece
        nrfiles = job.number("nrfiles", 1)
        if high is None or nrfiles is None:
            raise ValueError(f"[{job.section.name}] filesize: the value is not known")
        layout = max(nrfiles, 1) * high
        if job.last("size") is None:  # fio's size is then the files' total
            size = layout if low == high else None
    offsets = []
    for option in ("offset", "offset_increment"):
        # a percentage is of the file's size, which a new file does not have yet (0); a
        # value known only where fio runs is left out as well
        start: int | Percent | None = job.last_number(option)
        offsets.append(start if isinstance(start, int) and start > 0 else 0)
    nrfiles_given = job.number("nrfiles", 1)
    loops = job.number("loops", 1)
    think = job.seconds("thinktime", is_seconds=False) or 0.0
    if job.last("thinktime_iotime") is not None and job.seconds("thinktime_iotime"):
        think = 0.0  # paced by I/O time, not by blocks: not counted
    think_blocks = job.number("thinktime_blocks", 1)
    return JobProfile(
        job=job.name,
        shares=shares,
        block_sizes=block_sizes,
        numjobs=max(numjobs, 1),
        runtime_s=job.seconds("runtime"),
        time_based=job.flag("time_based"),
        startdelay_s=job.seconds("startdelay") or 0.0,
        ramp_s=job.seconds("ramp_time") or 0.0,
        waits_for=_waits_for(job),
        io_limited=job.last("io_size") is not None or job.last("number_ios") is not None,
        size_bytes=size,
        rate_bytes=rate_bytes,
        rate_iops=rate_iops,
        group=group,
        layout_bytes=layout,
        offset_bytes=offsets[0],
        offset_increment=offsets[1],
        nrfiles=max(nrfiles_given or 1, 1),
        loops=max(loops or 1, 1),
        think_s=max(think, 0.0),
        think_blocks=max(think_blocks or 1, 1),
    )


def _waits_for(job: Job) -> str | None:
    a = job.last("wait_for")
    return a.value.strip() or None if a is not None and a.value is not None else None


def job_profiles(name: str, params: Mapping[str, object]) -> list[JobProfile]:
    """Profiles of a fio job from the library, with the workload's params applied."""
    from iofleet.plan.fiojobs import get_job, plan_env

    job = get_job(name)
    return _profiles(read_jobs(job.path, plan_env(job, params)))


# ---------------------------------------------------------------------- limits


@dataclass(frozen=True)
class Limit:
    """One dimension of one resource: a sustained rate, maybe a burst and a bucket."""

    source: str  # "volume" | "instance"
    unit: str  # "ops" (EBS I/O operations) | "bytes"
    sustained: float  # units per second
    burst: float | None = None
    bucket: float | None = None  # credits (units), None: no bucket
    io_unit: int | None = None  # for "ops": bytes per counted operation (256 KiB, 1 MiB)
    what: str = ""  # for messages, e.g. "gp2 burst bucket"
    # "read" | "write": the limit counts only that direction's I/O (no bucket then)
    direction: str | None = None
    # a limit of each client (instance), not of the shared resource: not split by fleet
    per_client: bool = False

    def for_profile(self, profile: JobProfile) -> Limit:
        """This limit in units of the job's own I/O (all directions): a directional limit
        caps the job at limit / (its share of the job's I/O); no share, no cap."""
        if self.direction is None:
            return self
        share = profile.shares.get(self.direction, 0.0)
        if share <= 0:
            return replace(self, sustained=math.inf, direction=None)
        own = share * self.cost(profile.block_sizes[self.direction])
        scale = self.cost(profile.bytes_per_io) / own
        return replace(self, sustained=self.sustained * scale, direction=None)

    def cost(self, block_size: float) -> float:
        """Units one job I/O of `block_size` bytes consumes."""
        if self.unit == "bytes":
            return block_size
        if self.io_unit is None:
            return 1.0
        return float(math.ceil(block_size / self.io_unit))


@dataclass
class Ceilings:
    limits: list[Limit]
    unknown: list[str]  # dimensions with no figure ("instance", "volume iops", ...)
    notes: list[str]


def _ebs_volume_limits(spec: StorageSpec) -> Ceilings:
    model = catalogue()["ebs"]["volume_types"][spec.type]
    size = float(spec.size_gib or 0)
    io_unit = int(model["io_unit_kib"]) * KIB
    kind = model["model"]
    limits: list[Limit] = []
    unknown: list[str] = []
    if kind == "iops-bucket":  # gp2
        baseline = min(
            max(model["baseline_iops_per_gib"] * size, model["baseline_iops_min"]),
            model["baseline_iops_max"],
        )
        burst = model["burst_iops"] if baseline < model["burst_iops"] else None
        limits.append(
            Limit(
                "volume",
                "ops",
                baseline,
                burst,
                model["bucket_credits"] if burst else None,
                io_unit,
                f"{spec.type} IOPS",
            )
        )
        mibps = next(
            t["mibps"]
            for t in model["throughput_mibps"]
            if t["max_size_gib"] is None or size <= t["max_size_gib"]
        )
        limits.append(Limit("volume", "bytes", mibps * MIB, what=f"{spec.type} throughput"))
    elif kind == "provisioned":  # gp3 io1 io2
        creation = _ebs_creation_limits().get(spec.type, {})
        iops = spec.iops
        if iops is None and creation.get("iops"):
            iops = creation["iops"]["min"]  # gp3 default
        mibps = spec.throughput_mibps
        if mibps is None and creation.get("throughput_mibps"):
            mibps = creation["throughput_mibps"]["min"]  # gp3 default
        if mibps is None:
            mibps = model.get("max_throughput_mibps")
        if iops is None:
            unknown.append("volume iops")
        else:
            limits.append(
                Limit("volume", "ops", float(iops), io_unit=io_unit, what=f"{spec.type} IOPS")
            )
        if mibps is None:
            unknown.append("volume throughput")
        else:
            limits.append(
                Limit("volume", "bytes", float(mibps) * MIB, what=f"{spec.type} throughput")
            )
    elif kind == "throughput-bucket":  # st1 sc1
        tib = size / 1024
        sustained = min(model["baseline_mibps_per_tib"] * tib, model["baseline_mibps_max"])
        burst = min(model["burst_mibps_per_tib"] * tib, model["burst_mibps_max"])
        limits.append(
            Limit(
                "volume",
                "bytes",
                sustained * MIB,
                burst * MIB if burst > sustained else None,
                model["bucket_mib_per_tib"] * tib * MIB if burst > sustained else None,
                what=f"{spec.type} throughput",
            )
        )
        limits.append(
            Limit(
                "volume", "ops", float(model["max_iops"]), io_unit=io_unit, what=f"{spec.type} IOPS"
            )
        )
    return Ceilings(limits, unknown, [])


def _efs_limits(spec: StorageSpec) -> Ceilings:
    efs = catalogue()["efs"]
    mode = spec.throughput_mode
    limits: list[Limit] = []
    unknown: list[str] = []
    notes: list[str] = []
    if mode is None:  # an existing file system: its modes are not known offline
        notes.append(
            "EFS file_system_id: its performance and throughput modes are not known offline"
        )
        return Ceilings([], ["file system iops", "file system throughput"], notes)
    if spec.performance_mode == "maxIO":
        unknown.append("file system iops")  # AWS publishes IOPS for General Purpose only
    else:
        iops = efs["general_purpose_iops"][mode]
        for direction in ("read", "write"):
            limits.append(
                Limit(
                    "volume",
                    "ops",
                    float(iops[direction]),
                    what=f"EFS {direction} IOPS ({mode})",
                    direction=direction,
                )
            )
    client = efs["per_client_mibps"].get(mode)
    if client is not None:
        limits.append(
            Limit(
                "volume",
                "bytes",
                float(client) * MIB,
                what=f"EFS per-client throughput ({mode})",
                per_client=True,
            )
        )
    if mode == "bursting":
        m = efs["throughput_modes"]["bursting"]
        gib = float(spec.size_gib or 0)
        if spec.size_gib is None:
            notes.append("EFS bursting: data stored unknown, taken as empty (baseline ~0)")
        tib = gib / 1024
        burst = max(m["burst_mibps_min"], m["burst_mibps_per_tib"] * tib) * MIB
        bucket = max(m["bucket_tib_min"], m["bucket_tib_per_tib"] * tib) * TIB_MIB * MIB
        limits.append(
            Limit(
                "volume",
                "bytes",
                m["baseline_kibps_per_gib"] * gib * KIB,
                burst,
                bucket,
                what="EFS throughput",
            )
        )
    elif mode == "provisioned" and spec.throughput_mibps:
        limits.append(
            Limit(
                "volume",
                "bytes",
                float(spec.throughput_mibps) * MIB,
                what="EFS provisioned throughput",
            )
        )
    else:
        unknown.append("file system throughput")
    return Ceilings(limits, unknown, notes)


def storage_ceilings(spec: StorageSpec, fleet_size: int = 1) -> Ceilings:
    """The storage's limits as seen by one slot (shared file systems split by fleet)."""
    if spec.is_ebs:
        ceilings = _ebs_volume_limits(spec)
    elif spec.type == "efs":
        ceilings = _efs_limits(spec)
    elif spec.type in ("fsx-openzfs", "fsx-lustre"):
        from iofleet.plan import fsx

        ceilings = (fsx.openzfs_ceilings if spec.type == "fsx-openzfs" else fsx.lustre_ceilings)(
            spec
        )
    elif spec.over_network:  # Mountpoint: the instance's network is the bound
        from iofleet.plan.mountpoint import request_rate_notes

        return Ceilings([], [], request_rate_notes(spec.type, fleet_size))
    else:
        return Ceilings([], ["storage"], [f"{spec.type} storage: no published ceiling"])
    if spec.is_shared and fleet_size > 1:
        ceilings.limits = [
            limit if limit.per_client else _split(limit, fleet_size) for limit in ceilings.limits
        ]
        ceilings.notes.append(
            f"{spec.type} is shared by {fleet_size} slots: per-slot ceilings are 1/{fleet_size}"
        )
    return ceilings


def _split(limit: Limit, n: int) -> Limit:
    return replace(
        limit,
        sustained=limit.sustained / n,
        burst=None if limit.burst is None else limit.burst / n,
        bucket=None if limit.bucket is None else limit.bucket / n,
    )


def instance_ceilings(instance_type: str, spec: StorageSpec) -> Ceilings:
    """The instance's limits for this storage: EBS-optimized for EBS, network otherwise."""
    if instance_type == "local":
        return Ceilings([], [], [])
    record = instance_ebs(instance_type)
    if record is None:
        return Ceilings(
            [],
            ["instance"],
            [
                f"instance type {instance_type} is not in the offline catalogue (instance_types.json)"
            ],
        )
    limits: list[Limit] = []
    unknown: list[str] = []
    if spec.is_ebs:
        ebs = record.get("ebs")
        if not ebs:
            return Ceilings([], ["instance"], [f"{instance_type} has no EBS-optimized figures"])
        seconds = catalogue()["instance_ebs_burst"]["burst_seconds"]
        for unit, base_key, max_key, scale in (
            ("ops", "baseline_iops", "maximum_iops", 1.0),
            ("bytes", "baseline_throughput_mbps", "maximum_throughput_mbps", 1e6),
        ):
            base, top = ebs.get(base_key), ebs.get(max_key)
            if base is None and top is None:
                unknown.append(f"instance {unit}")
                continue
            base = float(base if base is not None else top) * scale
            top = float(top if top is not None else base / scale) * scale
            bursts = top > base
            limits.append(
                Limit(
                    "instance",
                    unit,
                    base,
                    top if bursts else None,
                    (top - base) * seconds if bursts else None,
                    256 * KIB if unit == "ops" else None,
                    f"{instance_type} EBS {'IOPS' if unit == 'ops' else 'throughput'}",
                )
            )
    elif spec.over_network:
        network = record.get("network") or {}
        if network.get("baseline_gbit"):
            limits.append(
                Limit(
                    "instance",
                    "bytes",
                    float(network["baseline_gbit"]) * 1e9 / 8,
                    what=f"{instance_type} network baseline",
                )
            )
        else:
            unknown.append("instance network")
    return Ceilings(limits, unknown, [])


# ------------------------------------------------------------------ simulation


@dataclass
class Phase:
    start_s: float
    end_s: float | None  # None: lasts for the rest of the run
    iops: float  # job I/Os per second (all directions)
    limited_by: str
    binding: str  # the limit's `what`, or "job rate"


def simulate(
    limits: Sequence[Limit],
    block_size: float,
    demand_iops: float,
    balances: list[float],
) -> tuple[list[Phase], list[tuple[int, float]]]:
    """Phases of a job's rate from the given bucket balances (one per limit).

    Returns the phases and, for each bucket that empties, (limit index, time).
    `balances` is used as scratch space.
    """
    phases: list[Phase] = []
    emptied: list[tuple[int, float]] = []
    t = 0.0
    for _ in range(len(limits) + 2):
        best = demand_iops
        binding: tuple[str, str] = ("job-rate", "job rate")
        for i, limit in enumerate(limits):
            on_burst = limit.bucket is not None and limit.burst is not None and balances[i] > 0
            rate = limit.burst if on_burst else limit.sustained
            assert rate is not None
            cap = rate / limit.cost(block_size)
            if cap < best - 1e-9:
                best = cap
                label = limit.source
                if on_burst and limit.source == "volume":
                    label = "burst-bucket"
                what = limit.what
                if limit.bucket is not None:
                    what += " (burst)" if on_burst else " (baseline)"
                binding = (label, what)
        if math.isinf(best):
            return phases, emptied
        next_event: float | None = None
        event_index = -1
        for i, limit in enumerate(limits):
            if limit.bucket is None or limit.burst is None or balances[i] <= 0:
                continue
            net = best * limit.cost(block_size) - limit.sustained
            if net > 1e-9:
                dt = balances[i] / net
                if next_event is None or dt < next_event:
                    next_event, event_index = dt, i
        if next_event is None:
            phases.append(Phase(t, None, best, binding[0], binding[1]))
            return phases, emptied
        for i, limit in enumerate(limits):
            if limit.bucket is None or limit.burst is None or balances[i] <= 0:
                continue
            net = best * limit.cost(block_size) - limit.sustained
            balances[i] = min(limit.bucket, max(0.0, balances[i] - net * next_event))
        balances[event_index] = 0.0
        phases.append(Phase(t, t + next_event, best, binding[0], binding[1]))
        emptied.append((event_index, t + next_event))
        t += next_event
    return phases, emptied


def advance(
    limits: Sequence[Limit],
    block_size: float,
    phases: Sequence[Phase],
    balances: list[float],
    until_s: float | None,
) -> None:
    """Move bucket `balances` (in place) through `phases` up to `until_s`.

    Buckets drain at (rate - sustained) and refill, up to full, when the
    rate is below the sustained one. None: to the end of the last phase
    that has an end.
    """
    for phase in phases:
        end = phase.end_s
        if until_s is not None:
            end = until_s if end is None else min(end, until_s)
        if end is None or end <= phase.start_s:
            break
        span = end - phase.start_s
        for i, limit in enumerate(limits):
            if limit.bucket is None:
                continue
            net = phase.iops * limit.cost(block_size) - limit.sustained
            balances[i] = min(limit.bucket, max(0.0, balances[i] - net * span))


def window(
    phases: Sequence[Phase], runtime_s: float | None, total_ios: float | None
) -> float | None:
    """How long the job runs: its runtime, or sooner if it finishes its I/O."""
    if total_ios is None:
        return runtime_s
    done = 0.0
    for phase in phases:
        end = phase.end_s if phase.end_s is not None else math.inf
        if runtime_s is not None:
            end = min(end, runtime_s)
        span = end - phase.start_s
        if span <= 0:
            break
        if done + phase.iops * span >= total_ios:
            return phase.start_s + (total_ios - done) / phase.iops
        done += phase.iops * span
    return runtime_s


def average_iops(phases: Sequence[Phase], duration: float | None) -> float | None:
    if not phases:
        return None
    if duration is None or duration <= 0:
        return phases[0].iops
    total = 0.0
    for phase in phases:
        end = duration if phase.end_s is None else min(phase.end_s, duration)
        if end > phase.start_s:
            total += phase.iops * (end - phase.start_s)
    return total / duration


# ---------------------------------------------------------------- expectations


@dataclass
class CellContext:
    instance_type: str
    storage: StorageSpec
    fleet_size: int = 1
    burst_policy: str = "as-is"


def _fmt(value: float) -> str:
    return f"{value:,.0f}"


def expect_cell(
    ctx: CellContext, workloads: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[str], dict[str, float]]:
    """Per fio job and direction: expectations; plus the cell's warnings and timings.

    `workloads` are slot-payload workloads ({"kind": "fio", "name", "params"} ...);
    non-fio ones are skipped. Timings: seconds the agent spends on refill/drain
    waits ("burst_wait_s") and in fio ("fio_s"), for the cost estimate.
    """
    results, warnings, timings, _ = _expect_cell(ctx, workloads)
    return results, warnings, timings


def burst_actions(ctx: CellContext, workloads: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the agent does before each fio workload for `ctx.burst_policy`.

    One entry per fio workload that needs a wait: `{"workload_index", "action":
    "refill" | "drain", "seconds"}`; a drain also names the fio I/O that
    empties the bucket (`rw`, `bs`, `iodepth`): small random writes for an
    operations bucket, large sequential writes for a throughput bucket.
    Empty for `as-is` and for storage without a burst bucket.
    """
    return _expect_cell(ctx, workloads)[3]


def _expect_cell(
    ctx: CellContext, workloads: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[str], dict[str, float], list[dict[str, Any]]]:
    vol = storage_ceilings(ctx.storage, ctx.fleet_size)
    inst = instance_ceilings(ctx.instance_type, ctx.storage)
    limits = vol.limits + inst.limits
    unknown = vol.unknown + inst.unknown
    warnings = vol.notes + inst.notes
    balances = [limit.bucket or 0.0 for limit in limits]
    burst_wait = 0.0
    fio_time = 0.0
    results: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    for index, workload in enumerate(workloads):
        if workload.get("kind") != "fio":
            continue
        name = str(workload["name"])
        try:
            profiles = job_profiles(name, workload.get("params") or {})
        except (KeyError, OSError, ValueError):
            warnings.append(f"workloads[{index}]: fio job {name} could not be read")
            continue
        wait, unit = _apply_policy(ctx.burst_policy, limits, balances, profiles)
        burst_wait += wait
        if wait > 0:
            actions.append(_action(ctx.burst_policy, index, wait, unit))
        start = list(balances)
        end_balances: list[list[float]] = []
        group_time: dict[int, float] = {}
        for profile in profiles:
            bal = list(start)
            entries, duration, job_warnings = _expect_job(
                profile, limits, bal, unknown, ctx, index, name
            )
            end_balances.append(bal)
            results.extend(entries)
            warnings.extend(job_warnings)
            if duration is not None:
                group_time[profile.group] = max(group_time.get(profile.group, 0.0), duration)
        if len([p for p in profiles if p.group == 0]) > 1:
            warnings.append(
                f"workloads[{index}] {name}: its jobs run together and share the ceilings; "
                "each job's figure is its ceiling if it ran alone"
            )
        fio_time += sum(group_time.values())
        if end_balances:
            balances[:] = [min(b[i] for b in end_balances) for i in range(len(balances))]
    timings = {"burst_wait_s": burst_wait, "fio_s": fio_time}
    return results, warnings, timings, actions


def _action(policy: str, index: int, wait: float, unit: str) -> dict[str, Any]:
    action: dict[str, Any] = {
        "workload_index": index,
        "action": policy,
        "seconds": math.ceil(wait * 10) / 10,
    }
    if policy == "drain":
        if unit == "bytes":
            action.update(rw="write", bs="1m", iodepth=16)
        else:
            action.update(rw="randwrite", bs="16k", iodepth=32)
    return action


def _apply_policy(
    policy: str, limits: Sequence[Limit], balances: list[float], profiles: Sequence[JobProfile]
) -> tuple[float, str]:
    """Set bucket balances for the policy; seconds the agent waits for it, and
    the unit ("ops" | "bytes") of the bucket that takes longest."""
    wait, unit = 0.0, "ops"
    for i, limit in enumerate(limits):
        if limit.bucket is None or limit.burst is None:
            continue
        needed = 0.0
        if policy == "refill":
            if limit.sustained > 0:
                needed = (limit.bucket - balances[i]) / limit.sustained
            balances[i] = limit.bucket
        elif policy == "drain":
            net = limit.burst - limit.sustained
            if net > 0:
                needed = balances[i] / net
            balances[i] = 0.0
        if needed > wait:
            wait, unit = needed, limit.unit
    return wait, unit


def _expect_job(
    profile: JobProfile,
    limits: Sequence[Limit],
    balances: list[float],
    unknown: Sequence[str],
    ctx: CellContext,
    index: int,
    workload: str,
) -> tuple[list[dict[str, Any]], float | None, list[str]]:
    bpi = profile.bytes_per_io
    limits = [limit.for_profile(profile) for limit in limits]
    start = list(balances)
    phases, emptied = simulate(limits, bpi, profile.demand_iops(), list(start))
    duration = window(
        phases, profile.runtime_s, None if profile.time_based else profile.total_ios()
    )
    balances[:] = start
    advance(limits, bpi, phases, balances, duration)
    avg = average_iops(phases, duration)
    warnings: list[str] = []
    seconds_to_exhaust = emptied[0][1] if emptied else None
    burst_source = limits[emptied[0][0]].source if emptied else None
    if not phases:
        limited_by = "unknown"
    else:
        limited_by = _dominant(phases, duration)
        if unknown and limited_by != "job-rate":
            limited_by = "unknown"
    where = f"workloads[{index}] {workload} job {profile.job}"
    if seconds_to_exhaust is not None and phases:
        warnings.append(_burst_warning(where, limits[emptied[0][0]].what, phases, duration))
    if unknown:
        warnings.append(f"{where}: no figure for {', '.join(unknown)}: limited_by unknown")
    entries = []
    for direction, share in profile.shares.items():
        bs = profile.block_sizes[direction]
        iops = None if avg is None else avg * share
        entries.append(
            {
                "workload_index": index,
                "workload": workload,
                "job": profile.job,
                "direction": direction,
                "block_size": bs,
                "expected_iops": _round(iops),
                "expected_bw_bytes": None if iops is None else int(iops * bs),
                "limited_by": limited_by,
                "upper_bound": bool(unknown),
                "seconds_to_exhaust": _round(seconds_to_exhaust),
                "burst_source": burst_source,
                "runtime_s": _round(duration),
                "burst_policy": ctx.burst_policy,
                "phases": [
                    {
                        "from_s": _round(p.start_s),
                        "to_s": _round(p.end_s),
                        "iops": _round(p.iops * share),
                        "bw_bytes": int(p.iops * share * bs),
                        "limited_by": p.limited_by,
                        "limit": p.binding,
                    }
                    for p in phases
                ],
            }
        )
    return entries, duration, warnings


def _burst_warning(where: str, what: str, phases: Sequence[Phase], duration: float | None) -> str:
    burst, empties = phases[0].iops, phases[0].end_s or 0.0
    after = f"{_fmt(phases[1].iops)} IOPS" if len(phases) > 1 else "the baseline"
    lasts = f"the {what} burst lasts ~{_fmt(empties)} s at {_fmt(burst)} IOPS"
    if duration is None:
        return f"{where}: {lasts}, then {after}; the run length is unknown"
    if duration <= empties:
        return f"{where}: runs ~{_fmt(duration)} s and {lasts}: it measures the burst, not {after}"
    return f"{where}: runs ~{_fmt(duration)} s but {lasts}: the result mixes burst and {after}"


def _dominant(phases: Sequence[Phase], duration: float | None) -> str:
    """The limit that sets the rate for most of the run."""
    spans: dict[str, float] = {}
    for phase in phases:
        end = phase.end_s
        if duration is not None:
            end = duration if end is None else min(end, duration)
        if end is None:
            end = phase.start_s + 1.0  # the steady phase of an open-ended run
        if end > phase.start_s:
            spans[phase.limited_by] = spans.get(phase.limited_by, 0.0) + end - phase.start_s
    if not spans:
        return phases[0].limited_by
    return max(spans, key=lambda k: spans[k])


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
