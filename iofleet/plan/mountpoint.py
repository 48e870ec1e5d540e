"""Which workloads can run on Mountpoint for Amazon S3, derived from what they do.

Mountpoint (https://github.com/awslabs/mountpoint-s3, doc/SEMANTICS.md) maps files
to S3 objects: it reads existing objects (sequentially or at random), and writes
*new* files sequentially from offset 0 by one writer; it refuses writes at any
other offset ("out of order write"), opening an existing file for writing (even
with --allow-overwrite, only O_TRUNC is allowed; iofleet does not pass it),
`fallocate`, a size change other than O_TRUNC, rename, links, O_TMPFILE, and
writing after `fsync`. A file handle is used for reads or for writes, never both.

The rules below come from the options of each fio job section (with the [global]
options in force where it starts, `${VAR}` expanded with the workload's
parameters), so a user's own job file in the library gets the same check as
ours. fio's own behaviour they rely on (fio 3.x, filesetup.c / backend.c):

- a job that reads a file that does not exist yet (or is smaller than `size`)
  has fio *lay it out* first: unlink, create, `ftruncate` to the size, write it;
  Mountpoint cannot `ftruncate` to a size, so a read needs its files written by
  an earlier section of the same file (stonewall / wait_for) with
  `create_serialize=0` (else fio lays out every job's files before any job runs)
  and the same `filename_format`;
- a write job without `create_on_open=1` creates its file in that layout step,
  closes it and reopens it for writing without O_TRUNC: refused by Mountpoint;
- `time_based` (or `loops` > 1) writes start again at offset 0 when they reach
  `size`: an overwrite;
- an asynchronous engine with `iodepth` > 1 can hand writes to FUSE out of order.

ioping is refused (it opens its work file with O_TMPFILE and reads it through the
descriptor it wrote it with), and so are app presets unless apps.json says
`"mountpoint": true` (builds rename, overwrite and link files), and every inline app.

Stdlib only (the plan Lambda imports it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from iofleet.plan.jobtext import Job, JobTextError, Percent, fio_lines, read_jobs
from iofleet.quote import quote

# The matrix storage types served through Mountpoint (iofleet/plan/matrix.py).
MOUNTPOINT_TYPES = ("s3-mountpoint", "s3express-mountpoint")

READS = frozenset({"read", "randread"})
SEQUENTIAL_WRITE = "write"
# every other direction writes at random offsets, trims, or mixes reads and writes in a file
_SYNC_ENGINES = frozenset({"sync", "psync", "vsync", "pvsync", "pvsync2"})


def _flag(job: Job, name: str) -> bool:
    """A fio boolean or set option as fio reads it: given without a value, or non-zero."""
    return job.flag(name)


def _number(job: Job, name: str, default: int) -> int | None:
    """An integer option as fio reads it (jobtext: `010` is 10, `1k` 1024); None if unknown."""
    return job.number(name, default)


def _text(job: Job, name: str, default: str = "") -> str:
    last = job.last(name)
    return default if last is None or last.value is None else last.value


def _direction(job: Job) -> tuple[str, str]:
    """(rw without its `:N` modifier, the modifier)."""
    value = _text(job, "rw", "read")
    base, _, modifier = value.partition(":")
    return base.split(",", 1)[0], modifier


def _starts_after(job: Job, earlier: Iterable[str]) -> bool:
    """The section waits for the earlier ones (a stonewall, new_group is not enough)."""
    if _flag(job, "stonewall"):  # wait_for_previous is its alias
        return True
    wait_for = _text(job, "wait_for")
    return bool(wait_for) and wait_for in set(earlier)


def _write_problem(job: Job) -> str | None:
    if _direction(job)[1]:
        return "rw=write:N leaves holes (writes past the end of the file)"
    if _flag(job, "time_based"):
        return (
            "time_based writes start again at offset 0 when they reach size: an overwrite "
            "Mountpoint refuses (drop time_based, size the file for the run)"
        )
    loops = _number(job, "loops", 1)
    if loops is None or loops > 1:
        return "loops > 1 writes the file again from offset 0: an overwrite"
    if not _flag(job, "create_on_open"):
        return (
            "fio creates the file in its layout step and reopens it for writing without "
            "O_TRUNC, which Mountpoint refuses (set create_on_open=1)"
        )
    for name in ("overwrite", "file_append"):
        if _flag(job, name):
            return f"{name}=1 writes into an existing file"
    if job.last("offset") is not None and job.last_number("offset") not in (0, Percent(0)):
        return "offset= starts writing past the beginning of the file"
    for name in ("fsync", "fdatasync"):
        value = _number(job, name, 0)
        if value is None or value > 0:
            return f"{name}= every N writes: Mountpoint ends the upload at fsync, later writes fail"
    engine = _text(job, "ioengine", "psync")
    depth = _number(job, "iodepth", 1)
    if engine not in _SYNC_ENGINES and (depth is None or depth > 1):
        return (
            f"ioengine={engine} with iodepth={_text(job, 'iodepth')} can reach Mountpoint out "
            "of order; writes must be sequential (a sync engine, or iodepth=1)"
        )
    return None


def fio_section_problems(jobs: list[Job]) -> list[str]:
    """One message per fio job section that Mountpoint cannot run, `[section] why`."""
    problems: list[str] = []
    writers: dict[str, Job] = {}  # compatible sequential writers so far
    for job in jobs:
        name = job.section.name
        base, _ = _direction(job)
        if base == SEQUENTIAL_WRITE:
            why = _write_problem(job)
            if why:
                problems.append(f"[{name}] {why}")
            else:
                writers[name] = job
            continue
        if base not in READS:
            problems.append(
                f"[{name}] rw={base} writes at random offsets or into existing files; "
                "Mountpoint writes new files sequentially, from the start, only"
            )
            continue
        problems += [f"[{name}] {why}" for why in _read_problems(job, writers)]
    return problems


def _read_problems(job: Job, writers: Mapping[str, Job]) -> list[str]:
    layout = (
        "fio lays a file out before reading it (ftruncate to size, then writes), and "
        "Mountpoint cannot ftruncate"
    )
    if not writers:
        return [f"{layout}: write the files in an earlier section of the same job file"]
    fmt = _text(job, "filename_format")
    same = [w for w, o in writers.items() if fmt and _text(o, "filename_format") == fmt]
    if not same:
        return [
            f"{layout}: the reader must read the files an earlier writer section made "
            "(the same filename_format in both)"
        ]
    if not _starts_after(job, writers):
        return [f"{layout}: the reader must start after its writer (stonewall or wait_for)"]
    if _flag(job, "create_serialize") or job.last("create_serialize") is None:
        return [
            f"{layout}: with create_serialize (fio's default) every job's files are laid "
            "out before any job runs; set create_serialize=0"
        ]
    if any(_flag(writers[w], "unlink") for w in same):
        return ["the writer section deletes its files (unlink=1) before the reader runs"]
    return _coverage_problems(job, [writers[w] for w in same])


def _size(job: Job) -> int | None:
    """The job's size= in bytes as fio reads it; None if not given, unknown or a share."""
    value = job.last_number("size")
    return value if isinstance(value, int) and value >= 0 else None


