"""The read-only library jobs lay their files out in 1 MiB writes (`bs=READ,1m`): what
the device sees is reads of the job's own block size, and the file read is written data.

Checked on ext4 over a loop device this test creates, from the kernel's block-layer
counters (`/sys/block/loopN/stat`) and the file's bytes, not from fio's options.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.plan.fiojobs import render_command
from tests.integration.test_device_guard import _REASON, Loops, _sh

pytestmark = [pytest.mark.device] + ([pytest.mark.skip(reason=_REASON)] if _REASON else [])

READ_ONLY = {"latency-4k-qd1-randread": 4096, "randread-16k-psync-16jobs": 16384}
SIZE = 8 << 20


def _reads(device: Path) -> tuple[int, int]:
    """(read requests completed, sectors read) since boot, from the block layer."""
    fields = (Path("/sys/block") / device.name / "stat").read_text().split()
    return int(fields[0]), int(fields[2])


@pytest.mark.parametrize(("name", "block"), sorted(READ_ONLY.items()))
def test_read_only_job_reads_its_block_size_from_a_written_file(
    tmp_path: Path, name: str, block: int
) -> None:
    if shutil.which("fio") is None or shutil.which("strace") is None:
        pytest.skip("fio and strace are needed (make test-tools installs them)")
    kit = Loops(tmp_path)
    try:
        device = kit.device(size_mib=128)
        _sh("mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0", str(device))
        mnt = kit.mount(device)
        workdir = mnt / "w"
        workdir.mkdir()
        params = {"RUNTIME": "1", "SIZE": str(SIZE), "DIRECT": "1"}
        if name.startswith("randread-16k"):
            params["NUM_JOBS"] = "2"
        argv, text = render_command(name, params, str(workdir))
        _sh("sync")
        before = _reads(device)
        # when: the job runs as the agent runs it (argv and environment)
        trace = tmp_path / "writes.strace"
        done = subprocess.run(
            ["strace", "-f", "--seccomp-bpf", "-e", "trace=write,pwrite64", "-o", str(trace)]
            + argv,
            input=text,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        after = _reads(device)
        assert done.returncode == 0, done.stderr
        requests, sectors = after[0] - before[0], after[1] - before[1]
        # then: the device served reads of the job's block size (a few 4 KiB metadata
        # reads of ext4 may come along; 1 MiB reads would pull the mean far above it)
        assert requests > 100
        mean = sectors * 512 / requests
        assert 0.9 * block <= mean <= block, f"mean read {mean:.0f} bytes, job reads {block}"
        # and fio laid each file out in 1 MiB writes (the job's own block size before)
        mib_writes = len(re.findall(r", 1048576\) = 1048576$", trace.read_text(), re.M))
        # and every file it read is written data: no hole, no unwritten extent, not zeros
        files = sorted(p for p in workdir.iterdir() if p.is_file())
        assert files
        assert mib_writes >= len(files) * SIZE // (1 << 20)
        for path in files:
            assert path.stat().st_size == SIZE
            with path.open("rb") as handle:
                assert os.lseek(handle.fileno(), 0, os.SEEK_HOLE) == SIZE
                for at in range(0, SIZE, SIZE // 16):
                    handle.seek(at)
                    assert handle.read(block).strip(b"\0"), f"zeros at {at} in {path.name}"
    finally:
        kit.release()
