"""The fio job library: `fio-jobs/*.fio` loaded, validated and rendered into a command.

A job file is plain fio syntax with `${VAR}` parameters (fio expands environment
variables itself). Its header declares the description and every parameter:

    ; One-line description
    ; @param RUNTIME:duration=180   seconds of timed I/O
    ; @param NUM_JOBS:int(1..1024)=16   parallel processes

Every parameter but TARGET declares a type (`int`, `size`, `rate`, `duration`,
`bool`, `percent`), optionally with a range; a workload's value must parse as that
type and fall in that range, so a value fio cannot run (0 jobs, a negative runtime,
a path, "nan") is refused before any instance starts.

The format is documented in `fio-jobs/README.md`. Stdlib only: the agent imports
this module on a bare instance.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import iofleet
from iofleet.plan.fioopts import canonical_names
from iofleet.plan.jobtext import (
    Assignment,
    Job,
    JobTextError,
    Percent,
    fio_int,
    fio_lines,
    fio_size,
    has_keyword,
    read_jobs,
    read_sections,
    reporting_groups,
    size_bytes,
    split_option,
    stonewall_groups,
    strip_line,
    value_pieces,
)
from iofleet.quote import clip, quote

SUFFIX = ".fio"
# Set by render_command from the slot's target, never from a workload's params.
TARGET_PARAM = "TARGET"
# Values are put into the job text fio reads (render_job), never through a shell: plain
# tokens, so a value makes no new comment, variable, section or line.
_VALUE_RE = re.compile(r"[A-Za-z0-9._:/,+-]+\Z")
# fio splits `directory=` on ':' (several directories), so a target can't hold one.
_TARGET_RE = re.compile(r"[A-Za-z0-9._/+-]+\Z")
# A job's name is the matrix's `fio`, the agent's payload name (agent.payload.SAFE_ID)
# and part of its artifact's file name (`w00-fio-NAME.json`, read back by the ingest):
# the same characters everywhere, or the plan passes a name every slot then refuses
JOB_NAME_MAX = 128
_JOB_NAME_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{JOB_NAME_MAX - 1}}}\Z")
_PARAM_RE = re.compile(
    r"[;#]\s*@param\s+(?P<name>[^\s:=]+)(?::(?P<type>[a-z]+)(?:\((?P<lo>[0-9]*)\.\.(?P<hi>[0-9]*)\))?)?"
    r"=(?P<default>\S*)(?:\s+(?P<help>.*))?"
)
# at most 64 characters: the agent's payload takes no longer parameter name
_NAME_RE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
# iofleet puts a job's parameters into the job text (render_job): fio's environment never
# holds them. But a job file is plain fio, and run by hand (`TARGET=/mnt/x fio job.fio`)
# fio takes them from its environment: a parameter may not be a variable something in
# fio's process reads there. The dynamic loader's and glibc's (glibc's "unsecure" list,
# which it drops for setuid programs, and the locale's), the shell's and the system's,
# and fio's and iofleet's own (by prefix). Until decision 88 this list was all that kept
# a name such as LD_PRELOAD out of fio's process run by iofleet.
_ENVIRONMENT_PREFIXES = (
    "LD_", "LC_", "MALLOC_", "GLIBC_", "FIO", "IOFLEET", "PYTHON", "GNUTLS_", "OPENSSL_",
    "SSL_", "NSS_", "KRB5", "GCONV_", "XDG_",
)  # fmt: skip
_ENVIRONMENT_NAMES = frozenset(
    {
        "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH",
        "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZ", "TZDIR", "LANG",
        "LANGUAGE", "PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "IFS", "CDPATH", "USER",
        "LOGNAME", "PWD", "OLDPWD", "TERM", "POSIXLY_CORRECT", "TMP", "TEMP",
    }
)  # fmt: skip


def _environment_name(name: str) -> bool:
    return name in _ENVIRONMENT_NAMES or name.startswith(_ENVIRONMENT_PREFIXES)


def _runs_bc(text: str) -> bool:
    """fio's keyword pass (options.c fio_keyword_replace -> bc_calc): an option holding
    $ncpus, $mb_memory or $pagesize and any of + - * / (after its ${VAR}s are put in; a
    value may hold '/', '+' or '-', so any ${...} counts) is handed to `sh -c "echo ... |
    bc"`, and whatever bc prints (`print "/any/path"`) becomes the value, after every
    check here. fio skips bc when the text holds a quote; refused all the same."""
    return has_keyword(text) and (any(c in text for c in "+-*/") or "${" in text)


def _unsafe_job_name(name: str) -> bool:
    """A job name (a section's, or `name=`) fio would put files outside the target with:
    fio names a job's files after it, and `$jobname` in filename_format is it, before
    fio's other keywords there (`[.$clientuid.]` became `..`)."""
    return "/" in name or "$" in name or not name.strip(".")


_VAR_RE = re.compile(r"\$\{([^}]*)\}")


class JobFileError(ValueError):
    """A job file in the library is malformed; the message is one line."""


# fio's number syntax (fio(1) "Parameter types"): sizes take k/m/g/t/p with optional
# "i" or "b" (base 1024) or "ib" (base 1000: fio's default kb_base inverts the IEC
# prefixes, checked with fio 3.33: size=4kib makes a 4000-byte file); times take
# us/ms/s/m/h/d (seconds if bare).
_PARAM_SIZE_RE = re.compile(r"(?P<n>[0-9]{1,15})(?:(?P<unit>[kmgtp])(?P<suffix>ib|i|b)?|b)?", re.I)
_PARAM_TIME_RE = re.compile(r"(?P<n>[0-9]{1,15})(?P<unit>us|ms|s|m|h|d)?", re.I)
_PARAM_INT_RE = re.compile(r"[0-9]{1,15}")
_SIZE_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_SECONDS = {"": 1.0, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_TIB = 1 << 40
WEEK_S = 7 * 24 * 3600


@dataclass(frozen=True)
class ParamType:
    """What a parameter's value must be: `kind` parsed into base units, in [lo, hi].

    int: a count; size: bytes; rate: bytes per second; duration: seconds;
    bool: 0 or 1; percent: 0-100.
    """

    kind: str
    lo: float
    hi: float

    def parse(self, text: str) -> float | None:
        """The value in base units, or None if `text` is not of this kind."""
        if self.kind in ("int", "percent", "bool"):
            return float(text) if _PARAM_INT_RE.fullmatch(text) else None
        if self.kind in ("size", "rate"):
            if not _PARAM_SIZE_RE.fullmatch(text):
                return None
            return float(size_bytes(text))  # fio's reading: 4kib is 4000, 010 is 10
        m = _PARAM_TIME_RE.fullmatch(text)
        return float(m["n"]) * _SECONDS[(m["unit"] or "").lower()] if m else None

    def describe(self) -> str:
        what = {
            "int": "an integer",
            "percent": "a percentage",
            "bool": "0 or 1",
            "size": "a size (bytes, or with fio's units k m g t p)",
            "rate": "a rate in bytes/s (or with fio's units k m g t)",
            "duration": "a duration (seconds, or with fio's units us ms s m h d)",
        }[self.kind]
        if self.kind == "bool":
            return what
        return f"{what} from {_human(self.kind, self.lo)} to {_human(self.kind, self.hi)}"

    def problem(self, text: str) -> str | None:
        value = self.parse(text)
        if value is None or math.isnan(value):
            return f"must be {self.describe()}, got {quote(text)}"
        if not self.lo <= value <= self.hi:
            return f"must be {self.describe()}, got {quote(text)}"
        return None


def _human(kind: str, value: float) -> str:
    if kind in ("size", "rate"):
        for unit in ("p", "t", "g", "m", "k"):
            if value >= _SIZE_MULT[unit] and value % _SIZE_MULT[unit] == 0:
                return f"{int(value // _SIZE_MULT[unit])}{unit}"
    if kind == "duration":
        for unit, secs in (("d", 86400), ("h", 3600), ("m", 60)):
            if value >= secs and value % secs == 0:
                return f"{int(value // secs)}{unit}"
        return f"{value:g}s"
    return f"{value:g}"


# kind -> (lo, hi) when the header gives no range: positive, within what a slot can run
_TYPE_DEFAULTS: dict[str, tuple[float, float]] = {
    "int": (1, 65536),
    "percent": (0, 100),
    "bool": (0, 1),
    "size": (1, 64 * _TIB),  # the largest EBS volume
    "rate": (1, 1 << 40),  # 1 TiB/s per job
    "duration": (1, WEEK_S),  # iofleet.plan.matrix.MAX_SLOT_TIMEOUT_S
}
PARAM_TYPES = tuple(_TYPE_DEFAULTS)


def _param_type(kind: str, lo: str | None, hi: str | None) -> ParamType:
    default_lo, default_hi = _TYPE_DEFAULTS[kind]
    return ParamType(
        kind,
        float(lo) if lo else default_lo,
        float(hi) if hi else default_hi,
    )


@dataclass(frozen=True)
class JobFile:
    name: str
    description: str
    path: Path
    params: dict[str, str]  # ${VAR} name (UPPER) -> default, in declaration order
    param_help: dict[str, str] = field(default_factory=dict)
    param_types: dict[str, ParamType] = field(default_factory=dict)  # every param but TARGET
    # the lines as the loader read and checked them, includes put in: what `render_job`
    # gives fio
    lines: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def text(self) -> str:
        """The job as fio is given it before its parameters go in: the checked lines,
        includes put in, each ended by '\n' (for a job with no `include` whose lines end
        in '\n', the file's own bytes)."""
        return "".join(line + "\n" for line in self.lines)

    @property
    def text_sha256(self) -> str:
        """sha256 of `text`, hex: what a plan records for each fio workload, a matrix may
        pin (`job_sha256`) and the agent checks before it runs the job (decision 95)."""
        import hashlib

        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "sha256": self.text_sha256,
            "params": dict(self.params),
            "param_help": dict(self.param_help),
            "param_types": {k: t.describe() for k, t in self.param_types.items()},
        }


def jobs_dir() -> Path:
    """`$IOFLEET_FIO_JOBS`, else `fio-jobs/` next to the iofleet package."""
    override = os.environ.get("IOFLEET_FIO_JOBS")
    if override:
        return Path(override)
    return Path(iofleet.__file__).resolve().parents[1] / "fio-jobs"


def load_job_file(path: Path) -> JobFile:
    """Parse and validate one job file's header against the `${VAR}`s it uses."""
    try:
        lines = fio_lines(path.read_bytes().decode("utf-8"), str(path))  # '\r' kept
    except JobTextError as exc:
        raise JobFileError(str(exc)) from None
    except OSError as exc:
        raise JobFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise JobFileError(f"{path}: not UTF-8 (byte offset {exc.start})") from None
    first = lines[0] if lines else ""
    if not first.startswith(";") or not first[1:].strip() or "@param" in first:
        raise JobFileError(f"{path}: line 1 must be '; <one-line description>'")
    description = lines[0][1:].strip()
    params: dict[str, str] = {}
    param_help: dict[str, str] = {}
    param_types: dict[str, ParamType] = {}
    used: list[str] = []
    has_target_dir = False
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if stripped.startswith((";", "#")):
            if "@param" not in stripped:
                continue
            match = _PARAM_RE.fullmatch(stripped)
            if not match:
                raise JobFileError(
                    f"{path}:{number}: expected '; @param NAME:TYPE=default  help' "
                    "(or '; @param NAME=default  help')"
                )
            name, default, kind = match["name"], match["default"], match["type"]
            if not _NAME_RE.fullmatch(name):
                raise JobFileError(
                    f"{path}:{number}: parameter {quote(name)} must be UPPER_CASE, at most 64 "
                    "characters"
                )
            if _environment_name(name):
                raise JobFileError(
                    f"{path}:{number}: parameter {name} is an environment variable the C "
                    "library, the dynamic loader or fio reads (a job file run by hand with "
                    "plain fio takes its parameters from the environment): choose another name"
                )
            if name in params:
                raise JobFileError(f"{path}:{number}: parameter {name} declared twice")
            if not _VALUE_RE.fullmatch(default):
                raise JobFileError(
                    f"{path}:{number}: default {quote(default)} is not a plain token"
                )
            if name != TARGET_PARAM:
                if kind is None:
                    raise JobFileError(
                        f"{path}:{number}: parameter {name} needs a type: "
                        f"'; @param {name}:TYPE=default' ({', '.join(PARAM_TYPES)})"
                    )
                if kind not in _TYPE_DEFAULTS:
                    raise JobFileError(
                        f"{path}:{number}: unknown type {quote(kind)} ({', '.join(PARAM_TYPES)})"
                    )
                ptype = _param_type(kind, match["lo"], match["hi"])
                if ptype.lo > ptype.hi:
                    raise JobFileError(f"{path}:{number}: empty range for {name}")
                bad_default = ptype.problem(default)
                if bad_default:
                    raise JobFileError(f"{path}:{number}: default of {name} {bad_default}")
                param_types[name] = ptype
            elif kind is not None:
                raise JobFileError(
                    f"{path}:{number}: {TARGET_PARAM} takes no type (the agent sets it)"
                )
            params[name] = default
            param_help[name] = (match["help"] or "").strip()
            continue
    # the options as fio reads them (jobtext: comments, `key = value` spacing), includes
    # only from beside the job file, and the text fio will be given, includes put in
    flat: list[str] = []
    try:
        sections = read_sections(path, lines, includes="beside", flat=flat)
    except JobTextError as exc:
        raise JobFileError(str(exc)) from None
    names = canonical_names()
    in_force = False  # a [global] before the section sets directory=${TARGET}
    for section in sections:
        own = any(
            names.get(k, k) == "directory"
            for k, _ in (split_option(o.text) for o in section.options)
        )
        if section.is_global:
            in_force = in_force or own
        elif not (own or in_force):
            raise JobFileError(
                f"{section.path}:{section.line}: section [{section.name}] has no "
                "directory=${TARGET} in force (in it, or in a [global] before it)"
            )
        if _unsafe_job_name(section.name):
            raise JobFileError(
                f"{section.path}:{section.line}: section [{section.name}]: a job name without "
                "'/' or '$', and not only dots (fio names the job's files after it, and "
                "$jobname in filename_format: they would land outside the slot's target)"
            )
    for opt in (o for section in sections for o in section.options):
        where = f"{opt.path}:{opt.number}"
        key, value = split_option(opt.text)
        key = names.get(key, key)
        if key == "gtod_reduce":
            raise JobFileError(f"{where}: gtod_reduce is not allowed (it drops latencies)")
        if _runs_bc(opt.text):
            raise JobFileError(
                f"{where}: {quote(opt.text)}: $ncpus, $mb_memory or $pagesize with + - * / "
                "makes fio run bc (a program, as root) and take what it prints as the value: "
                "write the value out"
            )
        if key == "filename":
            raise JobFileError(f"{where}: use directory=${{TARGET}}, never filename=")
        if key in _OUTSIDE_IO:
            raise JobFileError(f"{where}: {key} is not allowed ({_OUTSIDE_IO[key]})")
        if key in _PATH_OPTIONS and not _stays_inside(value or ""):
            raise JobFileError(
                f"{where}: {key}={quote(value)} must be a relative path without '..', "
                "${...} or $clientuid (fio would read or write outside the slot's target)"
            )
        why = _option_problem(key, value)
        if why:
            raise JobFileError(f"{where}: {why}")
        if key == "directory":
            if value != "${TARGET}":
                raise JobFileError(
                    f"{where}: use directory=${{TARGET}} and no other directory "
                    f"(fio reads directory={quote(value)})"
                )
            has_target_dir = True
        for var in _VAR_RE.findall(opt.text):
            if var not in used:
                used.append(var)
    if not has_target_dir:
        raise JobFileError(f"{path}: needs a 'directory=${{TARGET}}' line")
    undeclared = [v for v in used if v not in params]
    if undeclared:
        raise JobFileError(f"{path}: ${{{undeclared[0]}}} is used but has no '; @param' line")
    unused = [p for p in params if p not in used]
    if unused:
        raise JobFileError(f"{path}: parameter {unused[0]} is declared but never used")
    return JobFile(path.stem, description, path, params, param_help, param_types, tuple(flat))


def list_jobs() -> list[JobFile]:
    """Every job file in the library, sorted by name; JobFileError for a file whose
    name a matrix cannot give (`_job_name_problem`)."""
    directory = jobs_dir()
    if not directory.is_dir():
        raise JobFileError(f"{directory}: the fio job library is not a directory")
    paths = sorted(directory.glob(f"*{SUFFIX}"))
    for path in paths:
        problem = _job_name_problem(path.stem)
        if problem:
            raise JobFileError(f"{path}: {problem}")
    return [load_job_file(p) for p in paths]


def job_names() -> list[str]:
    """The names a matrix can give: of the library's files, those named as a job may be."""
    directory = jobs_dir()
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob(f"*{SUFFIX}") if not _job_name_problem(p.stem))