def _coverage_problems(job: Job, writers: list[Job]) -> list[str]:
    """The reader's files must all exist at full size: no more clones or files, no larger size
    than a writer made (else fio lays the missing or short ones out)."""

    def counts(o: Job) -> tuple[int | None, int | None, int | None]:
        return _number(o, "numjobs", 1), _number(o, "nrfiles", 1), _size(o)

    jobs, files, size = counts(job)
    for writer in writers:
        w_jobs, w_files, w_size = counts(writer)
        if None in (jobs, files, size, w_jobs, w_files, w_size):
            continue
        assert jobs is not None and files is not None and size is not None
        assert w_jobs is not None and w_files is not None and w_size is not None
        # fio divides a job's size between its files: each file is size / nrfiles
        if (
            jobs <= w_jobs
            and files <= w_files
            and size // max(files, 1) <= w_size // max(w_files, 1)
        ):
            return []
    return [
        "the reader needs more or larger files (numjobs, nrfiles, size) than its writer "
        "made; fio would lay the rest out"
    ]


def fio_job_problems(text: str, env: Mapping[str, str], path: Path | None = None) -> list[str]:
    """Problems of a job file's text (its `${VAR}`s from `env`) on Mountpoint; `path` is the
    file the text is (its includes are relative to it)."""
    try:
        where = str(path or Path("job.fio"))
        jobs = read_jobs(path or Path("job.fio"), env, fio_lines(text, where))
    except JobTextError as exc:
        return [str(exc)]
    return fio_section_problems(jobs)


def fio_workload_problems(job_name: str, params: Mapping[str, object]) -> list[str]:
    """Problems of library job `job_name` with `params` on Mountpoint ([] if it can run)."""
    from iofleet.plan.fiojobs import TARGET_PARAM, get_job, plan_env

    job = get_job(job_name)
    env = plan_env(job, params)
    env[TARGET_PARAM] = "/mnt/iofleet"
    return fio_job_problems(job.path.read_bytes().decode("utf-8"), env, job.path)


IOPING_PROBLEM = (
    "ioping opens its work file with O_TMPFILE and reads it through the descriptor it "
    "wrote it with; Mountpoint supports neither"
)
INLINE_APP_PROBLEM = (
    "an inline app is taken to need POSIX file semantics (rename, overwrite, links), "
    "which Mountpoint does not have; use a preset marked for Mountpoint"
)


