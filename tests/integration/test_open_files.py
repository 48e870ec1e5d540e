"""A fio job opens all its `nrfiles` at once. The agent raises its soft limit of open
files to the hard one for its workloads (a shell's soft limit is often 1,024 of a far
higher hard one), and the local plan refuses a job that opens more than the hard limit
allows (fio failed as the job started: 'try reducing/setting openfiles')."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from tests.integration.localrun import iofleet, job_library, query, run_local, write_matrix

JOB = "; d\n; @param TARGET=.\n[x]\ndirectory=${{TARGET}}\nrw=write\nbs=1k\nsize={size}\nnrfiles={files}\n"


def _matrix(tmp_path: Path, files: int) -> tuple[Path, Path]:
    library = job_library(tmp_path, {"many": JOB.format(size=f"{files}k", files=files)})
    return write_matrix(tmp_path, [{"fio": "many"}]), library


def test_a_job_opening_more_files_than_the_soft_limit_runs(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"the hard limit of open files is {hard}")
    matrix, library = _matrix(tmp_path, 400)

    def low_soft_limit() -> None:  # as a login shell's 256, under the same hard limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    done = run_local(tmp_path, matrix, library=library, preexec_fn=low_soft_limit)
    # then fio opened its 400 files (before: "try reducing/setting openfiles", exit 1)
    assert done.returncode == 0, done.stdout[-800:] + done.stderr
    assert query(tmp_path, "SELECT io_bytes FROM fio_results") == [(400 * 1024,)]


def test_a_job_opening_more_files_than_the_hard_limit_is_refused(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard > 200_000:
        pytest.skip(f"the hard limit of open files is {hard}")
    matrix, library = _matrix(tmp_path, hard + 1)
    done = iofleet(tmp_path, "plan", str(matrix), "--target", "local", library=library)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert f"nrfiles={hard + 1}: a fio process opens {hard + 1:,} files at once" in line
    assert not (tmp_path / "t").exists()