def _job_name_problem(name: str) -> str | None:
    if _JOB_NAME_RE.fullmatch(name):
        return None
    return (
        f"a job's name (its file name without .fio) is 1 to {JOB_NAME_MAX} letters, digits "
        "and . _ -, starting with a letter or digit"
    )


def get_job(name: str) -> JobFile:
    """The named job file; KeyError if the library has none by that name."""
    if _job_name_problem(name):
        raise KeyError(name)
    path = jobs_dir() / f"{name}{SUFFIX}"
    if not path.is_file():
        raise KeyError(name)
    return load_job_file(path)


def _unknown_job(name: str) -> str:
    directory = jobs_dir()
    if not directory.is_dir():
        where = " (IOFLEET_FIO_JOBS)" if os.environ.get("IOFLEET_FIO_JOBS") else ""
        return f"unknown fio job {quote(name)}: the fio job library {directory}{where} is not a directory"
    known = ", ".join(job_names()) or "none"
    problem = _job_name_problem(name)
    in_library = "/" not in name and "\0" not in name and name not in (".", "..")
    if problem and in_library and (directory / f"{name}{SUFFIX}").is_file():  # a file there
        return f"fio job {quote(name)}: {problem} (known: {known})"
    return f"unknown fio job {quote(name)} (known: {known})"


