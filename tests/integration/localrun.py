"""Helpers for tests that run `iofleet` on a matrix of their own in tmp_path and read the
outcome where it lands: the warehouse of its --out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb


def job_library(tmp_path: Path, jobs: dict[str, str]) -> Path:
    """`tmp_path/jobs` holding `{name}.fio` for each (name, text)."""
    library = tmp_path / "jobs"
    library.mkdir(exist_ok=True)
    for name, text in jobs.items():
        (library / f"{name}.fio").write_text(text)
    return library


def write_matrix(
    tmp_path: Path,
    workloads: Sequence[dict[str, Any]],
    parallelism: Sequence[int] = (1,),
    **more: Any,
) -> Path:
    """`tmp_path/m.json`: one local storage (`tmp_path/t`), these workloads."""
    doc = {
        "name": "t",
        "storage": [{"label": "a", "type": "local", "path": str(tmp_path / "t")}],
        "workloads": list(workloads),
        "parallelism": list(parallelism),
        **more,
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return path


def iofleet(
    tmp_path: Path,
    *args: str,
    library: Path | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`iofleet ARGS` in tmp_path (its TMPDIR too), with `library` as IOFLEET_FIO_JOBS."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    if library is not None:
        env["IOFLEET_FIO_JOBS"] = str(library)
    return subprocess.run(
        [sys.executable, "-m", "iofleet", *args],
        cwd=tmp_path,
        env=env,
        preexec_fn=preexec_fn,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_local(tmp_path: Path, matrix: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`iofleet local MATRIX --out out -q` (see `iofleet`)."""
    return iofleet(tmp_path, "local", str(matrix), "--out", "out", "-q", **kwargs)


def query(tmp_path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of `sql` in the warehouse of `tmp_path/out`, opened read-only."""
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()
