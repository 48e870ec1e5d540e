"""Hermetic asset staging: plain file copies, no Docker, no pip.

Each Lambda gets a directory holding its `handler.py` plus the `iofleet/`
package and `fio-jobs/`; the instance agent bundle holds `iofleet/` and
`fio-jobs/`. `fio-jobs/` is the job library `iofleet` itself uses: the directory
`IOFLEET_FIO_JOBS` names when it is set at synth, else the repository's `fio-jobs/`
(so the Plan Lambda and the agents run the jobs a local `iofleet plan` checked). Third-party code comes from the Powertools public layer
(Powertools, pydantic, X-Ray SDK), the runtime (boto3) and, for Summarize only,
the stats layer (numpy, scipy: infra/stats_layer.py, the one step that uses pip).
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", "*.egg-info")


class JobLibraryError(ValueError):
    """The fio job library cannot be deployed; the message is one line."""


def job_library() -> Path | None:
    """The fio job library to deploy (`iofleet.plan.fiojobs.jobs_dir`), after every job
    in it loaded as a plan would load it: a broken job would fail each matrix naming it
    on AWS, after the deploy. None when there is none (no IOFLEET_FIO_JOBS, no
    `fio-jobs/`). JobLibraryError for a library that is not a directory or a job that
    does not load."""
    from iofleet.plan.fiojobs import jobs_dir

    return _checked_library(jobs_dir(), bool(os.environ.get("IOFLEET_FIO_JOBS")))


@functools.cache
def _checked_library(jobs: Path, named: bool) -> Path | None:
    """`job_library` for one directory, loaded once per synth (every Lambda's staging and
    the agent's ask for it); an error is not cached, so it is raised each time."""
    from iofleet.plan.fiojobs import JobFileError, list_jobs

    if not jobs.is_dir():
        if named:
            raise JobLibraryError(
                f"{jobs}: the fio job library (IOFLEET_FIO_JOBS) is not a directory"
            )
        return None
    try:
        list_jobs()
    except JobFileError as exc:
        raise JobLibraryError(str(exc)) from None
    return jobs


def _copy_common(dest: Path) -> None:
    shutil.copytree(ROOT / "iofleet", dest / "iofleet", ignore=_IGNORE, dirs_exist_ok=True)
    jobs = job_library()
    if jobs is not None:
        shutil.copytree(jobs, dest / "fio-jobs", ignore=_IGNORE, dirs_exist_ok=True)


def stage_lambda(name: str, staging_root: Path) -> Path:
    """A fresh directory with lambdas/<name>/handler.py at its root + iofleet/."""
    src = ROOT / "lambdas" / name / "handler.py"
    if not src.is_file():
        raise FileNotFoundError(f"no handler for Lambda {name!r}: {src}")
    dest = staging_root / f"lambda-{name}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy2(src, dest / "handler.py")
    _copy_common(dest)
    return dest


def stage_agent(staging_root: Path) -> Path:
    dest = staging_root / "agent"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    _copy_common(dest)
    return dest
