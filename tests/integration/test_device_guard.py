"""The device guard on real loop devices: find by EBS volume id, refuse anything in use.

Needs root and loop devices; skipped with the reason otherwise. Every loop
device and mount made here is released in the fixture's teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from iofleet.agent.devices import (
    DeviceError,
    DeviceNotFound,
    DeviceRefused,
    check_device_is_blank,
    find_device_for_volume,
    signatures_of,
)
from iofleet.agent.slot import run_slot

pytestmark = pytest.mark.device

VOLUME_ID = "vol-0123456789abcdef0"
SERIAL = "vol0123456789abcdef0"
EBS_LINK = f"nvme-Amazon_Elastic_Block_Store_{SERIAL}"


def _why_no_loop_devices() -> str | None:
    if os.geteuid() != 0:
        return "needs root for losetup and mount"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control (loop devices not available)"
    missing = [
        t for t in ("losetup", "partx", "mkfs.ext4", "mount", "blkid") if not shutil.which(t)
    ]
    return f"missing tools: {', '.join(missing)}" if missing else None


_REASON = _why_no_loop_devices()
if _REASON:
    pytestmark = [pytest.mark.device, pytest.mark.skip(reason=_REASON)]


def _sh(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _write_mbr(image: Path) -> None:
    """A DOS partition table with one Linux partition (sectors 2048..34815)."""
    mbr = bytearray(512)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x83, b"\0\0\0", 2048, 32768)
    mbr[510:512] = b"\x55\xaa"
    with image.open("r+b") as handle:
        handle.write(mbr)


class Loops:
    """Makes loop devices and mounts; releases them all in reverse order."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.devices: list[Path] = []
        self.mounts: list[Path] = []

    def device(
        self, *, mbr: bool = False, scan_partitions: bool = False, size_mib: int = 64
    ) -> Path:
        image = self.tmp_path / f"disk{len(self.devices)}.img"
        with image.open("wb") as handle:  # sparse: costs no disk until written
            handle.truncate(size_mib * 1024 * 1024)
        if mbr:
            _write_mbr(image)
        argv = ["losetup", "--find", "--show"] + (["--partscan"] if scan_partitions else [])
        proc = subprocess.run(argv + [str(image)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot attach a loop device: {proc.stderr.strip()}")
        device = Path(proc.stdout.strip())
        self.devices.append(device)
        if scan_partitions and not Path(f"{device}p1").exists():
            # some kernels do not parse the table on attach; partx adds the partitions
            _sh("partx", "--add", str(device))
        return device

    def mount(self, device: Path) -> Path:
        point = self.tmp_path / f"mnt{len(self.mounts)}"
        point.mkdir()
        _sh("mount", str(device), str(point))
        self.mounts.append(point)
        return point

    def release(self) -> None:
        for point in reversed(self.mounts):
            subprocess.run(["umount", str(point)], capture_output=True)
        for device in reversed(self.devices):
            subprocess.run(["partx", "--delete", str(device)], capture_output=True)
            subprocess.run(["losetup", "--detach", str(device)], capture_output=True)


@pytest.fixture
def loops(tmp_path: Path) -> Iterator[Loops]:
    kit = Loops(tmp_path)
    try:
        yield kit
    finally:
        kit.release()


@pytest.fixture
def by_id(tmp_path: Path) -> Path:
    directory = tmp_path / "by-id"
    directory.mkdir()
    return directory


# -- the guard ---------------------------------------------------------------


def test_blank_device_passes(loops: Loops) -> None:
    device = loops.device()

    check_device_is_blank(device, created_by_run=False)  # no exception


def test_filesystem_signature_is_refused(loops: Loops) -> None:
    device = loops.device()
    _sh("mkfs.ext4", "-q", str(device))

    with pytest.raises(DeviceRefused, match=r"carries a signature \(TYPE=ext4\)"):
        check_device_is_blank(device, created_by_run=False)


def test_partition_table_signature_is_refused(loops: Loops) -> None:
    # given a DOS partition table the kernel has not turned into partitions
    device = loops.device(mbr=True)

    with pytest.raises(DeviceRefused, match=r"carries a signature \(PTTYPE=dos\)"):
        check_device_is_blank(device, created_by_run=False)


def test_partitioned_device_is_refused(loops: Loops) -> None:
    device = loops.device(mbr=True, scan_partitions=True)

    with pytest.raises(DeviceRefused, match=rf"has partitions \({device.name}p1\)"):
        check_device_is_blank(device, created_by_run=False)


def test_mounted_device_is_refused(loops: Loops) -> None:
    device = loops.device()
    _sh("mkfs.ext4", "-q", str(device))
    point = loops.mount(device)

    with pytest.raises(DeviceRefused, match=rf"mounted \({device.name} on {point}\)"):
        check_device_is_blank(device, created_by_run=False)


def test_mounted_partition_is_refused(loops: Loops) -> None:
    device = loops.device(mbr=True, scan_partitions=True)
    _sh("mkfs.ext4", "-q", f"{device}p1")
    loops.mount(Path(f"{device}p1"))

    with pytest.raises(DeviceRefused, match=rf"mounted \({device.name}p1 on "):
        check_device_is_blank(device, created_by_run=False)


def test_mounted_device_is_refused_even_when_created_by_run(loops: Loops) -> None:
    device = loops.device()
    _sh("mkfs.ext4", "-q", str(device))
    loops.mount(device)

    with pytest.raises(DeviceRefused, match="mounted"):
        check_device_is_blank(device, created_by_run=True)


def test_volume_created_by_run_may_carry_a_filesystem(loops: Loops) -> None:
    # given our own volume with a filesystem left by an earlier attempt
    device = loops.device()
    _sh("mkfs.ext4", "-q", str(device))

    check_device_is_blank(device, created_by_run=True)  # no exception


def test_regular_file_is_not_a_block_device(tmp_path: Path) -> None:
    image = tmp_path / "file.img"
    image.write_bytes(b"\0" * 4096)

    with pytest.raises(DeviceRefused, match="not a block device"):
        check_device_is_blank(image, created_by_run=True)


def test_signatures_of_blank_device_is_empty(loops: Loops) -> None:
    assert signatures_of(loops.device()) == []


# -- finding the device by EBS volume id -------------------------------------


def test_by_id_link_finds_the_device(loops: Loops, by_id: Path) -> None:
    device = loops.device()
    (by_id / EBS_LINK).symlink_to(device)

    assert find_device_for_volume(VOLUME_ID, by_id_dir=by_id, sys_block=by_id / "none") == device


def test_namespace_link_finds_the_device(loops: Loops, by_id: Path) -> None:
    device = loops.device()
    (by_id / f"{EBS_LINK}_1").symlink_to(device)

    assert find_device_for_volume(VOLUME_ID, by_id_dir=by_id, sys_block=by_id / "none") == device


def test_partition_link_is_not_taken_for_the_volume(loops: Loops, by_id: Path) -> None:
    device = loops.device()
    (by_id / f"{EBS_LINK}-part1").symlink_to(device)

    with pytest.raises(DeviceNotFound, match=f"no block device for EBS volume {VOLUME_ID}"):
        find_device_for_volume(VOLUME_ID, by_id_dir=by_id, sys_block=by_id / "none")


def test_another_volumes_link_is_not_taken(loops: Loops, by_id: Path) -> None:
    device = loops.device()
    (by_id / "nvme-Amazon_Elastic_Block_Store_vol0fffffffffffffff0").symlink_to(device)

    with pytest.raises(DeviceNotFound):
        find_device_for_volume(VOLUME_ID, by_id_dir=by_id, sys_block=by_id / "none")


def test_nvme_serial_in_sysfs_finds_the_device(loops: Loops, tmp_path: Path, by_id: Path) -> None:
    # given no by-id link, but a sysfs entry whose NVMe serial is the volume id
    device = loops.device()
    serial = tmp_path / "sys-block" / device.name / "device" / "serial"
    serial.parent.mkdir(parents=True)
    serial.write_text(f"{SERIAL}        \n")

    assert (
        find_device_for_volume(VOLUME_ID, by_id_dir=by_id, sys_block=tmp_path / "sys-block")
        == device
    )


def test_malformed_volume_id_is_an_error(by_id: Path) -> None:
    with pytest.raises(DeviceError, match="not an EBS volume id"):
        find_device_for_volume("nvme1n1", by_id_dir=by_id)


# -- a whole slot on a block target --------------------------------------------


def _block_payload(tmp_path: Path, by_id: Path, target: dict, workloads: list[dict]) -> dict:
    return {
        "version": 1,
        "run_id": "blk-20261121t000000z",
        "cell": {"cell_id": "c000-loop-x1-r1", "cell_index": 0, "fleet_size": 1, "repeat": 1},
        "slot_index": 0,
        "target": {"kind": "block", "volume_id": VOLUME_ID, "by_id_dir": str(by_id), **target},
        "workloads": workloads,
        "results": {"kind": "directory", "root": str(tmp_path / "raw")},
        "time_limit_s": 120,
    }


def _slot_files(tmp_path: Path) -> Path:
    return tmp_path / "raw" / "blk-20261121t000000z" / "c000-loop-x1-r1" / "slot-0000"


IOPING_WRITE = {"kind": "ioping", "count": 5, "interval_ms": 0, "write": True}


@pytest.mark.parametrize("filesystem", ["ext4", "xfs"])
def test_block_slot_formats_mounts_runs_and_unmounts(
    loops: Loops, tmp_path: Path, by_id: Path, filesystem: str
) -> None:
    if not shutil.which(f"mkfs.{filesystem}"):
        pytest.skip(f"mkfs.{filesystem} is not installed (make test installs it)")
    device = loops.device(size_mib=320)  # mkfs.xfs wants at least 300 MiB
    (by_id / EBS_LINK).symlink_to(device)
    mount_point = tmp_path / "mnt-target"
    target = {"filesystem": filesystem, "mount_point": str(mount_point), "mount_options": "noatime"}
    app = {"kind": "app", "name": "where", "run": "df --output=source . | tail -1"}

    code = run_slot(_block_payload(tmp_path, by_id, target, [IOPING_WRITE, app]))

    assert code == 0
    manifest = json.loads((_slot_files(tmp_path) / "manifest.json").read_text())
    assert (manifest["target_fstype"], manifest["target_device"]) == (filesystem, str(device))
    assert "noatime" in manifest["mount_options"]
    assert manifest["target_volume_id"] == VOLUME_ID  # CloudWatch metrics outlive the volume
    app_out = json.loads((_slot_files(tmp_path) / "w01-app-where.json").read_text())
    assert app_out["stdout_tail"].strip() == str(device)
    assert str(mount_point) not in Path("/proc/self/mounts").read_text()


# fio / ioping / the drain on a raw device: tests/integration/test_raw_device_io.py


def test_refused_device_fails_the_slot_and_is_left_untouched(
    loops: Loops, tmp_path: Path, by_id: Path
) -> None:
    # given a volume that is not ours and carries a filesystem
    device = loops.device()
    _sh("mkfs.ext4", "-q", str(device))
    uuid_before = _sh("blkid", "-p", "-s", "UUID", "-o", "value", str(device))
    (by_id / EBS_LINK).symlink_to(device)
    target = {"filesystem": "ext4", "mount_point": str(tmp_path / "mnt-target")}

    code = run_slot(_block_payload(tmp_path, by_id, target, [IOPING_WRITE]))

    assert code != 0
    record = json.loads((_slot_files(tmp_path) / "slot.json").read_text())
    assert "carries a signature" in record["error"]
    assert record["workloads"][0]["status"] == "SKIPPED"
    assert _sh("blkid", "-p", "-s", "UUID", "-o", "value", str(device)) == uuid_before
