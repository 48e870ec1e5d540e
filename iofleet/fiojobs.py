"""The fio job library: `fio-jobs/*.fio` loaded, validated and rendered into a command.

A job file is plain fio syntax with `${VAR}` parameters (fio expands environment
variables itself). Its header declares the description and every parameter:

    ; One-line description
    ; @param RUNTIME=180   seconds of timed I/O

The format is documented in `fio-jobs/README.md`. Stdlib only: the agent imports
this module on a bare instance.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import iofleet

SUFFIX = ".fio"
# Set by render_command from the slot's target, never from a workload's params.
TARGET_PARAM = "TARGET"
# Values go into fio's environment, never through a shell; keep them plain tokens.
_VALUE_RE = re.compile(r"^[A-Za-z0-9._:/,+-]+$")
# fio splits `directory=` on ':' (several directories), so a target can't hold one.
_TARGET_RE = re.compile(r"^[A-Za-z0-9._/+-]+$")
_FILENAME_RE = re.compile(r"^[A-Za-z0-9._+-]+$")
_PARAM_RE = re.compile(r"^[;#]\s*@param\s+(?P<name>\S+?)=(?P<default>\S*)(?:\s+(?P<help>.*))?$")
_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_VAR_RE = re.compile(r"\$\{([^}]*)\}")


class JobFileError(ValueError):
    """A job file in the library is malformed; the message is one line."""


@dataclass(frozen=True)
class JobFile:
    name: str
    description: str
    path: Path
    params: dict[str, str]  # ${VAR} name (UPPER) -> default, in declaration order
    param_help: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "params": dict(self.params),
            "param_help": dict(self.param_help),
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
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise JobFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    first = lines[0] if lines else ""
    if not first.startswith(";") or not first[1:].strip() or "@param" in first:
        raise JobFileError(f"{path}: line 1 must be '; <one-line description>'")
    description = lines[0][1:].strip()
    params: dict[str, str] = {}
    param_help: dict[str, str] = {}
    used: list[str] = []
    has_target_dir = False
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if stripped.startswith((";", "#")):
            if "@param" not in stripped:
                continue
            match = _PARAM_RE.match(stripped)
            if not match:
                raise JobFileError(f"{path}:{number}: expected '; @param NAME=default  help'")
            name, default = match["name"], match["default"]
            if not _NAME_RE.match(name):
                raise JobFileError(f"{path}:{number}: parameter {name!r} must be UPPER_CASE")
            if name in params:
                raise JobFileError(f"{path}:{number}: parameter {name} declared twice")
            if not _VALUE_RE.match(default):
                raise JobFileError(f"{path}:{number}: default {default!r} is not a plain token")
            params[name] = default
            param_help[name] = (match["help"] or "").strip()
            continue
        if "gtod_reduce" in stripped:
            raise JobFileError(f"{path}:{number}: gtod_reduce is not allowed (it drops latencies)")
        if re.match(r"^filename\s*=", stripped):
            raise JobFileError(f"{path}:{number}: use directory=${{TARGET}}, never filename=")
        if re.match(r"^directory\s*=", stripped):
            has_target_dir = has_target_dir or stripped.replace(" ", "") == "directory=${TARGET}"
        for var in _VAR_RE.findall(line):
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
    return JobFile(path.stem, description, path, params, param_help)


def list_jobs() -> list[JobFile]:
    """Every job file in the library, sorted by name."""
    directory = jobs_dir()
    if not directory.is_dir():
        raise JobFileError(f"fio job library not found: {directory}")
    return [load_job_file(p) for p in sorted(directory.glob(f"*{SUFFIX}"))]


def job_names() -> list[str]:
    directory = jobs_dir()
    return sorted(p.stem for p in directory.glob(f"*{SUFFIX}")) if directory.is_dir() else []


def get_job(name: str) -> JobFile:
    """The named job file; KeyError if the library has none by that name."""
    if not _FILENAME_RE.match(name) or name.startswith("."):
        raise KeyError(name)
    path = jobs_dir() / f"{name}{SUFFIX}"
    if not path.is_file():
        raise KeyError(name)
    return load_job_file(path)


def _unknown_job(name: str) -> str:
    known = ", ".join(job_names()) or "none"
    return f"unknown fio job {name!r} (known: {known})"


def check_params(name: str, params: Mapping[str, object]) -> list[str]:
    """Problems with a workload's parameters (keys are case-insensitive); [] if fine."""
    try:
        job = get_job(name)
    except KeyError:
        return [_unknown_job(name)]
    settable = [p for p in job.params if p != TARGET_PARAM]
    problems: list[str] = []
    for key, value in params.items():
        upper = str(key).upper()
        if upper == TARGET_PARAM:
            problems.append(
                f"parameter {TARGET_PARAM} is set from the slot's target, not by params"
            )
            continue
        if upper not in job.params:
            problems.append(f"unknown parameter {key} (known: {', '.join(settable)})")
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            problems.append(f"parameter {upper}: expected a string or a number")
            continue
        if not _VALUE_RE.match(str(value)):
            problems.append(
                f"parameter {upper}: {str(value)!r} is not a plain token "
                "(letters, digits and . _ : / , + - only)"
            )
    return problems


def render_command(
    name: str,
    params: Mapping[str, object],
    target_dir: str,
    *,
    filename: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """argv and the `${VAR}` environment for running job `name` against `target_dir`.

    No shell is involved: the caller runs argv with os.environ overlaid by env.
    `filename` (a raw block device basename, e.g. "nvme1n1" with target_dir "/dev")
    makes every job of the file do its I/O on target_dir/filename: fio applies a
    command-line `--filename` given before the job file as a global option.
    Raises KeyError for an unknown job and ValueError (one line) for bad input.
    """
    job = get_job(name)
    problems = check_params(name, params)
    if problems:
        raise ValueError(f"fio job {name}: {problems[0]}")
    if not _TARGET_RE.match(target_dir):
        raise ValueError(
            f"fio job {name}: target directory {target_dir!r} must be letters, digits "
            "and . _ / + - only (fio splits directories on ':')"
        )
    env = dict(job.params)
    for key, value in params.items():
        env[str(key).upper()] = str(value)
    if TARGET_PARAM in env:
        env[TARGET_PARAM] = target_dir
    argv = ["fio", "--output-format=json+"]
    if filename is not None:
        if not _FILENAME_RE.match(filename) or filename.startswith("."):
            raise ValueError(f"fio job {name}: filename {filename!r} must be a plain basename")
        argv.append(f"--filename={filename}")
    argv.append(str(job.path))
    return argv, env