def _value_text(value: object) -> str:
    """A parameter value as fio sees it: a whole float is an integer."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _param_problems(job: JobFile, params: Mapping[str, object]) -> list[tuple[str, str]]:
    """(key as given, message) for every bad parameter."""
    settable = [p for p in job.params if p != TARGET_PARAM]
    problems: list[tuple[str, str]] = []
    seen: dict[str, str] = {}  # upper-cased name -> the key that set it first
    for key, value in params.items():
        upper = str(key).upper()
        if upper in seen:  # {"RUNTIME": 1, "runtime": 2}: which one fio would get is a guess
            problems.append(
                (str(key), f"same parameter as {quote(seen[upper])} (names are case-insensitive)")
            )
            continue
        seen[upper] = str(key)
        if upper == TARGET_PARAM:
            problems.append((str(key), "set from the slot's target, not by params"))
            continue
        if upper not in job.params:
            problems.append((str(key), f"unknown parameter (known: {', '.join(settable)})"))
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            problems.append((str(key), "expected a string or a number"))
            continue
        if isinstance(value, float) and not math.isfinite(value):
            problems.append((str(key), f"must be a finite number, got {value}"))
            continue
        text = _value_text(value)
        ptype = job.param_types.get(upper)
        if ptype is not None:
            problem = ptype.problem(text)
            if problem:
                problems.append((str(key), problem))
                continue
        if not _VALUE_RE.fullmatch(text) or "/" in text or ".." in text:
            problems.append(
                (
                    str(key),
                    f"{quote(text)} is not a plain token (letters, digits and . _ : , + - only)",
                )
            )
    return problems


# Options whose value is a path fio writes or reads, relative to the job's directory
# (${TARGET}) or working directory (the slot's): an absolute one or a '..' would reach
# outside the slot's target, and a ${VAR} could bring either in
_PATH_OPTIONS = (
    "merge_blktrace_file",
    "donorname",
    "filename_format",
    "opendir",
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "write_hist_log",
    "write_iolog",
    "read_iolog",
    "verify_state_save",
)
# Options that do I/O or run programs beyond the job's own files, change the host for
# every other process, or hang fio where the host differs
_OUTSIDE_IO = {
    "replay_redirect": "it sends a replayed log's I/O to another device",
    "exec_prerun": "it runs a command on the host",
    "exec_postrun": "it runs a command on the host",
    "cgroup": "it makes a cgroup on the host, and a path in it makes a directory anywhere",
    "ioscheduler": "it switches the device's I/O scheduler for every process on the host",
    "gtod_cpu": "fio spins waiting for that CPU's time thread: on a host without the CPU "
    "it hangs until the slot times out",
    "read_iolog": "fio replays the I/O a log lists on the files the log names, and the log "
    "is data a workload can write: nothing can check it before the run",
    "merge_blktrace_file": "it merges blktrace logs, which iofleet does not replay",
    "profile": "a fio profile writes its own jobs, with their own files and devices",
}
# The I/O engines iofleet runs: ones that read and write the job's files in the target.
# Others run programs (exec), load a library as root (external:PATH), delete or create
# files as their I/O (filedelete, filecreate, filestat), send the data over a network
# (net, rdma, nbd, rados, rbd, http, gfapi, libiscsi) or to a SCSI or DAX device (sg,
# dev-dax, libpmem), or measure nothing on the storage (null, cpuio): the plan refuses them.
ENGINES = (
    "psync",
    "sync",
    "vsync",
    "pvsync",
    "pvsync2",
    "libaio",
    "io_uring",
    "posixaio",
    "mmap",
    "splice",
)
# Options that leave the report without what it measures (as gtod_reduce would):
# (option, the value that does it, why)
_RESULTS = {
    "disable_clat": (True, "it drops the completion latencies the report is built on"),
    "clat_percentiles": (False, "it drops the completion-latency percentiles and histogram"),
    "create_only": (True, "fio lays the files out and measures nothing"),
    "stats": (False, "fio keeps no statistics: the run has no measurements"),
}


def _option_problem(key: str, value: str | None) -> str | None:
    """Why option `key` with `value` (as written, before ${VAR}) is not allowed; None if it
    is. The engine, the memory files and the result options are checked here."""
    if key == "ioengine":
        engine = (value or "").strip()
        if engine not in ENGINES:
            return (
                f"ioengine={quote(value)} is not an engine iofleet runs (one of "
                f"{', '.join(ENGINES)}, written out: others run programs, load libraries, "
                "delete files, or measure a network or nothing)"
            )
    if key == "name" and value is not None and _unsafe_job_name(value):
        return (
            f"name={quote(value)}: a job name without '/' or '$', and not only dots "
            "(fio names the job's files after it: they would land outside the slot's target)"
        )
    if key in ("buffer_pattern", "verify_pattern") and value and "'" in value:
        # a pattern is a series of pieces (a number, "text", 'FILE', %o): a 'FILE' after a
        # first piece is read all the same
        return (
            f"{key}={quote(value)}: a pattern read from a file ('NAME') is not allowed (fio "
            'opens the file as root, wherever it is): write the pattern (0x..., "text")'
        )
    if key in ("mem", "iomem") and value and ":" in value:
        # fio strips the blanks after ':' (get_opt_postfix): `mmap: /etc/x` is /etc/x. No
        # benchmark needs a file behind its buffers, so none is taken, however written
        return (
            f"{key}={quote(value)}: a file behind the I/O buffers is not allowed (fio maps "
            "and truncates it, wherever it is): write the kind alone (malloc, shm, mmap...)"
        )
    if key in _RESULTS:
        bad, why = _RESULTS[key]
        if value is not None and "${" in value:
            return f"{key}={quote(value)}: write the value out ({key} {why} when set so)"
        on = True if value is None else bool(fio_int(value))
        if on is bad:
            return f"{key}{'' if value is None else '=' + value} is not allowed ({why})"
    return None


def _stays_inside(value: str) -> bool:
    """A path option's value that stays below the directory fio resolves it against.
    fio puts the client's address in for `$clientuid` in filename_format (any case):
    empty in a run of its own, so `.$clientuid.` is `..`."""
    return (
        not value.startswith("/")
        and "${" not in value
        and "$clientuid" not in value.lower()
        and ".." not in value.replace("\\", "/").split("/")
    )


# Options that would move a job's I/O off the region the agent gives it on a raw device
# (aliases such as nr_files are read as the option they name).
_RAW_REFUSED = (
    "filename",
    "offset",
    "offset_increment",
    "filesize",
    "nrfiles",
    "opendir",
    "filename_format",
)


@dataclass(frozen=True)
class RawLayout:
    """How the jobs of one file share a raw device: every job process (each `numjobs` clone
    of a section) gets its own region of `region_bytes` at `offset_increment * clone`."""

    region_bytes: int
    processes: int  # the most clones of any one section (sections share the regions)
    needed_bytes: int  # from the device's start to the end of the last region


def _mib(size: int) -> str:
    return f"{size / 2**20:.6g} MiB"


REGION_ALIGN = 4096  # region starts: whole 4 KiB blocks (O_DIRECT on 512e and 4Kn devices)


def raw_layout(
    job: JobFile, env: Mapping[str, str], device_bytes: int, block_bytes: int = REGION_ALIGN
) -> RawLayout:
    """The regions job `job` uses on a raw device of `device_bytes` bytes; ValueError (one line)
    if a job would leave its region, lacks a size, or the regions do not fit on the device.

    Each region starts on a multiple of `block_bytes` (at least REGION_ALIGN; the agent passes
    the device's logical block size): fio adds `offset_increment` to a clone's offsets as is,
    and the kernel rejects (EINVAL) an O_DIRECT I/O that does not start on a logical block,
    so a SIZE such as 4000000 would otherwise fail every clone after the first mid-run."""
    try:
        jobs = read_jobs(job.path, env)
    except JobTextError as exc:
        raise ValueError(str(exc)) from None
    if not jobs:
        raise ValueError("the job file has no job sections")
    sizes: list[tuple[str, int, int]] = []
    for section in jobs:
        name = section.section.name
        given = {a.name for a in section.assignments}
        refused = [k for k in _RAW_REFUSED if k in given]
        if refused:
            raise ValueError(
                f"[{name}] sets {refused[0]}, which a raw device does not allow "
                "(the agent gives each job process its own region)"
            )
        if section.last("size") is None:
            raise ValueError(f"[{name}] has no size (the region of the device each job uses)")
        value = section.last_number("size")
        if value is None:
            raise ValueError(f"[{name}]: size is known only where fio runs")
        if isinstance(value, Percent):  # of the device (fio: of the file it opens)
            if not 0 < value.value <= 100:
                raise ValueError(f"[{name}]: size {value.value}% is not a usable percentage")
            size = device_bytes * value.value // 100
        else:
            size = value
        numjobs = section.number("numjobs", 1)
        if numjobs is None:
            raise ValueError(f"[{name}]: numjobs is known only where fio runs")
        clones = numjobs
        if size <= 0 or clones < 1:
            raise ValueError(f"[{name}]: size and numjobs must be positive")
        sizes.append((name, size, clones))
    align = max(block_bytes, REGION_ALIGN)
    region = -(-max(size for _, size, _ in sizes) // align) * align
    processes = max(clones for _, _, clones in sizes)
    needed = max((clones - 1) * region + size for _, size, clones in sizes)
    if needed > device_bytes:
        raise ValueError(
            f"needs {_mib(needed)} of the device ({processes} job processes x {_mib(region)}, "
            f"one region each) but it has {_mib(device_bytes)}; lower SIZE or NUM_JOBS"
        )
    return RawLayout(region, processes, needed)


def param_problems(name: str, params: Mapping[str, object]) -> list[tuple[str, str]]:
    """(`params.KEY` or `fio`, message) for every problem of a workload's parameters.

    Keys are case-insensitive; each value is checked against the type and range its
    `; @param` line declares.
    """
    try:
        job = get_job(name)
    except KeyError:
        return [("fio", _unknown_job(name))]
    except JobFileError as exc:  # a job file of the library (the user's own) is malformed
        return [("fio", f"job {quote(name)} cannot be used: {exc}")]
    return [(f"params.{key}", message) for key, message in _param_problems(job, params)]


def check_params(name: str, params: Mapping[str, object]) -> list[str]:
    """Problems with a workload's parameters as one-line strings; [] if fine."""
    lines = []
    for where, message in param_problems(name, params):
        key = where.removeprefix("params.")
        if where == "fio":
            lines.append(message)
        elif message.startswith("unknown parameter"):
            lines.append(message.replace("unknown parameter", f"unknown parameter {key}", 1))
        else:
            lines.append(f"parameter {key.upper()}: {message}")
    return lines


def param_seconds(
    name: str, params: Mapping[str, object], defaults: bool = False
) -> dict[str, float]:
    """The given duration parameters of job `name` in seconds (valid values only); with
    `defaults`, also those the workload leaves at the job's default (by their name)."""
    try:
        job = get_job(name)
    except (KeyError, JobFileError):
        return {}
    out: dict[str, float] = {}
    items: list[tuple[object, object]] = list(params.items())
    if defaults:
        given = {str(key).upper() for key in params}
        items += [(k, v) for k, v in job.params.items() if k != TARGET_PARAM and k not in given]
    for key, value in items:
        ptype = job.param_types.get(str(key).upper())
        if ptype is not None and ptype.kind == "duration":
            seconds = ptype.parse(_value_text(value))
            if seconds is not None:
                out[str(key)] = seconds
    return out


def render_command(
    name: str,
    params: Mapping[str, object],
    target_dir: str,
    *,
    device: str | None = None,
    device_bytes: int | None = None,
    device_block_bytes: int = REGION_ALIGN,
    job_sha256: str | None = None,
) -> tuple[list[str], str]:
    """argv and the job text for running job `name` against `target_dir`.

    `job_sha256` (the plan's digest of the job, `JobFile.text_sha256`): a job whose text
    is no longer that one is refused (ValueError), so what runs is what was planned.

    The caller runs argv (no shell) with the job text as fio's standard input (argv
    names the job file `-`) and its own environment: the job's parameters are put into
    the text (`render_job`), never into fio's environment, so a parameter's name is
    never a variable fio's process (the dynamic loader, glibc, a library fio links)
    reads, and fio reads the lines the loader checked, not the file as it is by then.

    `device` (an absolute block-device path, e.g. "/dev/nvme1n1", of `device_bytes` bytes)
    makes every job process of the file do its I/O on that device: `--filename=DEVICE`
    and `--offset_increment=REGION` go before the job file, so fio applies them as global
    options to every section and every `numjobs` clone. fio resolves a filename against
    the `directory` in force *when it parses the filename* (options.c str_filename_cb ->
    filesetup.c add_file), and command-line options are parsed before the job file's
    `directory=${TARGET}`: so the device path must be absolute, and TARGET stays
    `target_dir` (the agent's empty scratch directory, checked after the run). Clone k of
    each section uses bytes [k*REGION, k*REGION + size) of the device; sections share
    the regions (a reader clone reads writer clone k's region); REGION is the size rounded
    up to a whole number of the device's logical blocks (`device_block_bytes`, at least
    4 KiB). See docs/decisions.md #3.

    Raises KeyError for an unknown job and ValueError (one line) for bad input.
    """
    job = get_job(name)
    if job_sha256 is not None and job.text_sha256 != job_sha256:
        raise ValueError(changed_since_plan(job, job_sha256))
    problems = check_params(name, params)
    if problems:
        raise ValueError(f"fio job {name}: {problems[0]}")
    if not _TARGET_RE.match(target_dir):
        raise ValueError(
            f"fio job {name}: target directory {quote(target_dir)} must be letters, digits "
            "and . _ / + - only (fio splits directories on ':')"
        )
    env = plan_env(job, params)
    if TARGET_PARAM in env:
        env[TARGET_PARAM] = target_dir
    argv = ["fio", "--output-format=json+"]
    if device is not None:
        if not device.startswith("/") or not _TARGET_RE.match(device) or "/." in device:
            raise ValueError(
                f"fio job {name}: device {quote(device)} must be an absolute /dev path"
            )
        if device_bytes is None or device_bytes <= 0:
            raise ValueError(f"fio job {name}: the size of {device} is unknown")
        try:
            layout = raw_layout(job, env, device_bytes, device_block_bytes)
        except ValueError as exc:
            raise ValueError(f"fio job {name} on {device}: {exc}") from None
        argv += [f"--filename={device}", f"--offset_increment={layout.region_bytes}"]
    argv.append(JOB_ON_STDIN)
    return argv, render_job(job, env)


def changed_since_plan(job: JobFile, planned: str) -> str:
    """One line: job `job` is not the text whose sha256 the plan recorded."""
    return (
        f"fio job {job.name}: {job.path} changed since the run was planned (its text's "
        f"sha256 is {job.text_sha256[:16]}..., the plan's {planned[:16]}...): not run"
    )


# fio reads the job file from its standard input when it is named `-` (init.c
# parse_jobs_ini). The text has its includes put in (the loader's `flat` lines): fio
# would look for an include in its working directory, the slot's target, first
JOB_ON_STDIN = "-"


def _render_line(line: str, values: Mapping[str, str]) -> str:
    """An option line with its ${VAR}s put in; a section header or a comment as written
    (fio puts variables into options only: a header's name is read as written, and a
    `[` + 253 characters + `${TARGET}]` header filled in would end its name in '/')."""
    text = strip_line(line)
    if not text or text.startswith("["):
        return line
    return _VAR_RE.sub(lambda m: values.get(m.group(1), m.group(0)), line)


def job_stdin(text: str):  # -> IO[bytes], closed by `with`
    """A rendered job (`render_command`) as a file to give fio as its standard input, to
    use in a `with`: an unlinked temporary file outside the storage under test, read
    whenever fio gets to it; nothing is left behind however this process ends. The child
    keeps its own copy of the descriptor, so it may be closed once the child started."""
    import tempfile

    handle = tempfile.TemporaryFile()
    try:
        handle.write(text.encode("utf-8"))
        handle.seek(0)
    except BaseException:
        handle.close()
        raise
    return handle


def render_job(job: JobFile, values: Mapping[str, str]) -> str:
    """Job file `job` as fio reads it when its environment holds `values`: every
    `${VAR}` put in (options.c fio_option_dup_subs puts the environment's value in for
    `${VAR}` anywhere in an option line, and nowhere else). The loader refuses an option
    line using a VAR without a `; @param` line, so `values` (every parameter) leaves none
    for fio's environment; one in a comment or a section header is kept as written. A
    value is a plain token (no `$ { } ; # [ ]`, no line break), so putting it in makes no
    new comment, variable, section or line. ValueError (one line) for a line the values make
    longer than fio reads whole (jobtext.MAX_LINE_BYTES)."""
    text = "".join(_render_line(line, values) + "\n" for line in job.lines)
    try:
        fio_lines(text, f"fio job {job.name}")
    except JobTextError as exc:
        raise ValueError(f"{exc} once its parameters are put in") from None
    return text


def plan_env(job: JobFile, params: Mapping[str, object]) -> dict[str, str]:
    """The job's `${VAR}` values at plan time: its declared defaults, overridden by the
    matrix's `params` (a whole float such as 4.0 written as fio reads it, "4")."""
    env = dict(job.params)
    for key, value in params.items():
        text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
        env[str(key).upper()] = text
    return env


def _shown(path: str) -> str:
    """A job file as a problem line names it: relative to the library when inside it."""
    try:
        return str(Path(path).relative_to(jobs_dir()))
    except ValueError:
        return path


def option_problems(name: str, params: Mapping[str, object], release: str) -> list[tuple[str, str]]:
    """(`fio` or `params.KEY`, message) for every option of library job `name`, with the
    matrix's `params`, that fio `release` refuses or misreads (iofleet/plan/fioopts.py).
    A problem on a line that uses a parameter the matrix sets is the parameter's.
    KeyError / JobFileError as get_job (the matrix validation reports those first)."""
    from iofleet.plan import fioopts

    job = get_job(name)
    env = plan_env(job, params)
    if TARGET_PARAM in env:
        env[TARGET_PARAM] = "/mnt/iofleet"
    try:
        problems = fioopts.check_job_file(job.path, env, release)
    except fioopts.JobTextError as exc:
        return [("fio", f"job {quote(name)}: {exc}")]
    given = {str(k).upper(): str(k) for k in params}
    out: list[tuple[str, str]] = []
    for p in problems:
        key = next((given[v] for v in p.variables if v in given), None)
        where = f"params.{key}" if key else "fio"
        where_in = f"[{p.section}] " if p.section else ""
        text = f"{_shown(p.path)}:{p.line}: {where_in}{p.message}"
        out.append((where, f"job {quote(name)} for fio {release}: {text}"))
    return out


PARSE_ONLY_TIMEOUT_S = 60
PARSE_ONLY_AHEAD = 4  # runs started ahead at most (the validation runs the others)


def _parse_only_call(
    name: str, params: Mapping[str, object], target_dir: str, fio: str
) -> tuple[list[str], str]:
    """The argv and job text (its standard input) of `parse_only_problem`'s fio run,
    rendered as the agent renders the job (`render_command`)."""
    job = get_job(name)
    env = plan_env(job, params)
    if TARGET_PARAM in env:
        env[TARGET_PARAM] = target_dir
    argv = [fio, "--parse-only", "--clocksource=gettimeofday", JOB_ON_STDIN]
    return argv, render_job(job, env)


def _call_key(argv: list[str], text: str) -> tuple[object, ...]:
    return (tuple(argv), text)


# `start_parse_only_checks`: fio runs started ahead, by command and job text
_started: dict = {}  # {(argv, text): subprocess.Popen}; subprocess is imported lazily


def _popen(argv: list[str], text: str):  # -> subprocess.Popen[str]
    """fio with job `text` as its standard input (`job_stdin`)."""
    import subprocess

    with job_stdin(text) as stdin:
        return subprocess.Popen(  # noqa: S603 - the fio found on PATH, argv list
            argv,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def parse_only_problem(
    name: str, params: Mapping[str, object], target_dir: str, fio: str = "fio"
) -> str | None:
    """What `fio --parse-only` (the installed fio) says against library job `name` with
    `params`, None if it accepts it; EnvironmentProblem (exit 3) when a signal from
    outside killed it: it said nothing about the job, which is not the matrix's fault
    (it was refused as such, exit 2). fio parses the options and starts no I/O. A run of
    the same command and job text started ahead (`start_parse_only_checks`)
    is taken instead of starting another.

    `--clocksource=gettimeofday`: a process that times nothing need not test its CPU
    clock. Without a clock source given, fio checks that the TSC runs in step on every
    CPU (a thread per CPU reading it in turn) before it looks at the job: half of a
    parse-only run's CPU time (fio 3.33 on the bench VM: 0.14 s, 0.07 s with it), paid
    by every `iofleet local` before its run starts. A job file's own `clocksource`
    still parses as it would."""
    import subprocess

    from iofleet.local.stopping import held

    try:
        argv, text = _parse_only_call(name, params, target_dir, fio)
    except ValueError as exc:
        return f"job {quote(name)}: {exc}"
    proc = _started.pop(_call_key(argv, text), None)
    try:
        if proc is None:
            with held():  # a stop signal is raised once `proc` is set: killed below
                proc = _popen(argv, text)
        out, err = proc.communicate(timeout=PARSE_ONLY_TIMEOUT_S)
    except OSError as exc:
        return f"fio --parse-only could not run: {exc}"
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        return f"fio --parse-only could not run: {exc}"
    except BaseException:  # interrupted while waiting: leave no process behind
        if proc is not None:
            proc.kill()
            proc.wait()
        raise
    if proc.returncode == 0:
        return None
    if proc.returncode < 0:  # killed from outside (`pkill fio`, the OOM killer): no verdict
        from iofleet.errors import EnvironmentProblem
        from iofleet.local.stopping import signal_name

        raise EnvironmentProblem(
            f"fio --parse-only, checking job {quote(name)}, was killed by "
            f"{signal_name(-proc.returncode)} (not by iofleet): nothing was run"
        )
    lines = [ln.strip() for ln in (err + out).splitlines() if ln.strip()]
    said = clip("; ".join(lines[:2]), 160) if lines else f"exit status {proc.returncode}"
    return f"job {quote(name)}: fio --parse-only refuses it: {said}"


def start_parse_only_checks(matrix_path: str, fio: str | None) -> bytes | None:
    """For `iofleet local`, before its imports: read the matrix file as plain JSON and
    start, for each fio workload in it, the `fio --parse-only` run its validation will
    make (`parse_only_problem`), and `fio --version` (`fioopts.start_version`), so that
    fio's start-up runs beside the runner's imports and the matrix's validation
    instead of after them. The validation takes a started run only when it is the same
    command and job text (the job, parameters and target it validated);
    `stop_parse_only_checks` kills and reaps what it did not take. At most
    PARSE_ONLY_AHEAD runs start (a matrix of many jobs does not start a fio each at
    once). Starts nothing for stdin or a file that is not a readable JSON matrix (the
    validation says why), and no fio run for a workload it cannot render.

    Returns the file's bytes as read (at most the matrix size limit and one byte), for
    the validation to take instead of reading the file again (`load_matrix_file`'s
    `data`); None when it read nothing (stdin, or a file it cannot open)."""
    import json

    from iofleet.local.stopping import held
    from iofleet.plan import fioopts
    from iofleet.plan.matrixfile import read_matrix_bytes

    if matrix_path == "-":
        return None
    try:
        data = read_matrix_bytes(matrix_path, 1024 * 1024 + 1)  # the size limit, one byte
    except OSError:  # the validation says why, reading it itself
        return None
    if fio is None:
        return data
    try:
        doc = json.loads(data)
        workloads = [w for w in doc["workloads"] if isinstance(w, dict) and "fio" in w]
        target_dir = next(
            (
                s["path"]
                for s in doc.get("storage", [])
                if isinstance(s, dict) and s.get("type") == "local"
            ),
            "/tmp",
        )
    except Exception:  # noqa: BLE001 - anything wrong is the validation's to say
        return data
    if not workloads:
        return data
    fioopts.start_version_ahead(fio)
    for w in workloads:
        if len(_started) >= PARSE_ONLY_AHEAD:
            break
        try:
            params = w.get("params") or {}
            argv, text = _parse_only_call(str(w["fio"]), params, str(target_dir), fio)
            key = _call_key(argv, text)
            if key not in _started:
                with held():  # recorded before a stop signal can end the command
                    _started[key] = _popen(argv, text)
        except Exception:  # noqa: BLE001 - not a job this library renders: no run ahead
            continue
    return data


def stop_parse_only_checks() -> None:
    """Kill and reap the runs `start_parse_only_checks` started that nothing took."""
    from iofleet.plan import fioopts

    while _started:
        _, proc = _started.popitem()
        proc.kill()
        proc.communicate()
    fioopts.stop_version()


def raw_plan_problem(name: str, params: Mapping[str, object], device_bytes: int) -> str | None:
    """Why library job `name` with `params` cannot run on a raw device of `device_bytes`
    (the agent's own check, raw_layout, made at plan time), None if it can."""
    job = get_job(name)
    env = plan_env(job, params)
    if TARGET_PARAM in env:
        env[TARGET_PARAM] = "/mnt/iofleet"
    try:
        raw_layout(job, env, device_bytes)
    except ValueError as exc:
        return str(exc)
    return None


# Options whose values iofleet reads to plan a job (its ceilings, its files on the target,
# its raw-device regions, its Mountpoint traffic): a value fio computes on the host cannot
# be planned for.
_PLANNED = (
    "rw",
    "rwmixread",
    "rwmixwrite",
    "bs",
    "rate",
    "rate_iops",
    "size",
    "filesize",
    "nrfiles",
    "numjobs",
    "runtime",
    "time_based",
    "kb_base",
    "stonewall",
    "name",
)


def reading_problems(
    name: str, params: Mapping[str, object], raw_only: bool = False
) -> list[tuple[str, str]]:
    """(`fio` or `params.KEY`, message) for what library job `name` asks of fio that iofleet
    cannot plan for (jobtext reads it as fio does, but the figure it needs is not there):
    a planned option from `$ncpus`/`$mb_memory`/`$pagesize` (the host's figures), a block
    size drawn from a range or split (no one bytes-per-I/O for the ceilings), a size given
    as a percentage (fio takes a share of a file that already exists; iofleet's targets
    hold new files, where fio fails: fine only when every storage is a raw device,
    `raw_only`) or in zones. A line using a parameter the matrix sets is the parameter's.
    What fio itself refuses (an unknown `rw=`) is the option check's (option_problems).
    KeyError / JobFileError as get_job."""
    from iofleet.plan.expect import BLOCK_SIZE_SPREADS

    job = get_job(name)
    env = plan_env(job, params)
    if TARGET_PARAM in env:
        env[TARGET_PARAM] = "/mnt/iofleet"
    try:
        jobs = read_jobs(job.path, env)
    except JobTextError as exc:
        return [("fio", f"job {quote(name)}: {exc}")]
    given = {str(k).upper(): str(k) for k in params}
    # each section's earlier sections of its reporting group (_group_percentiles_problem)
    earlier = {id(j): g[:i] for g in reporting_groups(jobs) for i, j in enumerate(g)}
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, int]] = set()

    def add(a: Assignment, message: str) -> None:
        if (a.line.path, a.line.number) in seen:  # a [global] line, inherited by every job
            return
        seen.add((a.line.path, a.line.number))
        key = next((given[v] for v in a.variables if v in given), None)
        where = f"params.{key}" if key else "fio"
        text = f"{_shown(a.line.path)}:{a.line.number}: {a.line.text.strip()}: {message}"
        out.append((where, f"job {quote(name)}: {text}"))

    for index, section in enumerate(jobs):
        for a in section.assignments:
            if a.name in _PLANNED and a.value is not None and has_keyword(a.value):
                add(
                    a,
                    "fio fills this in from the host it runs on; iofleet plans a job "
                    "from its figures: write the number",
                )
            elif a.name in BLOCK_SIZE_SPREADS:
                add(
                    a,
                    "block sizes drawn from a range or a split have no one size per I/O "
                    "for the expected ceilings: give bs= (one size per direction)",
                )
            elif a.name == "size" and a.value is not None and a.known:
                last = [fio_size(t.split(",", 1)[0]) for t, _ in value_pieces(a.value)]
                if any(t.rstrip().endswith("z") for t, _ in value_pieces(a.value)):
                    add(a, "a size in zones is known only on a zoned device: write a size")
                elif any(isinstance(v, Percent) for v in last) and not raw_only:
                    add(
                        a,
                        "fio takes a percentage of a file that already exists, and "
                        "iofleet's targets hold new files (fio fails: 'Invalid argument'); "
                        "write a size (a percentage is for raw devices only)",
                    )
        for a, message in _refused_by_fio(section, raw_only):
            add(a, message)
        waits = _wait_for_problem(section, [j.name for j in jobs[:index]])
        if waits:
            add(*waits)
        mixed = _group_percentiles_problem(section, earlier[id(section)])
        if mixed:
            add(*mixed)
        if not raw_only and section.last("size") is None and section.last("filesize") is None:
            sec = section.section
            text = f"{_shown(sec.path)}:{sec.line}: [{sec.name}]: "
            out.append(
                (
                    "fio",
                    f"job {quote(name)}: {text}no size= or filesize=: fio needs one to lay out "
                    "a new file ('you need to specify size=') and iofleet's targets start "
                    "empty",
                )
            )
    too_many = _too_many_processes(jobs)
    if too_many is not None:
        add(*too_many)
    return out