def _storage_names(matrix: Any) -> list[tuple[int, str]]:
    return [(i, s.label) for i, s in enumerate(matrix.storage) if s.type in MOUNTPOINT_TYPES]


def matrix_problems(matrix: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """(path, message) for every workload of `matrix` that a Mountpoint storage of it
    cannot run. Every cell runs every workload, so one such pair refuses the matrix."""
    from iofleet.plan.apps import get_preset
    from iofleet.plan.matrix import AppWorkload, FioWorkload, IopingWorkload

    mounts = _storage_names(matrix)
    if not mounts:
        return []
    index, label = mounts[0]
    where = f"on Mountpoint storage[{index}] ({quote(label)})"
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for i, w in enumerate(matrix.workloads):
        if isinstance(w, FioWorkload):
            try:
                found = fio_workload_problems(w.fio, w.params)
            except KeyError:
                continue  # an unknown job is reported by the matrix validation
            if found:
                problems.append(
                    (("workloads", i, "fio"), f"job {quote(w.fio)} cannot run {where}: {found[0]}")
                )
        elif isinstance(w, IopingWorkload):
            problems.append((("workloads", i, "ioping"), f"cannot run {where}: {IOPING_PROBLEM}"))
        elif isinstance(w, AppWorkload):
            if not isinstance(w.app, str):
                problems.append(
                    (("workloads", i, "app"), f"cannot run {where}: {INLINE_APP_PROBLEM}")
                )
                continue
            try:
                spec = get_preset(w.app)
            except KeyError:
                continue
            if not spec.mountpoint:
                why = spec.mountpoint_note or "it needs POSIX file semantics"
                problems.append(
                    (
                        ("workloads", i, "app"),
                        f"preset {quote(spec.name)} cannot run {where}: {why}",
                    )
                )
    return problems


def request_rate_notes(storage_type: str, fleet_size: int) -> list[str]:
    """What bounds a Mountpoint cell besides each instance's network (docs/expectations.md).

    Not turned into IOPS ceilings: Mountpoint coalesces sequential I/O into large ranged
    GETs and multipart parts (8 MiB by default), so requests per fio I/O are not fixed."""
    if storage_type == "s3express-mountpoint":
        return [
            "S3 Express One Zone directory bucket: per-bucket request rates far above one "
            "fleet's (no per-prefix partitioning); the instance network is the expected bound"
        ]
    return [
        "S3 general purpose bucket: 3,500 PUT and 5,500 GET requests per second per prefix; "
        f"each of the {fleet_size} slots writes under its own prefix, so the instance network "
        "is the expected bound (a new bucket scales its prefixes gradually: 503 SlowDown is "
        "possible early)"
    ]


_AZ_ID = re.compile(r"^[a-z]{2,5}[0-9]{0,2}-az[0-9]{1,2}$")


def az_id_problem(value: str) -> str | None:
    if not _AZ_ID.fullmatch(value):
        return f"must be an Availability Zone ID like use1-az4, got {quote(value)}"
    return None


# The zones that offer S3 Express One Zone, per Region, as the S3 User Guide lists them
# ("S3 Express One Zone Availability Zones and Regions",
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-Endpoints.html, read
# 2026-11-23). AWS adds zones and Regions over time, so a zone missing here is a warning
# at plan time (CreateBucket is what refuses it on AWS), never a refusal.
EXPRESS_ZONES_SOURCE = (
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-Endpoints.html"
)
EXPRESS_ZONES: dict[str, tuple[str, ...]] = {
    "us-east-1": ("use1-az4", "use1-az5", "use1-az6"),
    "us-east-2": ("use2-az1", "use2-az2"),
    "us-west-2": ("usw2-az1", "usw2-az3", "usw2-az4"),
    "ap-south-1": ("aps1-az1", "aps1-az3"),
    "ap-northeast-1": ("apne1-az1", "apne1-az4"),
    "eu-west-1": ("euw1-az1", "euw1-az3"),
    "eu-north-1": ("eun1-az1", "eun1-az2", "eun1-az3"),
}


def express_zone_warnings(az_id: str | None, region: str) -> list[str]:
    """Plan warnings for an S3 Express One Zone cell's zone in `region` (EXPRESS_ZONES)."""
    zones = EXPRESS_ZONES.get(region)
    listed = f"the S3 User Guide's zone list ({EXPRESS_ZONES_SOURCE})"
    if zones is None:
        return [
            f"S3 Express One Zone is not listed for {region} in {listed}: "
            "CreateBucket fails in PrepareCell if it is still not offered there"
        ]
    prefix = zones[0].rsplit("-az", 1)[0]
    if az_id is None:
        return [
            f"the directory bucket goes in the zone of the stack's first subnet: S3 Express "
            f"One Zone is offered in {region} only in {', '.join(zones)} ({listed}); set "
            "az_id to one of them if that subnet is elsewhere"
        ]
    if not az_id.startswith(prefix + "-az"):
        return [
            f"az_id {az_id} is not a zone of {region} (its zones are {prefix}-azN): "
            "CreateBucket fails in PrepareCell"
        ]
    if az_id not in zones:
        return [
            f"az_id {az_id} does not offer S3 Express One Zone in {listed}, which lists "
            f"{', '.join(zones)} for {region}: CreateBucket fails in PrepareCell unless "
            "AWS has added it since"
        ]
    return []


# --------------------------------------------------------------------------- cost

# Mountpoint's default part size: a write goes up as multipart parts of 8 MiB, a read
# as ranged GETs of 8 MiB (its docs, CONFIGURATION.md "--write-part-size", "--read-part-size").
PART_BYTES = 8 * 1024 * 1024
GIB = 1024**3


def fio_traffic(payloads: Iterable[Mapping[str, Any]]) -> tuple[int, int, int, list[str]]:
    """(bytes written, bytes read, files written, notes) by one slot's fio workloads: each
    section's size x numjobs (fio divides a job's size between its nrfiles files),
    written once and read once (the jobs Mountpoint can run are size-based), and
    numjobs x nrfiles files; what cannot be counted is named in the notes."""
    from iofleet.plan.fiojobs import TARGET_PARAM, get_job

    written = read = files = 0
    notes: list[str] = []
    for p in payloads:
        if p.get("kind") != "fio":
            continue
        job = get_job(str(p["name"]))
        env = {**job.params, **{str(k).upper(): str(v) for k, v in p.get("params", {}).items()}}
        env[TARGET_PARAM] = "/mnt/iofleet"
        try:
            jobs = read_jobs(job.path, env)
        except JobTextError:
            notes.append(f"{p['name']}: job file not readable: bytes not countable")
            continue
        for section in jobs:
            name = section.section.name
            size = _size(section)
            if size is None:
                notes.append(f"{p['name']} [{name}]: size not countable")
                continue
            if section.last("filesize") is not None:  # files of their own size: not counted
                notes.append(f"{p['name']} [{name}]: filesize set: bytes not countable")
                continue
            jobs_n = _number(section, "numjobs", 1) or 1
            base, _ = _direction(section)
            if base == SEQUENTIAL_WRITE:
                written += size * jobs_n
                files += jobs_n * (_number(section, "nrfiles", 1) or 1)
            elif base in READS:
                read += size * jobs_n
    return written, read, files, notes


def add_cost(
    est: Any,
    storage_type: str,
    payloads: list[Mapping[str, Any]],
    fleet_size: int,
    slot_seconds: float,
    prices: Mapping[str, Any],
) -> None:
    """Add a Mountpoint cell's S3 charges to `est` (iofleet.plan.cost.Estimate): storage
    GB-months prorated for the slot (the objects live until the cell's cleanup), PUT-class
    requests (per file CreateMultipartUpload + CompleteMultipartUpload + one UploadPart per
    8 MiB), GET requests (one per 8 MiB read), and for Express the per-GB upload and
    retrieval charges. Estimated from the fio sections' sizes; LIST/HEAD are left out."""
    written, read, files, notes = fio_traffic(payloads)
    est.unknown.extend(notes)
    express = storage_type == "s3express-mountpoint"
    table = prices.get("s3express" if express else "s3")
    what = "s3 express one zone" if express else "s3 standard"
    if not table:
        est.unknown.append(f"{what} prices for this region")
        return
    parts_written = -(-written // PART_BYTES) + 2 * files
    gets = -(-read // PART_BYTES)
    months = slot_seconds / 3600.0 / 730.0
    gib_written = written / GIB * fleet_size
    storage_key = "gib_month" if express else "standard_gib_month"
    est.add(f"{what} storage", gib_written * months, "GiB-months", table.get(storage_key))
    est.add(
        f"{what} PUT requests",
        parts_written * fleet_size / 1000.0,
        "1,000 requests",
        table.get("put_per_1000"),
    )
    est.add(
        f"{what} GET requests",
        gets * fleet_size / 1000.0,
        "1,000 requests",
        table.get("get_per_1000"),
    )
    if express:
        est.add(f"{what} upload", gib_written, "GiB", table.get("upload_gib"))
        # retrieval is charged on the part of each request beyond 512 KiB
        est.add(
            f"{what} retrieval",
            max(0.0, read - gets * 512 * 1024) / GIB * fleet_size,
            "GiB",
            table.get("retrieval_gib"),
        )
