"""fio, the burst drain and ioping on a raw block target do their I/O on the device itself.

Proof is taken where the I/O lands, never from fio's own fields: each test runs
the real agent (`run_slot` with a block target on a loop device over a blank
sparse backing file), then reads the BACKING FILE and finds the written bytes
in the regions fio's options put them (and zeros everywhere else), and reads
the kernel's per-device counters (/sys/block/<loop>/stat: sectors read and
written) for reads. It also checks that no regular file appeared in the
agent's scratch working directory, the process's cwd or /dev (where fio laid
out a file named after the device before the fix).

Needs root and loop devices (skipped with the reason otherwise), like the
device guard tests.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import iofleet.agent.slot as slot_module
from iofleet.agent.slot import run_slot
from iofleet.plan.fiojobs import list_jobs, raw_plan_problem
from iofleet.plan.jobtext import size_bytes
from tests.integration.proctable import wait_for
from tests.integration.test_device_guard import (
    _REASON,
    EBS_LINK,
    Loops,
    block_payload,
    free_loop_name,
)

pytestmark = [pytest.mark.device] + ([pytest.mark.skip(reason=_REASON)] if _REASON else [])

RUN_ID = "raw-20261121t000000z"
CELL_ID = "c000-loop-x1-r1"
DEVICE_MIB = 64
SECTOR = 512
# Tiny: one second, 4 MiB regions, two clones per section where the job has NUM_JOBS.
SHORT = {
    "RUNTIME": "1",
    "SIZE": "4m",
    "NUM_JOBS": "2",
    "IO_DEPTH": "4",
    "BURST_START": "0",
    "BURST_RUNTIME": "1",
    "WRITE_RATE": "8m",
}
JOBS = [job.name for job in list_jobs()]


def _params(name: str) -> dict[str, str]:
    declared = next(job for job in list_jobs() if job.name == name).params
    return {k: v for k, v in SHORT.items() if k in declared}


def _sectors(device: Path) -> tuple[int, int]:
    """(sectors read, sectors written) since boot, from the kernel's block-layer counters."""
    fields = (Path("/sys/block") / device.name / "stat").read_text().split()
    return int(fields[2]), int(fields[6])


def _nonzero_chunks(backing: Path, chunk: int = 4096) -> list[int]:
    """Offsets of the backing file's chunks that hold any non-zero byte."""
    found = []
    with backing.open("rb") as handle:
        offset = 0
        while block := handle.read(1 << 20):
            for i in range(0, len(block), chunk):
                if block[i : i + chunk].strip(b"\0"):
                    found.append(offset + i)
            offset += len(block)
    return found


def _top_level_files(directory: Path) -> set[str]:
    """Regular files directly in `directory` (where fio laid out its file before the fix)."""
    return {str(p) for p in directory.iterdir() if p.is_file() and not p.is_symlink()}


def _regular_files(directory: Path) -> set[str]:
    found = set()
    for root, _dirs, files in os.walk(directory):
        for name in files:
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                found.add(str(path))
    return found