# fio keeps its jobs' state in shared-memory segments of 8 jobs (JOBS_PER_SEG), at most
# REAL_MAX_JOBS / 8 - 1 = 511 of them (init.c add_thread_segment): a job file whose
# sections' numjobs add up past 4,088 fails as fio sets the jobs up ("maximum number of
# jobs reached"), while --parse-only passes it (fio 3.33: 4,088 ran, 4,089 failed)
FIO_MAX_JOB_PROCESSES = 4088


def _too_many_processes(jobs: list[Job]) -> tuple[Assignment, str] | None:
    """The numjobs line that takes the file's job processes past FIO_MAX_JOB_PROCESSES
    (every section's, whatever its stonewall group: fio sets them all up at once)."""
    total, crossing, unknown = 0, None, False
    for section in jobs:
        clones = section.number("numjobs", 1)
        if clones is None:  # known only where fio runs
            unknown = True
            continue
        total += clones
        if crossing is None and total > FIO_MAX_JOB_PROCESSES:
            crossing = section.last("numjobs")
    if crossing is None:
        return None
    count = f"{'at least ' if unknown else ''}{total:,}"
    return (
        crossing,
        f"the job file's sections run {count} job processes (numjobs added up), over the "
        f"{FIO_MAX_JOB_PROCESSES:,} fio sets up at most: it fails as the job starts "
        "('maximum number of jobs reached')",
    )


