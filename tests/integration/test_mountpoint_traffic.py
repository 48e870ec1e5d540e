"""What the Mountpoint cost counts (iofleet/plan/mountpoint.py fio_traffic) against what
fio really writes: the job files run here with this machine's fio, on a local
directory, and the files they leave are summed.

fio divides a job's `size` between its `nrfiles` files (fio's HOWTO, `size`): a job of
size 4 MiB and nrfiles=4 makes four 1 MiB files, not four of 4 MiB.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.plan.mountpoint import fio_job_problems, fio_traffic

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

JOB = """
[global]
directory=${{TARGET}}
filename_format=data.$jobnum.$filenum
create_serialize=0
ioengine=psync
bs=256k
size={size}
[w]
rw=write
create_on_open=1
numjobs={numjobs}
nrfiles={nrfiles}
[r]
stonewall
rw=read
numjobs={numjobs}
nrfiles={nrfiles}
"""


def _run(job: str, target: Path) -> None:
    path = target.parent / "job.fio"
    path.write_text(job.replace("${TARGET}", str(target)))
    result = subprocess.run(
        ["fio", "--output-format=json", str(path)], capture_output=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("numjobs", "nrfiles"), [(1, 1), (1, 4), (3, 2)])
def test_bytes_and_files_counted_are_what_fio_leaves_on_disk(
    numjobs: int, nrfiles: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a writer-then-reader job of 4 MiB per job, as a library job
    job = JOB.format(size="4m", numjobs=numjobs, nrfiles=nrfiles)
    library = tmp_path / "jobs"
    library.mkdir()
    header = "; writer then reader\n; @param TARGET=.      directory the files go in\n"
    (library / "wr.fio").write_text(header + job)
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    assert fio_job_problems(job, {"TARGET": "/mnt/iofleet"}) == []
    # when the plan counts it, and fio runs it
    written, read, files, notes = fio_traffic([{"kind": "fio", "name": "wr", "params": {}}])
    target = tmp_path / "target"
    target.mkdir()
    _run(job, target)
    # then the plan's bytes and files are those fio left
    on_disk = [p.stat().st_size for p in target.iterdir()]
    assert (written, files, notes) == (sum(on_disk), len(on_disk), [])
    assert read == written


def test_a_reader_with_fewer_larger_files_than_its_writer_is_refused_as_fio_lays_out(
    tmp_path: Path,
) -> None:
    # given a writer of two 2 MiB files and a reader of one 4 MiB file (same total size)
    job = JOB.format(size="4m", numjobs=1, nrfiles=2).replace(
        "[r]\nstonewall\nrw=read\nnumjobs=1\nnrfiles=2", "[r]\nstonewall\nrw=read\nnumjobs=1"
    )
    # then the plan refuses it
    [problem] = fio_job_problems(job, {"TARGET": "/mnt/iofleet"})
    assert "more or larger files" in problem
    # because fio extends the writer's first file to the reader's size: a write Mountpoint
    # cannot do (an existing object is not modified in place)
    target = tmp_path / "target"
    target.mkdir()
    _run(job, target)
    assert (target / "data.0.0").stat().st_size == 4 * 1024**2