@dataclass
class RawRun:
    device: Path
    backing: Path
    by_id: Path
    tmp_path: Path
    cwd: Path
    workdir_files: list[set[str]]  # regular files in the agent's workdir, just before cleanup
    child_io: list[tuple[int, int]]  # (sectors read, written) on the device while each child ran

    def slot_dir(self) -> Path:
        return self.tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000"

    def slot_json(self) -> dict:
        return json.loads((self.slot_dir() / "slot.json").read_text())

    def artifact(self, name: str) -> dict:
        text = (self.slot_dir() / name).read_text()
        return json.loads(text[text.index("{") :])

    def run(
        self, workloads: list[dict], burst: dict | None = None, *, created_by_run: bool = False
    ) -> tuple[int, int, int]:
        """Run a slot; (exit code, sectors read, sectors written) on the device while its
        fio / ioping children ran (the guard's own reads before them are not counted)."""
        payload = self.payload(workloads, burst, created_by_run=created_by_run)
        dev_before = _top_level_files(Path("/dev"))
        self.child_io.clear()
        code = run_slot(payload)
        assert _top_level_files(Path("/dev")) - dev_before == set(), "a regular file in /dev"
        assert _regular_files(self.cwd) == set(), "a regular file in the cwd"
        assert self.workdir_files and self.workdir_files[-1] == set(), (
            f"files in the agent's workdir: {self.workdir_files}"
        )
        return code, sum(r for r, _ in self.child_io), sum(w for _, w in self.child_io)

    def payload(
        self, workloads: list[dict], burst: dict | None = None, *, created_by_run: bool = False
    ) -> dict:
        payload = block_payload(
            self.tmp_path, self.by_id, workloads, run_id=RUN_ID, created_by_run=created_by_run
        )
        if burst is not None:
            payload["burst"] = burst
        return payload

    def loaded(self) -> tuple[list[int], list[str]]:
        """Ingest the slot's raw files into a fresh warehouse: (the workload indexes that
        have fio_results rows, the names of the files with an ingest_errors row)."""
        from iofleet.results.warehouse import Warehouse

        with Warehouse(self.tmp_path / "loaded.duckdb") as wh:
            wh.ingest_dir(self.tmp_path / "raw")
            fio = wh.con.execute(
                "SELECT DISTINCT workload_index FROM fio_results ORDER BY 1"
            ).fetchall()
            errors = wh.con.execute("SELECT object_key FROM ingest_errors ORDER BY 1").fetchall()
        return [wi for (wi,) in fio], [key.rsplit("/", 1)[1] for (key,) in errors]


def _raw_run(
    kit: Loops,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    sector_size: int | None = None,
    name: str | None = None,
    relative_link: bool = False,
) -> RawRun:
    """A blank loop device named as the slot's EBS volume, with the agent's children and
    cleanup watched (see RawRun)."""
    backing = kit.image(DEVICE_MIB)
    device = kit.attach(backing, sector_size=sector_size, name=name)
    assert _nonzero_chunks(backing) == []
    by_id = tmp_path / "by-id"
    by_id.mkdir()
    # udev's by-id links are relative (`../../nvme1n1`); the guard's tests use absolute ones
    target = os.path.relpath(device, by_id) if relative_link else device
    (by_id / EBS_LINK).symlink_to(target)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    seen: list[set[str]] = []
    real_cleanup = slot_module.cleanup_target

    def spy_cleanup(target):  # type: ignore[no-untyped-def]
        seen.append(_regular_files(target.workdir))  # what the workloads left behind
        return real_cleanup(target)

    child_io: list[tuple[int, int]] = []
    real_run_child = slot_module.run_child

    def counting_run_child(*args, **kwargs):  # type: ignore[no-untyped-def]
        read0, written0 = _sectors(device)
        try:
            return real_run_child(*args, **kwargs)
        finally:
            read1, written1 = _sectors(device)
            child_io.append((read1 - read0, written1 - written0))

    monkeypatch.setattr(slot_module, "cleanup_target", spy_cleanup)
    monkeypatch.setattr(slot_module, "run_child", counting_run_child)
    return RawRun(device, backing, by_id, tmp_path, cwd, seen, child_io)


@pytest.fixture
def raw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawRun]:
    kit = Loops(tmp_path)
    try:
        yield _raw_run(kit, tmp_path, monkeypatch)
    finally:
        kit.release()


@pytest.fixture
def raw_4kn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawRun]:
    """A 4Kn device: 4096-byte logical blocks (losetup --sector-size 4096)."""
    kit = Loops(tmp_path)
    try:
        run = _raw_run(kit, tmp_path, monkeypatch, sector_size=4096)
        assert _logical_block(run.device) == 4096
        yield run
    finally:
        kit.release()


def _logical_block(device: Path) -> int:
    return int((Path("/sys/block") / device.name / "queue" / "logical_block_size").read_text())