# the error names fio's ignore_error takes (options.c str2error; the same in 3.28-3.36)
FIO_ERROR_NAMES = frozenset(
    "EPERM ENOENT ESRCH EINTR EIO ENXIO E2BIG ENOEXEC EBADF ECHILD EAGAIN ENOMEM EACCES "
    "EFAULT ENOTBLK EBUSY EEXIST EXDEV ENODEV ENOTDIR EISDIR EINVAL ENFILE EMFILE ENOTTY "
    "ETXTBSY EFBIG ENOSPC ESPIPE EROFS EMLINK EPIPE EDOM ERANGE".split()
)


def _ignore_error_problem(value: str) -> str | None:
    """Why fio refuses `ignore_error=value` as the job is set up (options.c
    str_ignore_error_cb, which --parse-only skips): up to three ':'-separated lists (read,
    write, verify) split by ','; each error a name of fio's list or a non-zero number."""
    kinds = value.split(",")
    if len(kinds) > 3:
        return (
            "more than three error lists (read, write, verify): fio refuses it "
            "('Illegal error type')"
        )
    for kind in kinds:
        for token in kind.split(":"):
            if not token:
                break  # fio stops this list at an empty name
            if token[0] == "E":
                known = token in FIO_ERROR_NAMES
            else:
                known = _atoi_error(token) != 0
            if not known:
                return (
                    f"{quote(token)} is not an error fio knows (a number, or a name such as "
                    f"EIO or ENOSPC): fio refuses it ('Unknown error {token}, please use "
                    "number value')"
                )
    return None


def _atoi_error(token: str) -> int:
    """The error number fio's ignore_error reads from `token`: glibc's atoi (strtol,
    saturated at 64 bits, then cut to a 32-bit int; 0 without digits), made positive."""
    number = re.match(r"\s*([+-]?[0-9]+)", token)
    if number is None:
        return 0
    value = max(-(2**63), min(int(number.group(1)), 2**63 - 1)) & 0xFFFFFFFF
    return abs(value - 2**32 if value >= 2**31 else value)


