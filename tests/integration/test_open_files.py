"""A fio job opens all its `nrfiles` at once. The agent raises its soft limit of open
files to the hard one for its workloads (a shell's soft limit is often 1,024 of a far
higher hard one), and the local plan refuses a job that opens more than the hard limit
allows (fio failed as the job started: 'try reducing/setting openfiles')."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

JOB = "; d\n; @param TARGET=.\n[x]\ndirectory=${{TARGET}}\nrw=write\nbs=1k\nsize={size}\nnrfiles={files}\n"


def _matrix(tmp_path: Path, files: int) -> tuple[Path, dict[str, str]]:
    library = tmp_path / "jobs"
    library.mkdir(exist_ok=True)
    (library / "many.fio").write_text(JOB.format(size=f"{files}k", files=files))
    matrix = tmp_path / "m.json"
    matrix.write_text(
        json.dumps(
            {
                "name": "files",
                "storage": [{"label": "a", "type": "local", "path": str(tmp_path / "t")}],
                "workloads": [{"fio": "many"}],
                "parallelism": [1],
            }
        )
    )
    return matrix, dict(os.environ, IOFLEET_FIO_JOBS=str(library), TMPDIR=str(tmp_path))


def test_a_job_opening_more_files_than_the_soft_limit_runs(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"the hard limit of open files is {hard}")
    matrix, env = _matrix(tmp_path, 400)

    def low_soft_limit() -> None:  # as a login shell's 256, under the same hard limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    done = subprocess.run(
        [sys.executable, "-m", "iofleet", "local", str(matrix), "--out", "out", "-q"],
        cwd=tmp_path,
        env=env,
        preexec_fn=low_soft_limit,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # then fio opened its 400 files (before: "try reducing/setting openfiles", exit 1)
    assert done.returncode == 0, done.stdout[-800:] + done.stderr
    con = duckdb.connect(str(tmp_path / "out" / "warehouse.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT io_bytes FROM fio_results").fetchall()
    finally:
        con.close()
    assert rows == [(400 * 1024,)]


def test_a_job_opening_more_files_than_the_hard_limit_is_refused(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard > 200_000:
        pytest.skip(f"the hard limit of open files is {hard}")
    matrix, env = _matrix(tmp_path, hard + 1)
    done = subprocess.run(
        [sys.executable, "-m", "iofleet", "plan", str(matrix), "--target", "local"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert f"nrfiles={hard + 1}: a job process opens {hard + 1:,} files at once" in line
    assert not (tmp_path / "t").exists()