def _regions(doc: dict, direction: str) -> list[tuple[int, int]]:
    """[start, end) of every job process that did `direction` I/O, from fio's options."""
    options = doc["global options"]
    increment = int(options["offset_increment"])
    regions = []
    for job in doc["jobs"]:
        merged = {**options, **job["job options"]}
        if job[direction]["io_bytes"] == 0:
            continue
        size = size_bytes(merged["size"])
        for clone in range(int(merged.get("numjobs", "1"))):
            regions.append((clone * increment, clone * increment + size))
    return regions


@pytest.mark.parametrize("name", JOBS)
def test_every_library_job_does_its_io_on_the_device(raw: RawRun, name: str) -> None:
    _job_does_its_io_on_the_device(raw, name, _params(name))


@pytest.mark.parametrize("name", JOBS)
def test_every_library_job_does_its_io_on_a_4kn_device(raw_4kn: RawRun, name: str) -> None:
    _job_does_its_io_on_the_device(raw_4kn, name, _params(name))


@pytest.mark.parametrize("fixture", ["raw", "raw_4kn"])
def test_regions_start_on_whole_blocks_whatever_the_size(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    # given a SIZE that is no whole number of 4 KiB blocks (nor of 512-byte sectors): before
    # the fix clone 1 started at byte 4000000 and the kernel refused its first O_DIRECT write
    run: RawRun = request.getfixturevalue(fixture)
    params = {"RUNTIME": "1", "SIZE": "4000000", "NUM_JOBS": "2"}

    doc = _job_does_its_io_on_the_device(run, "randwrite-16k-psync-16jobs", params)

    increment = int(doc["global options"]["offset_increment"])
    assert increment % 4096 == 0 and 4000000 <= increment < 4000000 + 4096


def _job_does_its_io_on_the_device(raw: RawRun, name: str, params: dict[str, str]) -> dict:
    """Run library job `name` on the raw device and prove where its I/O landed; its fio
    JSON (or {} when the job is one a raw volume refuses)."""
    fio = {"kind": "fio", "name": name, "params": params}
    # a job the plan refuses on a raw volume (e.g. Mountpoint's own job, with its
    # filename_format) is refused by the agent too, for the same reason, and writes nothing
    refused = raw_plan_problem(name, fio["params"], raw.backing.stat().st_size)

    code, sectors_read, sectors_written = raw.run([fio])

    if refused is not None:
        assert code == 1
        entry = raw.slot_json()["workloads"][0]
        assert entry["status"] == "FAILED" and refused in entry["error"]
        assert _nonzero_chunks(raw.backing) == []
        return {}
    assert code == 0, raw.slot_json()["error"]
    doc = raw.artifact(f"w00-fio-{name}.json")
    assert doc["global options"]["filename"] == str(raw.device)
    read_bytes = sum(job["read"]["io_bytes"] for job in doc["jobs"])
    write_bytes = sum(job["write"]["io_bytes"] for job in doc["jobs"])
    assert read_bytes + write_bytes > 0
    # reads: the kernel counted at least as many sectors read from the device as fio reports
    assert sectors_read * SECTOR >= read_bytes
    assert sectors_written * SECTOR >= write_bytes
    written = _nonzero_chunks(raw.backing)
    if write_bytes == 0:
        assert written == [], "a read-only job changed the device"
        return doc
    # writes: every writing job process left data in its own region, and nothing outside them
    regions = _regions(doc, "write")
    assert len(regions) >= 2 if "NUM_JOBS" in fio["params"] else len(regions) == 1
    for start, end in regions:
        assert any(start <= at < end for at in written), f"no data in [{start}, {end})"
    stray = [at for at in written if not any(s <= at < e for s, e in regions)]
    assert stray == [], f"data outside the job regions at {stray[:5]}"
    return doc


def test_regions_that_do_not_fit_on_the_device_fail_before_writing(raw: RawRun) -> None:
    # given 16 job processes of 8 MiB each on a 64 MiB device
    params = {"RUNTIME": "1", "SIZE": "8m", "NUM_JOBS": "16"}
    fio = {"kind": "fio", "name": "randwrite-16k-psync-16jobs", "params": params}

    code, _, sectors_written = raw.run([fio])

    assert code == 1
    entry = raw.slot_json()["workloads"][0]
    assert entry["status"] == "FAILED"
    assert (
        f"on {raw.device}: needs 128 MiB of the device (16 job processes x 8 MiB" in entry["error"]
    )
    assert _nonzero_chunks(raw.backing) == []


def test_burst_drain_writes_the_device(raw: RawRun) -> None:
    fio = {
        "kind": "fio",
        "name": "latency-4k-qd1-randread",
        "params": _params("latency-4k-qd1-randread"),
    }
    action = {"workload_index": 0, "action": "drain", "seconds": 0.5, "rw": "write", "bs": "1m"}

    code, _, sectors_written = raw.run([fio], {"policy": "drain", "actions": [action]})

    assert code == 0, raw.slot_json()["error"]
    drain = raw.artifact("w00-drain.json")["jobs"][0]
    assert drain["write"]["io_bytes"] > 0
    assert sectors_written * SECTOR >= drain["write"]["io_bytes"]
    written = _nonzero_chunks(raw.backing)
    # a sequential write from the device's start: its first MiB is data
    assert written[: 1 << 8] == list(range(0, 1 << 20, 4096))


def test_ioping_writes_and_reads_the_device(raw: RawRun) -> None:
    writes = {"kind": "ioping", "count": 8, "interval_ms": 0, "write": True, "size": "4k"}
    reads = {"kind": "ioping", "count": 8, "interval_ms": 0, "size": "4k", "direct": True}

    code, _, sectors_written = raw.run([writes])
    assert code == 0, raw.slot_json()["error"]
    # (the writes left data: the device is no longer blank, so the second slot is "ours")
    code_reads, sectors_read, _ = raw.run([reads], created_by_run=True)

    assert code_reads == 0, raw.slot_json()["error"]
    assert sectors_written * SECTOR >= 8 * 4096
    assert len(_nonzero_chunks(raw.backing)) >= 1  # ioping writes random data at random offsets
    assert sectors_read * SECTOR >= 8 * 4096


def test_ioping_direct_below_the_logical_block_fails_before_it_runs(raw_4kn: RawRun) -> None:
    # given a 4Kn device: the kernel refuses O_DIRECT requests of 512 bytes (EINVAL), so
    # ioping -D -s 512 could only fail with "request failed: Invalid argument"
    small = {"kind": "ioping", "count": 4, "interval_ms": 0, "size": "512", "direct": True}

    code, _, _ = raw_4kn.run([{**small, "write": True}, small])

    assert code == 1
    errors = [w["error"] for w in raw_4kn.slot_json()["workloads"]]
    assert (
        errors
        == [
            f"ioping size 512 on {raw_4kn.device}: direct I/O needs whole logical blocks of "
            "4096 bytes (the kernel would refuse it); use a multiple of 4096"
        ]
        * 2
    )
    assert raw_4kn.child_io == []  # ioping never started
    assert _nonzero_chunks(raw_4kn.backing) == []


def test_ioping_direct_in_whole_blocks_writes_a_4kn_device(raw_4kn: RawRun) -> None:
    writes = {"kind": "ioping", "count": 8, "interval_ms": 0, "size": "4k", "direct": True}

    code, _, sectors_written = raw_4kn.run([{**writes, "write": True}])

    assert code == 0, raw_4kn.slot_json()["error"]
    assert sectors_written * SECTOR >= 8 * 4096
    assert _nonzero_chunks(raw_4kn.backing) != []


@pytest.fixture
def raw_loop_123(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawRun]:
    """A device with a large number (/dev/loop123 or the next free one), found through a
    relative by-id link as udev makes them."""
    kit = Loops(tmp_path)
    try:
        yield _raw_run(kit, tmp_path, monkeypatch, name=free_loop_name(123), relative_link=True)
    finally:
        kit.release()


def test_a_large_device_number_behind_a_relative_link_gets_the_io(raw_loop_123: RawRun) -> None:
    run = raw_loop_123
    assert int(run.device.name.removeprefix("loop")) >= 123
    assert not os.readlink(run.by_id / EBS_LINK).startswith("/")

    doc = _job_does_its_io_on_the_device(run, "seq-write-1m-qd32", _params("seq-write-1m-qd32"))

    assert doc["global options"]["filename"] == str(run.device)
    manifest = json.loads((run.slot_dir() / "manifest.json").read_text())
    assert manifest["target_device"] == str(run.device)


@pytest.fixture
def raw_high(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawRun]:
    """A device numbered 300 or more: once detached, its number is one `losetup --find`
    in another session is unlikely to hand out while this test still points at it."""
    kit = Loops(tmp_path)
    try:
        yield _raw_run(kit, tmp_path, monkeypatch, name=free_loop_name(300))
    finally:
        kit.release()


def test_a_device_detached_while_the_slot_holds_it_stays_until_the_slot_ends(
    raw_high: RawRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = raw_high
    # given `losetup -d` on the device after the guard claimed it, just before fio starts:
    # the kernel only marks a loop device that is open for autoclear (LOOP_CLR_FD on a busy
    # device), so fio's I/O still lands on it, and the device goes when the slot lets go
    detached: list[int] = []
    counting = slot_module.run_child

    def detach_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not detached:
            detached.append(subprocess.run(["losetup", "--detach", str(raw.device)]).returncode)
        return counting(*args, **kwargs)

    monkeypatch.setattr(slot_module, "run_child", detach_first)
    fio = {"kind": "fio", "name": "seq-write-1m-qd32", "params": _params("seq-write-1m-qd32")}

    code, _, sectors_written = raw.run([fio])

    assert detached == [0]
    assert code == 0, raw.slot_json()["error"]
    assert sectors_written > 0 and _nonzero_chunks(raw.backing) != []
    assert not (Path("/sys/block") / raw.device.name / "loop").exists()  # now it is gone

    # and the next slot on that volume finds the empty node and refuses it in one line
    code, _, _ = raw.run([fio])

    assert code == 1
    assert raw.slot_json()["error"] == (
        f"target: refusing {raw.device}: it has no capacity (0 bytes: no medium, or a loop "
        "device with nothing attached)"
    )


LOOP_SET_STATUS64, LOOP_GET_STATUS64 = 0x4C04, 0x4C05  # linux/loop.h
LO_SIZELIMIT_AT = 32  # struct loop_info64: lo_device, lo_inode, lo_rdevice, lo_offset, lo_sizelimit


def _shrink(device: Path, size_limit: int) -> None:
    """Cut a bound loop device to `size_limit` bytes under its openers (LOOP_SET_STATUS64 with
    lo_sizelimit): the block device shrinks at once, as a volume that goes away does."""
    fd = os.open(device, os.O_RDONLY)
    try:
        info = bytearray(232)  # sizeof(struct loop_info64)
        fcntl.ioctl(fd, LOOP_GET_STATUS64, info)
        struct.pack_into("<Q", info, LO_SIZELIMIT_AT, size_limit)
        fcntl.ioctl(fd, LOOP_SET_STATUS64, info)
    finally:
        os.close(fd)


def test_a_device_that_shrinks_under_the_slot_fails_its_workloads_with_the_reason(
    raw: RawRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a slot of three workloads whose device shrinks to 4 KiB once the agent has laid
    # out the second (the region fitted then) and just before fio opens it
    children: list[list[str]] = []
    counting = slot_module.run_child

    def shrink_before_the_second(argv, **kwargs):  # type: ignore[no-untyped-def]
        children.append(argv)
        if len(children) == 2:
            _shrink(raw.device, 4096)
        return counting(argv, **kwargs)

    monkeypatch.setattr(slot_module, "run_child", shrink_before_the_second)
    fio = {"kind": "fio", "name": "seq-write-1m-qd32", "params": _params("seq-write-1m-qd32")}
    ioping = {"kind": "ioping", "count": 4, "interval_ms": 0, "write": True}

    code, _, _ = raw.run([fio, fio, ioping])

    # then the first workload's results stand, the second fails saying what happened to the
    # device, and the third is not run on it
    assert code == 1
    entries = raw.slot_json()["workloads"]
    assert entries[0]["status"] == "SUCCEEDED" and raw.artifact("w00-fio-seq-write-1m-qd32.json")
    change = f"{raw.device} changed size since the guard claimed it (64 MiB -> 0.00390625 MiB)"
    # (fio itself reports success: it caps its I/O to the shrunk device without a word)
    assert (entries[1]["status"], entries[1]["error"]) == ("FAILED", change)
    assert (entries[2]["status"], entries[2]["error"]) == ("FAILED", f"not run: {change}")
    assert len(children) == 2  # ioping never started
    assert any(at < 4 << 20 for at in _nonzero_chunks(raw.backing))  # the first fio's data
    # and the second's output is kept under its void name: its figures, about 4 KiB of a
    # device that was 64 MiB, count nowhere (one ingest_errors row says so)
    assert entries[1]["artifact"].endswith("/void-w01-fio-seq-write-1m-qd32.json")
    assert raw.artifact("void-w01-fio-seq-write-1m-qd32.json")["jobs"]
    assert raw.loaded() == ([0], ["void-w01-fio-seq-write-1m-qd32.json"])


def test_a_fio_that_wrote_beside_the_device_is_failed_and_its_figures_count_nowhere(
    raw: RawRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iofleet.plan.fiojobs as fiojobs

    # given fio rendered without the device (as a job naming its own filename would run):
    # it lays out a file in the agent's scratch directory and does its I/O there
    real = fiojobs.render_command
    monkeypatch.setattr(
        fiojobs, "render_command", lambda name, params, workdir, **_: real(name, params, workdir)
    )
    fio = {"kind": "fio", "name": "seq-write-1m-qd32", "params": _params("seq-write-1m-qd32")}

    code = run_slot(raw.payload([fio]))

    # then the device got none of it, the workload failed saying where the I/O went, and its
    # output is kept under its void name, loaded into no table (one ingest_errors row)
    assert code == 1
    assert sum(written for _, written in raw.child_io) == 0
    assert _nonzero_chunks(raw.backing) == []
    entry = raw.slot_json()["workloads"][0]
    assert entry["status"] == "FAILED"
    assert entry["error"].startswith("fio created ")
    assert entry["error"].endswith(f" instead of doing its I/O on {raw.device}")
    assert raw.artifact("void-w00-fio-seq-write-1m-qd32.json")["jobs"]
    assert raw.loaded() == ([], ["void-w00-fio-seq-write-1m-qd32.json"])


def test_a_node_that_names_another_device_is_never_written(
    raw: RawRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the volume's link points at a node (as /dev/nvme1n1 is) that, between two
    # workloads, comes to name another device: an EBS volume detached and another attached
    # under the same name, which the guard never checked
    node = tmp_path / "xvdf"
    os.mknod(node, 0o600 | stat.S_IFBLK, os.stat(raw.device).st_rdev)
    (raw.by_id / EBS_LINK).unlink()
    (raw.by_id / EBS_LINK).symlink_to(node)
    other_kit = Loops(tmp_path / "other")
    (tmp_path / "other").mkdir()
    try:
        other = other_kit.device(size_mib=DEVICE_MIB)
        other_backing = other_kit.images[-1]
        written_before = _sectors(other)[1]
        recorded = slot_module._entry

        def swap_after_the_first(w, outcome):  # type: ignore[no-untyped-def]
            # (_entry records a finished workload: after it, before the next one starts)
            if w.index == 0:
                node.unlink()
                os.mknod(node, 0o600 | stat.S_IFBLK, os.stat(other).st_rdev)
            return recorded(w, outcome)

        monkeypatch.setattr(slot_module, "_entry", swap_after_the_first)
        ioping = {"kind": "ioping", "count": 4, "interval_ms": 0, "write": True}
        fio = {"kind": "fio", "name": "seq-write-1m-qd32", "params": _params("seq-write-1m-qd32")}

        code, _, _ = raw.run([ioping, fio])

        # then the first workload ran on the claimed device, the second on nothing
        assert code == 1
        entries = raw.slot_json()["workloads"]
        assert entries[0]["status"] == "SUCCEEDED"
        a, b = os.stat(raw.device).st_rdev, os.stat(other).st_rdev
        assert entries[1]["error"] == (
            f"not run: {node} names another device since the guard claimed it "
            f"({os.major(b)}:{os.minor(b)}, not {os.major(a)}:{os.minor(a)})"
        )
        assert _sectors(other)[1] == written_before
        assert _nonzero_chunks(other_backing) == []
    finally:
        node.unlink(missing_ok=True)
        other_kit.release()


def test_a_device_that_shrinks_while_fio_runs_fails_its_slot_and_spares_the_other(
    tmp_path: Path,
) -> None:
    # given two slots of one cell running at once as separate agents, each on its own volume
    kit = Loops(tmp_path)
    agents: list[subprocess.Popen] = []
    try:
        devices_, payloads = [], []
        for slot in (0, 1):
            device = kit.device(size_mib=DEVICE_MIB)
            by_id = tmp_path / f"by-id-{slot}"
            by_id.mkdir()
            (by_id / EBS_LINK).symlink_to(device)
            fio = {
                "kind": "fio",
                "name": "seq-write-1m-qd32",
                "params": {"RUNTIME": "4", "SIZE": "8m", "IO_DEPTH": "4", "DIRECT": "1"},
            }
            payload = block_payload(
                tmp_path, by_id, [fio], run_id=RUN_ID, slot_index=slot, fleet_size=2
            )
            path = tmp_path / f"slot-{slot}.json"
            path.write_text(json.dumps(payload))
            devices_.append(device)
            payloads.append(path)
        written0 = [_sectors(d)[1] for d in devices_]
        for path in payloads:
            argv = [sys.executable, "-m", "iofleet.cli", "agent", "--slot", str(path)]
            agents.append(
                subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )

        # when slot 0's device shrinks to 4 KiB once fio is writing to both (a volume going away)
        wait_for(
            lambda: all(_sectors(d)[1] > w for d, w in zip(devices_, written0, strict=True)),
            60,
            "fio writing to both devices",
        )
        _shrink(devices_[0], 4096)
        codes = [agent.wait(timeout=120) for agent in agents]

        # then slot 0 failed saying what happened to its device, and slot 1 ran to the end on its
        # own device, its results intact
        slots = tmp_path / "raw" / RUN_ID / CELL_ID
        first = json.loads((slots / "slot-0000" / "slot.json").read_text())
        second = json.loads((slots / "slot-0001" / "slot.json").read_text())
        assert codes == [1, 0]
        assert first["workloads"][0]["status"] == "FAILED"
        assert first["workloads"][0]["error"].endswith(
            f"{devices_[0]} changed size since the guard claimed it (64 MiB -> 0.00390625 MiB)"
        )
        assert second["workloads"][0]["status"] == "SUCCEEDED"
        text = (slots / "slot-0001" / "w00-fio-seq-write-1m-qd32.json").read_text()
        doc = json.loads(text[text.index("{") :])
        assert doc["global options"]["filename"] == str(devices_[1])
        written = sum(job["write"]["io_bytes"] for job in doc["jobs"])
        assert (_sectors(devices_[1])[1] - written0[1]) * SECTOR >= written > 0
        assert _nonzero_chunks(kit.images[1])[:1] == [0]  # slot 1's data on its device
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
        kit.release()