def _lat_percentiles(job: Job) -> bool:
    """lat_percentiles as fio compares it: off with disable_lat (init.c fixup_options)."""
    return job.flag("lat_percentiles") and not job.flag("disable_lat")


def _group_percentiles_problem(job: Job, group: list[Job]) -> tuple[Assignment, str] | None:
    """fio (3.33 and later; init.c verify_per_group_options) refuses, as the jobs are
    added, a `group_reporting` job whose `lat_percentiles` differs from an earlier job's
    of its reporting group (with `stats` on): one group's figures of two kinds. fio 3.28
    runs it, and sums the two."""
    if not group or not job.flag("group_reporting") or job.number("stats", 1) == 0:
        return None
    mine = _lat_percentiles(job)
    other = next((g for g in group if _lat_percentiles(g) != mine), None)
    if other is None:
        return None
    line = (
        job.last("lat_percentiles") or other.last("lat_percentiles") or job.last("group_reporting")
    )
    if line is None:
        return None
    return (
        line,
        f"job {quote(job.name)} and job {quote(other.name)} of one group_reporting group differ "
        f"in lat_percentiles: fio refuses it ('lat_percentiles in job: {job.name} differs from "
        "group')",
    )


def _wait_for_problem(job: Job, earlier: list[str]) -> tuple[Assignment, str] | None:
    """fio's check of `wait_for` as it adds the job (init.c wait_for_ok), which
    `--parse-only` never reaches: the job fails as the run starts. The waitee must be one
    job defined before this one, by its name (`name=`, else the section's), not itself."""
    a = job.last("wait_for")
    if a is None or a.value is None or not a.known:
        return None
    if a.value in (job.section.name, job.name):
        return a, "a job cannot wait for itself (fio refuses it as the run starts)"
    count = earlier.count(a.value)
    if count == 0:
        return a, (
            f"no job named {quote(a.value)} before this one (fio waits only for a job "
            "defined earlier in the file, and refuses the run as it starts)"
        )
    if count > 1:
        return a, (
            f"{count} jobs are named {quote(a.value)} (fio refuses an ambiguous wait_for as "
            "the run starts)"
        )
    return None


def _highest_cpu(option: str, value: str) -> int | None:
    """The highest CPU number a `cpus_allowed` list (`0-3,6`) or `cpumask` (a number) names;
    None when it cannot be read here (fio says what is wrong with it)."""
    try:
        if option == "cpumask":
            mask = int(value.strip(), 0)
            return mask.bit_length() - 1 if mask > 0 else None
        if option == "sqthread_poll_cpu":  # one CPU, an integer fio reads in any base
            cpu = int(value.strip(), 0)
            return cpu if cpu >= 0 else None
        highest = -1
        for piece in value.split(","):
            ends = [int(p.strip(), 10) for p in piece.split("-", 1) if p.strip()]
            highest = max([highest, *ends])
        return highest if highest >= 0 else None
    except ValueError:
        return None


# options naming CPUs: the job's own (a list, or a mask), its verify threads', its log
# compression threads' (lists) and io_uring's kernel poll thread (one CPU); fio drops
# the job (or fails its I/O, error 22) as it starts when one is beyond the host's CPUs,
# while --parse-only passes them
CPU_OPTIONS = (
    "cpus_allowed",
    "cpumask",
    "verify_async_cpus",
    "log_compression_cpus",
    "sqthread_poll_cpu",
)

# fio's I/O buffers in huge pages (`mem=`/`iomem=`): only from pages the host reserved
HUGE_PAGE_MEMORY = ("shmhuge", "mmaphuge")


def meminfo(field_name: str) -> int | None:
    """A /proc/meminfo figure (its number as written: kB, or a count); None if unreadable."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(f"{field_name}:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def huge_pages_reserved() -> bool:
    """This machine has huge pages reserved (/proc/meminfo HugePages_Total above 0)."""
    return (meminfo("HugePages_Total") or 0) > 0


def aio_events_left() -> int | None:
    """The libaio events this machine has left: fs.aio-max-nr less fs.aio-nr (the kernel
    refuses an io_setup past it: EAGAIN, fio error 11)."""
    try:
        limit = int(Path("/proc/sys/fs/aio-max-nr").read_text())
        used = int(Path("/proc/sys/fs/aio-nr").read_text())
    except (OSError, ValueError):
        return None
    return max(0, limit - used)


def _engine(section: Job) -> str | None:
    """The section's `ioengine` as written (stripped), None when it gives none (fio's
    default, psync)."""
    a = section.last("ioengine")
    return None if a is None else (a.value or "").strip()


def _aio_problems(name: str, jobs: list[Job], host: Host, left: int) -> list[str]:
    """The stonewall group whose libaio job processes ask for more events at once than
    `left`: each asks io_setup for its iodepth (engines/libaio.c fio_libaio_init; the
    kernel counts what was asked against fs.aio-max-nr, fs/aio.c ioctx_alloc), times the
    slots on the host."""
    groups: list[tuple[int, Assignment | None]] = []
    for sections in stonewall_groups(jobs):
        events, line = 0, None
        for section in sections:
            if _engine(section) != "libaio":
                continue
            clones, depth = section.number("numjobs", 1), section.number("iodepth", 1)
            if clones is None or depth is None:
                continue
            events += clones * max(depth, 1)
            line = section.last("iodepth") or line or section.last("ioengine")
        groups.append((events, line))
    if not groups:
        return []
    events, line = max(groups, key=lambda g: g[0])
    total = events * host.slots
    if total <= left or line is None:
        return []
    slots = f" x {host.slots} slots" if host.slots > 1 else ""
    return [
        f"job {quote(name)}: {_shown(line.line.path)}:{line.line.number}: "
        f"{line.line.text.strip()}: libaio asks for {total:,} events at once (iodepth x "
        f"job processes{slots}), more than the {left:,} {host.name} has left (fs.aio-max-nr "
        "less fs.aio-nr): fio fails with error 11 as the job starts"
    ]


# What an AWS instance's bootstrap gives the agent before it starts (iofleet.aws.userdata
# kernel_limit_steps), and so what the AWS plan checks fio's jobs against: fs.aio-max-nr
# raised to this (Ubuntu's default is 65,536 libaio events) and the open-files limit,
# soft and hard, set to this (fs.nr_open's default, the most a hard limit may be)
AWS_AIO_MAX_NR = 1 << 20
AWS_OPEN_FILES = 1 << 20

# descriptors a fio job process holds besides its files (stdio, logs, its pipes: it
# failed at 248 of 250 files under a limit of 256)
FIO_OWN_FILES = 16


def open_files_limit() -> int | None:
    """The open files a workload of this machine's agent may have: the hard limit, to which
    the agent raises its soft one (agent.slot.raise_open_files_limit); None if unlimited."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def _open_files_problems(name: str, jobs: list[Job], host: Host, limit: int) -> list[str]:
    """A section whose job processes each open more files at once (nrfiles, or openfiles
    when smaller: fio keeps that many open) than `limit` leaves beside fio's own."""
    out = []
    for section in jobs:
        files = section.number("nrfiles", 1)
        cap = section.number("openfiles", 0) if section.last("openfiles") else None
        if files is None:
            continue
        at_once = min(files, cap) if cap else files
        if section.flag("thread"):  # the clones are threads of one process: one fd table
            at_once *= max(section.number("numjobs", 1) or 1, 1)
        if at_once + FIO_OWN_FILES > limit:
            a = section.last("openfiles") if cap else section.last("nrfiles")
            if a is None:
                continue
            out.append(
                f"job {quote(name)}: {_shown(a.line.path)}:{a.line.number}: "
                f"{a.line.text.strip()}: a fio process opens {at_once:,} files at once, and "
                f"{host.name} lets a process open {limit:,} (fio's own need some): fio fails "
                "('try reducing/setting openfiles'); set openfiles= lower, or raise the "
                "limit (ulimit -Hn)"
            )
    return out


