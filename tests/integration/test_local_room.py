"""`iofleet local` refuses a cell whose files will not fit on its target, before it
writes anything (iofleet/local/space.py), instead of filling the file system.

The target is a real tmpfs of a known size (needs root, as the loop-device tests do).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.mounts import tmpfs
from tests.integration.test_local_leftovers import sigkilled_while_populating

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "mnt", "1280m", "iofleet-room") as point:
        yield point


def _local(
    tmp_path: Path,
    path: Path,
    size: str,
    fleets: list[int],
    out: str = "out",
    plan: bool = False,
    depth: int = 32,
) -> tuple[int, str]:
    """`iofleet local` of fio (SIZE, IO_DEPTH) and ioping on the storage path `path`; with
    `plan`, `iofleet plan --target local` of the same matrix."""
    matrix = tmp_path / "m.json"
    doc = {
        "name": "room",
        "storage": [{"type": "local", "label": "small", "path": str(path)}],
        "workloads": [
            {
                "fio": "seq-write-1m-qd32",
                "params": {"SIZE": size, "RUNTIME": 1, "DIRECT": 0, "IO_DEPTH": depth},
            },
            {"ioping": {"count": 2, "interval_ms": 0}},
        ],
        "parallelism": fleets,
    }
    matrix.write_text(json.dumps(doc))
    command = (
        ("plan", str(matrix), "--target", "local")
        if plan
        else ("local", str(matrix), "--out", out, "-q")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "iofleet.cli", *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return proc.returncode, proc.stderr


def test_a_cell_that_would_fill_the_target_is_refused_before_anything_is_written(
    small_fs: Path, tmp_path: Path
) -> None:
    # given a 1,280 MiB file system, and a matrix whose second cell lays out 4 x 64 MiB
    # of fio files (and ioping's 1 MiB each) while 1 GiB is kept free
    before = os.statvfs(small_fs)
    # when it is planned for a local run, then run
    planned = _local(tmp_path, small_fs / "t", "64m", [1, 4], plan=True)
    code, err = _local(tmp_path, small_fs / "t", "64m", [1, 4])
    # then it is refused in one line naming the file, the storage, the cell and the room
    assert code == 3, err
    [line] = err.splitlines()
    assert line.startswith(f"iofleet: {tmp_path / 'm.json'}: storage[0].path: cell c0")
    assert "-small-x4-" in line, line
    assert "~260.0 MiB of files at once (4 slots x 65.0 MiB)" in line, line
    # and nothing was created: not the target, not --out, not one block on the file system
    assert list(small_fs.iterdir()) == []
    assert not (tmp_path / "out").exists()
    after = os.statvfs(small_fs)
    assert (after.f_bfree, after.f_ffree) == (before.f_bfree, before.f_ffree)
    # and the plan refused it first, with the same line
    assert planned == (3, err)


def test_a_target_on_a_file_system_with_no_capacity_says_so(tmp_path: Path) -> None:
    # given a directory of sysfs (statvfs: 0 blocks) as the storage path
    target = Path("/sys/fs")
    # when it is planned for a local run, then run
    planned = _local(tmp_path, target, "4m", [1], plan=True)
    code, err = _local(tmp_path, target, "4m", [1])
    # then both refuse it in one line that says why, not that it has "0.0 MiB free"
    assert code == 3, err
    [line] = err.splitlines()
    assert line.endswith(
        f"and the file system of {target} has no capacity (0 blocks: a kernel file "
        "system such as /proc or /sys): use smaller SIZE or parallelism, or a target with room"
    ), line
    assert planned == (3, err)
    assert not (tmp_path / "out").exists()


def test_a_cell_that_fits_runs_and_leaves_the_room_it_found(small_fs: Path, tmp_path: Path) -> None:
    # given the same file system and cells that fit beside the 1 GiB kept free
    code, err = _local(tmp_path, small_fs / "t", "32m", [1, 2])
    # then it runs, and its files are gone from the target afterwards
    assert code == 0, err
    target = small_fs / "t"
    assert [p for p in target.rglob("*") if p.is_file()] == []
    assert (tmp_path / "out" / "warehouse.duckdb").is_file()


@pytest.mark.slow
def test_a_dead_runs_leftovers_are_removed_before_the_room_is_checked(tmp_path: Path) -> None:
    # given a 1,280 MiB file system holding 200 MiB that a SIGKILLed run left there
    with tmpfs(tmp_path / "target", "1280m", "iofleet-room-dead") as target:
        empty = os.statvfs(target).f_bfree
        run = sigkilled_while_populating(
            tmp_path, writes='head -c 200M /dev/zero > "$IOFLEET_SHARED/data"'
        )
        (mark,) = target.glob(".iofleet-run-*.json")
        dead = mark.name.removeprefix(".iofleet-run-").removesuffix(".json")
        assert list(target.glob(f"iofleet-{dead}/*/shared/data"))
        assert os.statvfs(target).f_bfree < empty
        # when: a run into another --out needs 2 x 65 MiB beside the 1 GiB kept free,
        # which fits the empty file system and not the one with the dead run's 200 MiB
        code, err = _local(tmp_path, target, "64m", [2], out="out2")
        # then: it removed the dead run's files first, ran, and left the room it found
        assert code == 0, err
        assert [line for line in err.splitlines() if "removed" in line] == [
            f"iofleet: {target}: removed what run {dead} left there "
            f"(its runner, pid {run.proc.pid}, died without cleaning up)"
        ], err
        assert list(target.iterdir()) == []
        assert os.statvfs(target).f_bfree == empty
    assert (tmp_path / "out2" / "warehouse.duckdb").is_file()


@pytest.mark.slow
def test_a_run_refused_for_room_still_removes_a_dead_runs_leftovers_and_says_so(
    tmp_path: Path,
) -> None:
    # given a 1,280 MiB file system holding 200 MiB that a SIGKILLed run left there
    with tmpfs(tmp_path / "target", "1280m", "iofleet-room-dead") as target:
        empty = os.statvfs(target).f_bfree
        run = sigkilled_while_populating(
            tmp_path, writes='head -c 200M /dev/zero > "$IOFLEET_SHARED/data"'
        )
        (mark,) = target.glob(".iofleet-run-*.json")
        dead = mark.name.removeprefix(".iofleet-run-").removesuffix(".json")
        # when: a run that would not fit even on the empty file system (4 x 65 MiB)
        code, err = _local(tmp_path, target, "64m", [4], out="out2")
        # then: refused, after removing the dead run's files, in one line each
        assert code == 3, err
        removed, refused = err.splitlines()
        assert removed == (
            f"iofleet: {target}: removed what run {dead} left there "
            f"(its runner, pid {run.proc.pid}, died without cleaning up)"
        )
        assert "lays out ~260.0 MiB of files at once" in refused, refused
        assert list(target.iterdir()) == []
        assert os.statvfs(target).f_bfree == empty
    assert not (tmp_path / "out2").exists()


def test_the_bytes_a_slot_lays_out_are_what_fio_leaves_in_its_directory(tmp_path: Path) -> None:
    # given a slot's workloads as the agent runs them: one directory, one after the other;
    # randwrite (4 clones of 4 MiB, then 1 clone of 12 MiB) and a 6 MiB sequential write
    from iofleet.plan.expect import slot_file_bytes
    from iofleet.plan.fiojobs import render_command

    payloads = [
        {
            "kind": "fio",
            "name": "randwrite-16k-psync-16jobs",
            "params": {"SIZE": "4m", "NUM_JOBS": 4},
        },
        {
            "kind": "fio",
            "name": "randwrite-16k-psync-16jobs",
            "params": {"SIZE": "12m", "NUM_JOBS": 1},
        },
        {"kind": "fio", "name": "seq-write-1m-qd32", "params": {"SIZE": "6m"}},
    ]
    workdir = tmp_path / "slot"
    workdir.mkdir()
    for p in payloads:
        params = {**p["params"], "RUNTIME": 1, "DIRECT": 0}
        argv, text = render_command(p["name"], params, str(workdir))
        subprocess.run(argv, cwd=workdir, input=text.encode(), check=True, capture_output=True)
    # when the files fio left are summed (apparent sizes: what the file system must hold)
    on_disk = sum(f.stat().st_size for f in workdir.iterdir() if f.is_file())
    # then the plan's count is that: clone 0 grew to 12 MiB, clones 1-3 kept 4 MiB, and
    # the sequential file 6 MiB (30 MiB; adding the workloads up would say 34 MiB)
    assert on_disk == 30 * 2**20, sorted((f.name, f.stat().st_size) for f in workdir.iterdir())
    assert slot_file_bytes(payloads) == (on_disk, [])


@pytest.mark.parametrize(
    "lines",
    [
        "rw=read\noffset=300k\n",  # a read from 300k: fio lays the file out from byte 0
        "rw=write\noffset=1m\nnumjobs=3\noffset_increment=256k\n",  # clone k from 1m + k x 256k
        "rw=randwrite\nnrfiles=2\noffset=128k\n",  # each of the files from 128k
        "rw=read\noffset=50%\n",  # a share of a new file's size: 0
    ],
)
def test_the_bytes_a_job_starting_at_an_offset_lays_out_are_what_fio_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: str
) -> None:
    # the room check counted size= only, so `offset=100g` with size=1m passed and would
    # fill the target's file system (an audit's finding; real fio here, at small scale)
    from iofleet.plan.expect import slot_file_bytes
    from iofleet.plan.fiojobs import render_command

    library = tmp_path / "jobs"
    library.mkdir()
    (library / "off.fio").write_text(
        f"; d\n; @param TARGET=.\n[x]\ndirectory=${{TARGET}}\nbs=4k\nsize=64k\n{lines}"
    )
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    workdir = tmp_path / "slot"
    workdir.mkdir()
    argv, text = render_command("off", {}, str(workdir))
    subprocess.run(argv, cwd=workdir, input=text.encode(), check=True, capture_output=True)
    on_disk = sum(f.stat().st_size for f in workdir.iterdir() if f.is_file())
    assert on_disk > 0
    assert slot_file_bytes([{"kind": "fio", "name": "off", "params": {}}]) == (on_disk, [])


def test_a_target_kept_in_memory_is_held_to_the_memory_the_host_can_spare(
    tmp_path: Path,
) -> None:
    # a tmpfs reports whatever room its size= allows (here twice this machine's memory),
    # and its files are memory: without the check a cell could take all of it
    from iofleet.local.space import _memory_backed
    from iofleet.plan.fiojobs import memory_bytes

    total = memory_bytes()
    assert total
    with tmpfs(tmp_path / "mnt", f"{2 * total // 2**20}m", "iofleet-room-mem") as point:
        memory = _memory_backed(point)
        assert memory is not None and memory[0] == "tmpfs"
        spare = memory[1]
        size_mib = spare // 2**20 + 512  # past what the memory spares, far inside the tmpfs
        # when planned for a local run (nothing is laid out)
        code, err = _local(tmp_path, point / "t", f"{size_mib}m", [1], plan=True)
        # then it is refused for the memory, in one line
        assert code == 3, err
        [line] = err.splitlines()
        assert (
            f"and the file system of {point / 't'} is tmpfs, kept in this machine's memory" in line
        )
        # and a cell that fits the memory plans
        code, err = _local(tmp_path, point / "t", "64m", [1], plan=True)
        assert code == 0, err
        # files 512 MiB short of it plan, unless fio's buffers take 1 GiB beside them
        # (1,024 x 1 MiB in the writer: each fits alone, not together)
        size_mib = spare // 2**20 - 512
        code, err = _local(tmp_path, point / "t", f"{size_mib}m", [1], plan=True)
        assert code == 0, err
        code, err = _local(tmp_path, point / "t", f"{size_mib}m", [1], plan=True, depth=1024)
        assert code == 3, err
        [line] = err.splitlines()
        assert "beside the 1.0 GiB its fio processes hold at once (locked and I/O buffers)" in line
        assert list(point.iterdir()) == []
