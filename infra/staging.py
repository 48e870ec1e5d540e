"""Hermetic asset staging: plain file copies, no Docker, no pip.

Each Lambda gets a directory holding its `handler.py` plus the `iofleet/`
package and `fio-jobs/`; the instance agent bundle holds `iofleet/` and
`fio-jobs/`. Third-party code comes from the Powertools public layer
(Powertools, pydantic, X-Ray SDK), the runtime (boto3) and, for Summarize only,
the stats layer (numpy, scipy: infra/stats_layer.py, the one step that uses pip).
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", "*.egg-info")


def _copy_common(dest: Path) -> None:
    shutil.copytree(ROOT / "iofleet", dest / "iofleet", ignore=_IGNORE, dirs_exist_ok=True)
    jobs = ROOT / "fio-jobs"
    if jobs.is_dir():
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