def numa_nodes() -> frozenset[int] | None:
    """The NUMA nodes this process may use (/proc/self/status Mems_allowed_list, what
    libnuma's numa_parse_nodestring checks a node against: fio's child has the same)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Mems_allowed_list:"):
                    return _node_list(line.split(":", 1)[1].strip())
    except OSError:
        pass
    return None


def _node_list(text: str) -> frozenset[int] | None:
    """The nodes of a list like `0-1,3` (libnuma's node string without `!`, `+`, `all`);
    None when it is not one."""
    nodes: set[int] = set()
    for piece in text.split(","):
        ends = piece.strip().split("-", 1)
        if not all(e.strip().isdigit() for e in ends):
            return None
        first, last = int(ends[0]), int(ends[-1])
        if last - first > 4096:
            return None
        nodes.update(range(first, last + 1) if first <= last else (first, last))
    return frozenset(nodes)


# NUMA options naming nodes: numa_cpu_nodes=LIST, numa_mem_policy=MODE:LIST (fio
# options.c str_numa_cpunodes_cb / str_numa_mpol_cb hand LIST to numa_parse_nodestring,
# which refuses a node this process may not use: "job dropped", after the slot's set-up)
NUMA_NODE_OPTIONS = ("numa_cpu_nodes", "numa_mem_policy")


def _numa_problem(option: str, value: str, allowed: frozenset[int], host: str) -> str | None:
    """Why libnuma refuses `option=value` on a host whose processes may use `allowed`
    nodes (the job is dropped as it starts), or None: a node not allowed, an inverted
    list that leaves none, no list where the mode needs one or a list where it takes
    none. `prefer` is left alone (fio warns and runs), as is a form not read here."""
    have = ",".join(str(n) for n in sorted(allowed)) or "none"
    text = value.strip()
    if option == "numa_mem_policy":
        mode, _, nodes = text.partition(":")
        mode, nodes = mode.strip(), nodes.strip()
        if mode in ("local", "default"):
            return f"the {mode} policy takes no node list" if nodes else None
        if mode not in ("bind", "interleave"):
            return None  # prefer: fio runs; another mode: fio's option check says
        if not nodes:
            return f"the {mode} policy needs a node list"
        text = nodes
    if not text:
        return "it names no NUMA node"
    if text == "all":
        return None
    listed = _node_list(text.lstrip("!+").strip())
    if listed is None:
        return None
    missing = sorted(listed - allowed)
    if missing:
        return f"NUMA node {missing[0]} is not one of {host}'s ({have})"
    if text.startswith("!") and not allowed - listed:
        return f"it leaves out every NUMA node {host} has ({have})"
    return None


def memory_bytes() -> int | None:
    """This machine's memory (/proc/meminfo MemTotal, what fio's os_phys_mem reads)."""
    kib = meminfo("MemTotal")
    return kib * 1024 if kib else None


@dataclass(frozen=True)
class Host:
    """What a host gives the fio jobs of a slot, for `host_problems`; a figure left None
    is not checked. `slots`: the slots that run there at once (a local fleet shares this
    machine; on AWS each slot has its own instance)."""

    name: str  # "this machine", or the instance type
    cpus: int | None = None
    huge_pages: bool | None = None
    memory_bytes: int | None = None
    slots: int = 1
    numa_nodes: frozenset[int] | None = None  # the NUMA nodes fio may use there
    aio_events: int | None = None  # libaio events the host has left (fs.aio-max-nr - aio-nr)
    open_files: int | None = None  # files a process may open (the agent raises to the hard limit)


# fio caps each process's lockmem at the host's memory less 128 MiB (memory.c
# fio_pin_memory); iofleet keeps a quarter of the host's memory (at least 1 GiB) out of
# what all of them lock together, for the kernel, the agent and fio's own buffers
FIO_LOCKMEM_SPARE = 128 << 20
LOCKMEM_KEEP_MIN = 1 << 30


def lockable_bytes(memory: int) -> int:
    """The most a slot's fio processes on a host of `memory` bytes may lock together."""
    return max(0, memory - max(memory // 4, LOCKMEM_KEEP_MIN))


def host_problems(name: str, params: Mapping[str, object], host: Host) -> list[str]:
    """Lines for what job `name`'s sections ask of `host` that it lacks: a CPU beyond its
    `cpus` (fio drops such a job as it starts: 'job global dropped'); I/O buffers in huge
    pages when it has none reserved (fio fails with 'no huge pages available' or 'Bad
    address' on every I/O), both after the slot has been set up; or more memory locked
    (`lockmem`, per job process: every `numjobs` clone of the sections that run together,
    times the slots on the host) than `lockable_bytes` leaves: the host runs out of memory
    and its kernel kills what it picks. KeyError / JobFileError as get_job."""
    job = get_job(name)
    try:
        jobs = read_jobs(job.path, plan_env(job, params))
    except JobTextError:
        return []  # reading_problems says what is wrong
    out: list[str] = []
    for section in jobs:
        for option in CPU_OPTIONS:
            a = section.last(option)
            if host.cpus is None or a is None or a.value is None or not a.known:
                continue
            if option == "sqthread_poll_cpu" and not section.flag("sqthread_poll"):
                continue  # used only with io_uring's kernel poll thread
            highest = _highest_cpu(option, a.value)
            if highest is not None and highest >= host.cpus:
                fails = (
                    "fio fails the job's I/O setup (error 22)"
                    if option == "sqthread_poll_cpu"
                    else "fio drops the job as it starts"
                )
                out.append(
                    f"job {quote(name)}: {_shown(a.line.path)}:{a.line.number}: "
                    f"{a.line.text.strip()}: CPU {highest} is beyond {host.name}'s "
                    f"{host.cpus} CPUs (0 to {host.cpus - 1}): {fails}"
                )
        for option in NUMA_NODE_OPTIONS:
            a = section.last(option)
            if host.numa_nodes is None or a is None or a.value is None or not a.known:
                continue
            why = _numa_problem(option, a.value, host.numa_nodes, host.name)
            if why:
                out.append(
                    f"job {quote(name)}: {_shown(a.line.path)}:{a.line.number}: "
                    f"{a.line.text.strip()}: {why}: fio drops the job as it starts"
                )
        a = section.last("mem")
        if host.huge_pages is not False or a is None or a.value is None or not a.known:
            continue
        kind = a.value.split(":", 1)[0].split(",", 1)[0]
        if kind in HUGE_PAGE_MEMORY:
            out.append(
                f"job {quote(name)}: {_shown(a.line.path)}:{a.line.number}: "
                f"{a.line.text.strip()}: {host.name} has no huge pages reserved "
                "(vm.nr_hugepages is 0): fio fails every I/O; use mem=malloc (the default)"
            )
    if host.memory_bytes is not None:
        out += _memory_problems(name, jobs, host, host.memory_bytes)
    if host.aio_events is not None:
        out += _aio_problems(name, jobs, host, host.aio_events)
    if host.open_files is not None:
        out += _open_files_problems(name, jobs, host, host.open_files)
    return list(dict.fromkeys(out))  # a [global] line, inherited by every section: once


@dataclass
class GroupMemory:
    """What the job processes of one stonewall group hold at once (`memory_at_once`)."""

    locked: int = 0  # lockmem, per process, capped as fio caps it
    locked_processes: int = 0
    lock_line: Assignment | None = None
    buffers: int = 0  # I/O buffers: iodepth x the largest block size, per process
    processes: int = 0
    buffer_line: Assignment | None = None


def memory_at_once(jobs: list[Job], memory: int) -> list[GroupMemory]:
    """Per stonewall group of `jobs` (they run one after the other), the memory its job
    processes (every `numjobs` clone; fio's main process holds neither) hold at once on a
    host of `memory` bytes: `lockmem`, capped at the memory less 128 MiB (memory.c
    fio_pin_memory), and the I/O buffers, `iodepth` x the largest block size
    (backend.c init_io_u; every engine, psync too), which fio fills, so they are resident.
    A value known only where fio runs (`$mb_memory`) counts as nothing."""
    per_process_cap = max(0, memory - FIO_LOCKMEM_SPARE)
    groups = []
    for sections in stonewall_groups(jobs):
        group = GroupMemory()
        for section in sections:
            _add_memory(group, section, per_process_cap)
        groups.append(group)
    return groups


def held_at_once(name: str, params: Mapping[str, object], memory: int) -> int:
    """The most memory one slot's fio processes of job `name` hold at once (locked and I/O
    buffers: `memory_at_once`'s largest group) on a host of `memory` bytes; 0 when the job
    does not read (reading_problems says why). KeyError / JobFileError as get_job."""
    job = get_job(name)
    try:
        jobs = read_jobs(job.path, plan_env(job, params))
    except JobTextError:
        return 0
    return max((g.locked + g.buffers for g in memory_at_once(jobs, memory)), default=0)


def _add_memory(group: GroupMemory, section: Job, per_process_cap: int) -> None:
    """Add one section's job processes to its group's memory (`memory_at_once`)."""
    clones = section.number("numjobs", 1)
    if clones is None or clones < 1:
        return
    amount = section.number("lockmem", 0)
    if amount is not None and amount < 0:  # fio reads -1 as all it may lock
        amount = per_process_cap
    if amount:
        group.locked += clones * min(amount, per_process_cap)
        group.locked_processes += clones
        group.lock_line = section.last("lockmem")
    depth = max(section.number("iodepth", 1) or 1, 1)
    sizes = [b for b in section.numbers("bs", (4096, 4096, 4096)) if b is not None]
    if sizes:
        # fio fills every buffer of a job that writes as it sets them up (backend.c
        # init_io_u: io_u_fill_buffer); a reader's buffers become resident as reads land
        # in them: one at a time on a synchronous engine
        if not _writes(section) and _synchronous(section):
            depth = 1
        group.buffers += clones * depth * max(sizes)
        group.processes += clones
        largest = section.last("iodepth") if depth > 1 else section.last("bs")
        if largest is not None and (group.buffer_line is None or depth > 1):
            group.buffer_line = largest


_SYNC_ENGINES = ("psync", "sync", "vsync", "pvsync", "pvsync2", "mmap", "splice")


def _writes(section: Job) -> bool:
    """The section writes (an `rw` known only where fio runs counts as writing): a mode
    of the plan's one table of what each mode does (expect._DIRECTIONS, _MIXED)."""
    from iofleet.plan.expect import _DIRECTIONS, _MIXED

    rw = section.last("rw")
    if rw is None:
        return False  # fio's default: read
    if not rw.known or rw.value is None:
        return True
    mode = rw.value.split(":", 1)[0].strip()
    return mode in _MIXED or "write" in _DIRECTIONS.get(mode, {})


def _synchronous(section: Job) -> bool:
    """The section's engine does one I/O at a time (fio's default, psync, included)."""
    engine = _engine(section)
    return engine is None or engine in _SYNC_ENGINES


def _memory_problems(name: str, jobs: list[Job], host: Host, memory: int) -> list[str]:
    """The group holding the most memory at once (`memory_at_once`: locked and I/O
    buffers), times the slots on the host, past `lockable_bytes(memory)`."""
    groups = memory_at_once(jobs, memory)
    if not groups:
        return []
    most = max(groups, key=lambda g: g.locked + g.buffers)
    limit = lockable_bytes(memory)
    if (most.locked + most.buffers) * host.slots <= limit:
        return []
    spare = (
        f"more than the {_bytes(limit)} {host.name} can spare of its {_bytes(memory)} (a "
        "quarter, at least 1 GiB, stays free): the host would run out of memory"
    )
    slots = f" x {host.slots} slots" if host.slots > 1 else ""
    line = most.buffer_line or most.lock_line
    if most.locked * host.slots > limit and most.lock_line is not None:
        line, processes, total = most.lock_line, most.locked_processes, most.locked * host.slots
        who = f"{processes} fio process{'es' if processes != 1 else ''}{slots}"
        verb = "locks" if processes * host.slots == 1 else "lock"
        what = f"{who} {verb} {_bytes(total)} at once"
    else:
        processes = most.processes
        total = (most.locked + most.buffers) * host.slots
        who = f"{processes} fio process{'es' if processes != 1 else ''}{slots}"
        verb = "holds" if processes * host.slots == 1 else "hold"
        locked = f" and {_bytes(most.locked * host.slots)} locked" if most.locked else ""
        what = (
            f"{who} {verb} {_bytes(total)} at once ({_bytes(most.buffers * host.slots)} of "
            f"I/O buffers, iodepth x the largest block size{locked})"
        )
    if line is None:
        return []
    where = f"{_shown(line.line.path)}:{line.line.number}: {line.line.text.strip()}"
    return [f"job {quote(name)}: {where}: {what}, {spare}"]


def _bytes(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:,.1f} GiB"
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 2**10:,.0f} KiB"


def _refused_by_fio(job: Job, raw_only: bool) -> list[tuple[Assignment, str]]:
    """Options of one job (with the values it runs with) that fio refuses as the job
    starts, after the slot has been set up: (the line, why)."""
    out: list[tuple[Assignment, str]] = []
    numjobs = job.last("numjobs")
    if numjobs is not None and job.number("numjobs", 1) == 0:
        out.append((numjobs, "numjobs=0 runs no job (fio fails: 'maximum number of jobs reached')"))
    # fio (fixup_options): a rate in any direction and a rate_iops in any direction
    for by_bytes, by_ios in (("rate", "rate_iops"), ("rate_min", "rate_iops_min")):
        second = job.last(by_ios)
        if (
            second is not None
            and any(job.numbers(by_bytes, (0, 0, 0)))
            and any(job.numbers(by_ios, (0, 0, 0)))
        ):
            out.append(
                (
                    second,
                    f"{by_bytes} and {by_ios} together: fio refuses them ('rate and "
                    "rate_iops are mutually exclusive'), whatever the directions",
                )
            )
    # fio (fixup_options): per direction, a rate below the minimum rate it is held to
    for cap, floor in (("rate", "rate_min"), ("rate_iops", "rate_iops_min")):
        caps, floors = job.numbers(cap, (0, 0, 0)), job.numbers(floor, (0, 0, 0))
        floor_line = job.last(floor)
        if floor_line is not None and any(
            c and f and c < f for c, f in zip(caps, floors, strict=True)
        ):
            out.append(
                (floor_line, f"{floor} above {cap}: fio refuses it ('minimum rate exceeds rate')")
            )
    zonemode, zonesize = job.last("zonemode"), job.last("zonesize")
    mode = ((zonemode.value or "") if zonemode is not None else "none").strip()
    zone_bytes = job.number("zonesize", 0)
    if zonesize is not None and mode == "none" and zone_bytes:
        out.append(
            (
                zonesize,
                "zonesize without zonemode=strided: fio refuses it ('--zonemode=none and "
                "--zonesize are not compatible')",
            )
        )
    if zonemode is not None and mode == "strided" and zone_bytes == 0:
        out.append(
            (
                zonemode,
                "zonemode=strided needs a zonesize: fio refuses it ('--zonesize must be "
                "specified when using --zonemode=strided')",
            )
        )
    append = job.last("file_append")
    if append is not None and job.flag("file_append") and _engine(job) == "mmap":
        out.append(
            (append, "file_append with ioengine=mmap: fio refuses it (mmap cannot extend a file)")
        )
    errors = job.last("block_error_percentiles")
    if errors is not None and job.flag("block_error_percentiles") and job.number("nrfiles", 1) != 1:
        out.append(
            (
                errors,
                "block_error_percentiles with more than one file: fio refuses it (the "
                "histogram is of a single file per job)",
            )
        )
    ignore = job.last("ignore_error")
    if ignore is not None and ignore.value is not None and ignore.known:
        why = _ignore_error_problem(ignore.value)
        if why:
            out.append((ignore, why))
    mask = job.last("cpumask")
    if mask is not None and mask.value is not None and mask.known:
        if fio_size(mask.value.strip()) == 0:  # `0`, `0x0`, `0k`: fio reads a size
            out.append((mask, "cpumask=0 names no CPU: fio fails the job (error 22)"))
    cpus = job.last("cpus_allowed")
    if cpus is not None and cpus.known and not (cpus.value or "").strip():
        out.append((cpus, "an empty cpus_allowed names no CPU: fio fails the job (error 22)"))
    # ioprio_set refuses a negative level or class (parse.c checks no minimum of 0)
    for option in ("prio", "prioclass"):
        given = job.last(option)
        level = job.number(option, 0)
        if given is not None and level is not None and level < 0:
            out.append((given, f"a negative {option}: fio fails the job (error 22)"))
    rw = job.last("rw")
    if rw is not None and rw.value and "trim" in rw.value and not raw_only:
        older = (
            " (and fio 3.28, Ubuntu 22.04's, has no randtrimwrite)"
            if rw.value.split(":", 1)[0].strip() == "randtrimwrite"
            else ""
        )
        out.append((rw, f"trims are for raw devices: on a file fio fails (error 25){older}"))
    fill = job.last("fill_device")
    if fill is not None and job.flag("fill_device") and not raw_only:
        out.append(
            (
                fill,
                "fill_device writes until the file system is full: the host's own disk for "
                "a local target, without end on EFS or S3; give size= (on a raw device the "
                "device's size bounds it)",
            )
        )
    zonemode = job.last("zonemode")
    if zonemode is not None and (zonemode.value or "").strip() == "zbd":
        out.append(
            (zonemode, "zonemode=zbd is for zoned block devices, which iofleet's targets are not")
        )
    direct = _direct_in_force(job)
    if direct is not None:
        from iofleet.plan.expect import _DIRECTIONS, _MIXED, _SLOTS

        kind = (rw.value if rw is not None and rw.value else "read").split(":", 1)[0].strip()
        used = {"read", "write"} if kind in _MIXED else set(_DIRECTIONS.get(kind, _SLOTS))
        sizes = [
            b
            for d, b in zip(
                ("read", "write", "trim"), job.numbers("bs", (4096, 4096, 4096)), strict=True
            )
            if b is not None and d in used
        ]
        odd = next((b for b in sizes if b % 512), None)
        if odd is not None:
            where = job.last("bs") or direct
            out.append(
                (
                    where,
                    f"direct I/O of {odd} bytes: O_DIRECT needs multiples of the device's "
                    "logical block (512 bytes at least; fio fails: 'Invalid argument')",
                )
            )
        # where the I/O starts in the file, and where in memory its buffer starts: both
        # must be aligned as the block is (fio: error 22 on the first I/O)
        for option, what in (
            ("offset", "an I/O starting at"),
            ("offset_increment", "a clone's I/O starting"),  # clone 1 on: with numjobs
            ("iomem_align", "I/O buffers starting"),  # mem_align is its alias
        ):
            a = job.last(option)
            value = job.last_number(option) if a is not None else None
            if option == "offset_increment" and (job.number("numjobs", 1) or 1) < 2:
                continue  # one clone starts at the offset itself
            if a is not None and isinstance(value, int) and value % 512:
                out.append(
                    (
                        a,
                        f"direct I/O with {what} {value} bytes: O_DIRECT needs multiples of "
                        "the device's logical block (512 bytes at least; fio fails: 'Invalid "
                        "argument')",
                    )
                )
        pre_read = job.last("pre_read")
        if pre_read is not None and job.flag("pre_read"):
            out.append(
                (
                    pre_read,
                    "pre_read reads the file into the page cache, which direct I/O bypasses "
                    "(fio fails the job with error 5)",
                )
            )
    # files of their own size (filesize=): I/O from `offset` on must hold a block
    start = job.last("offset")
    low = job.numbers("filesize", (None, None, None))[0] if job.last("filesize") else None
    offset = job.last_number("offset") if start is not None else None
    if start is not None and isinstance(offset, int) and offset > 0 and low:
        # fio: the range left against its smallest block of any direction (td_min_bs)
        smallest = min(b for b in job.numbers("bs", (4096, 4096, 4096)) if b is not None)
        if low > 0 and low - offset < smallest:
            out.append(
                (
                    start,
                    f"the files are {low} bytes (filesize=) and I/O starts at {offset}: less "
                    f"than a block ({smallest} bytes) is left (fio fails: 'you need to specify "
                    "valid offset=' or 'blocksize is larger than data set range')",
                )
            )
    depth_line, depth = job.last("iodepth"), job.number("iodepth", 1)
    if (
        depth_line is not None  # past fio's default of 1: the depth was given
        and _engine(job) == "io_uring"
        and depth is not None
        and depth > IO_URING_MAX_DEPTH
    ):
        out.append(
            (
                depth_line,
                f"io_uring takes at most {IO_URING_MAX_DEPTH:,} entries per ring "
                "(IORING_MAX_ENTRIES; fio fails with error 22)",
            )
        )
    name_problem = None if raw_only else _file_name_problem(job)
    if name_problem is not None:  # on a raw device fio is given --filename: no such names
        out.append(name_problem)
    return out


# engines that do their I/O through memory or pipes: O_DIRECT is not theirs to use
_NOT_DIRECT_ENGINES = ("mmap", "splice")


def _direct_in_force(job: Job) -> Assignment | None:
    """The line that makes the job's I/O O_DIRECT, or None: the last of `direct=` and
    `buffered=` (its inverse) decides, and an mmap or splice engine does no O_DIRECT."""
    last = None
    for a in job.assignments:
        if a.name in ("direct", "buffered"):
            last = a
    if last is None or not last.known:
        return None
    value = fio_int(last.value) if last.value is not None else 1
    on = bool(value) if last.name == "direct" else not value
    if _engine(job) in _NOT_DIRECT_ENGINES:
        return None
    return last if on else None


# the kernel's IORING_MAX_ENTRIES: io_uring_setup refuses more (EINVAL)
IO_URING_MAX_DEPTH = 32768
# a name in a directory (NAME_MAX)
NAME_MAX = 255


def _file_name_problem(job: Job) -> tuple[Assignment, str] | None:
    """fio names a job's files `SECTION.CLONE.FILE` (filesetup.c, without filename_format;
    the section's name, not `name=`: add_job is given the section name): a name past
    NAME_MAX bytes fails as the file is opened ('File name too long', error 36)."""
    if job.last("filename_format") is not None:
        return None
    clones, files = job.number("numjobs", 1), job.number("nrfiles", 1)
    if clones is None or files is None:
        return None
    longest = f"{job.section.name}.{max(clones - 1, 0)}.{max(files - 1, 0)}"
    if len(longest.encode("utf-8")) <= NAME_MAX:
        return None
    where = job.last("numjobs") or job.last("nrfiles")
    if where is None:  # the section name itself: the section's first option line
        sec = job.section
        mine = (a for a in job.assignments if a.line.path == sec.path and a.line.number > sec.line)
        where = next(mine, None)
    if where is None:
        return None
    return (
        where,
        f"fio names the job's files {longest[:40]}... ({len(longest.encode('utf-8'))} "
        f"bytes): more than the {NAME_MAX} a file name may have (fio fails: 'File name too "
        "long')",
    )
