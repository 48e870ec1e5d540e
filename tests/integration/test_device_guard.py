"""The device guard on real loop devices: find by EBS volume id, refuse anything in use.

The guard asks the kernel (an O_EXCL open, /proc/*/fd) and libblkid (`blkid -p`
plus a scan of sampled blocks); the probe set below is one table of device
kinds, each made for real on a loop device over a sparse file, with the outcome
expected (accepted, or refused with a one-line reason). Every loop device,
mount, swap area and helper process made here is released in the fixture's
teardown.

What this kernel cannot do (checked in `test_kernel_features_this_machine_lacks`):
it has no md and no device-mapper driver (CONFIG_MD is not set, no modules), so
an *assembled* md array, an *active* LVM volume or an *open* LUKS mapping cannot
be made here. Their signatures are made for real (pvcreate, cryptsetup
luksFormat) or, for md, hand-written to the md v1 superblock layout mdadm
writes, since `mdadm --create` needs the driver. The kernel rule that refuses
a held device is the same bd_claim that mount and swapon use, and those are
tested live.

Needs root and loop devices; skipped with the reason otherwise.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import select
import shutil
import stat
import struct
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from iofleet.agent import devices
from iofleet.agent.devices import (
    DeviceError,
    DeviceNotFound,
    DeviceRefused,
    check_device_is_blank,
    claim_device,
    find_device_for_volume,
    signatures_of,
)
from iofleet.agent.slot import run_slot

pytestmark = pytest.mark.device

VOLUME_ID = "vol-0123456789abcdef0"
SERIAL = "vol0123456789abcdef0"
EBS_LINK = f"nvme-Amazon_Elastic_Block_Store_{SERIAL}"
MIB = 1 << 20
LOOP_CTL_ADD, LOOP_CTL_REMOVE = 0x4C80, 0x4C81  # linux/loop.h
TOOLS = (
    "losetup",
    "blockdev",
    "partx",
    "mount",
    "blkid",
    "mkfs.ext4",
    "mkfs.xfs",
    "mkfs.btrfs",
    "pvcreate",
    "cryptsetup",
    "mkswap",
    "swapon",
    "sfdisk",
    "mdadm",
    "unshare",
)


def _why_no_loop_devices() -> str | None:
    if os.geteuid() != 0:
        return "needs root for losetup and mount"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control (loop devices not available)"
    missing = [t for t in TOOLS if not shutil.which(t)]
    return (
        f"missing tools (make test-tools installs them): {', '.join(missing)}" if missing else None
    )


_REASON = _why_no_loop_devices()
if _REASON:
    pytestmark = [pytest.mark.device, pytest.mark.skip(reason=_REASON)]


def _sh(*argv: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
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


def _write_md_v1(image: Path, offset: int) -> None:
    """An md v1 superblock (as mdadm --create writes it: v1.2 at 4 KiB, v1.0 near the end).

    Hand-written because this kernel has no md driver for mdadm to create an array
    with; the layout is struct mdp_superblock_1 (linux/raid/md_p.h), checksum included.
    """
    sb = bytearray(256 + 2 * 2)
    struct.pack_into("<IIII", sb, 0, 0xA92B4EFC, 1, 0, 0)  # magic, major, feature_map, pad
    sb[16:32] = uuid.uuid4().bytes  # set_uuid
    sb[32:41] = b"iofleet:0"  # set_name
    struct.pack_into("<QIIQIII", sb, 64, 0, 1, 0, 32768, 0, 2, 0)  # ctime level .. bitmap
    struct.pack_into("<QQQQII", sb, 128, 2048, 32768, offset // 512, 0, 0, 0)
    sb[168:184] = uuid.uuid4().bytes  # device_uuid
    struct.pack_into("<QQQII", sb, 192, 0, 1, 0, 0, 2)  # utime events resync csum max_dev
    struct.pack_into("<HH", sb, 256, 0, 1)  # dev_roles
    words = struct.unpack_from(f"<{len(sb) // 4}I", sb)
    total = sum(words)
    struct.pack_into("<I", sb, 216, ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF)
    with image.open("r+b") as handle:
        handle.seek(offset)
        handle.write(sb)


def _write_md_090(image: Path) -> None:
    """An md 0.90 superblock (mdp_super_t, linux/raid/md_p.h): 4 KiB at the last 64 KiB
    boundary minus 64 KiB, where mdadm --metadata=0.90 puts it; checksum included, so
    `mdadm --examine` reads it back as valid (hand-written: no md driver here, see above)."""
    size = image.stat().st_size
    sb = bytearray(4096)
    set_uuid = struct.unpack("<4I", uuid.uuid4().bytes)
    # magic, major, minor, patch, gvalid_words, set_uuid0, ctime, level, size (KiB),
    # nr_disks, raid_disks, md_minor, not_persistent, set_uuid1..3
    struct.pack_into(
        "<16I",
        sb,
        0,
        0xA92B4EFC,
        0,
        90,
        0,
        0,
        set_uuid[0],
        1_700_000_000,
        1,
        size // 1024 - 64,
        2,
        2,
        0,
        0,
        *set_uuid[1:],
    )
    # utime, state (clean), active, working, failed, spare, sb_csum, events hi/lo
    struct.pack_into("<9I", sb, 32 * 4, 1_700_000_000, 1, 2, 2, 0, 0, 0, 0, 1)
    total = sum(struct.unpack("<1024I", sb))
    struct.pack_into("<I", sb, 38 * 4, ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF)
    with image.open("r+b") as handle:
        handle.seek((size & ~0xFFFF) - 0x10000)
        handle.write(sb)


class Holder:
    """A child process we control that keeps something in place until released."""

    def __init__(self, argv: list[str]):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)  # bounded wait for "ready"
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.release()
            raise AssertionError(f"{argv}: not ready: {line!r} {self.proc.stderr.read()!r}")

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the child waits on stdin: EOF ends it
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Loops:
    """Makes loop devices, mounts, swap areas and holders; releases them all in reverse."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.devices: list[Path] = []
        self.images: list[Path] = []
        self.mounts: list[Path] = []
        self.swaps: list[Path] = []
        self.holders: list[Holder] = []
        self.undo: list[list[str]] = []  # commands that take down md arrays, VGs, mappings
        self.added: list[int] = []  # loop device numbers made with LOOP_CTL_ADD
        self.nodes: list[Path] = []  # device nodes we made ourselves

    def image(self, size_mib: int = 64, *, size_bytes: int | None = None) -> Path:
        image = self.tmp_path / f"disk{len(self.images)}.img"
        with image.open("wb") as handle:  # sparse: costs no disk until written
            handle.truncate(size_mib * MIB if size_bytes is None else size_bytes)
        self.images.append(image)
        return image

    def attach(
        self,
        image: Path,
        *,
        offset: int = 0,
        scan_partitions: bool = False,
        sector_size: int | None = None,
        read_only: bool = False,
        name: str | None = None,
    ) -> Path:
        argv = ["losetup", "--show"] + (["--partscan"] if scan_partitions else [])
        argv += ["--offset", str(offset)] if offset else []
        argv += ["--sector-size", str(sector_size)] if sector_size else []
        argv += ["--read-only"] if read_only else []
        argv += [name] if name else ["--find"]
        if name and not (Path("/sys/block") / Path(name).name).exists():
            self.added.append(int(Path(name).name.removeprefix("loop")))  # losetup adds it
        proc = subprocess.run(argv + [str(image)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot attach a loop device: {proc.stderr.strip()}")
        device = Path(proc.stdout.strip())
        self.devices.append(device)
        if scan_partitions and not Path(f"{device}p1").exists():
            # some kernels do not parse the table on attach; partx adds the partitions
            _sh("partx", "--add", str(device))
        return device

    def device(
        self, *, mbr: bool = False, scan_partitions: bool = False, size_mib: int = 64
    ) -> Path:
        image = self.image(size_mib)
        if mbr:
            _write_mbr(image)
        return self.attach(image, scan_partitions=scan_partitions)

    def unattached(self) -> Path:
        """A loop device of our own with nothing attached: LOOP_CTL_ADD of a high free
        number (not `losetup --find`, whose free device another session may take)."""
        control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
        try:
            for number in range(700, 1000):
                try:
                    fcntl.ioctl(control, LOOP_CTL_ADD, number)
                except OSError:
                    continue  # EEXIST: taken
                self.added.append(number)
                device = Path(f"/dev/loop{number}")
                if not device.exists():  # no devtmpfs/udev to make the node
                    os.mknod(device, 0o660 | stat.S_IFBLK, os.makedev(7, number))
                    self.nodes.append(device)
                return device
        finally:
            os.close(control)
        raise AssertionError("no free loop device number in 700..999")

    def detach(self, device: Path) -> None:
        _sh("losetup", "--detach", str(device))
        self.devices.remove(device)

    def mount(self, device: Path, *options: str) -> Path:
        point = self.tmp_path / f"mnt{len(self.mounts)}"
        point.mkdir()
        _sh("mount", *options, str(device), str(point))
        self.mounts.append(point)
        return point

    def swapon(self, device: Path) -> None:
        _sh("swapon", str(device))
        self.swaps.append(device)

    def hold(self, argv: list[str]) -> Holder:
        holder = Holder(argv)
        self.holders.append(holder)
        return holder

    def release(self) -> None:
        for argv in reversed(self.undo):
            subprocess.run(argv, capture_output=True)
        for holder in reversed(self.holders):
            holder.release()
        for point in reversed(self.mounts):
            subprocess.run(["umount", str(point)], capture_output=True)
        for device in reversed(self.swaps):
            subprocess.run(["swapoff", str(device)], capture_output=True)
        for device in reversed(self.devices):
            subprocess.run(["partx", "--delete", str(device)], capture_output=True)
            subprocess.run(["losetup", "--detach", str(device)], capture_output=True)
        if self.added:
            control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
            try:
                for number in self.added:
                    try:
                        fcntl.ioctl(control, LOOP_CTL_REMOVE, number)
                    except OSError:
                        pass
            finally:
                os.close(control)
        for node in self.nodes:
            node.unlink(missing_ok=True)


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


def _sha256(path: Path) -> str:
    """A digest of the backing file's content: its size and every non-zero 64 KiB chunk
    with its offset (zeros, and holes, are implied), read only where the file has data
    (SEEK_DATA / SEEK_HOLE), so a sparse 4 GiB image hashes in what it holds. Where the
    host filesystem reports data depends on its page cache (an unwritten extent read
    through the loop device becomes "data"), so allocation is not part of the digest:
    the device's write counter (_sectors_written) is the check that nothing was written."""
    digest = hashlib.sha256()
    chunk_size = 1 << 16
    with path.open("rb") as handle:
        fd, size, at = handle.fileno(), os.fstat(handle.fileno()).st_size, 0
        digest.update(str(size).encode())
        while at < size:
            try:
                data = os.lseek(fd, at, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            end = os.lseek(fd, data, os.SEEK_HOLE)
            at = max(at, data // chunk_size * chunk_size)  # chunks stay on their grid
            handle.seek(at)
            while at < end:
                chunk = handle.read(chunk_size)
                if chunk.strip(b"\0"):
                    digest.update(f"@{at}:".encode() + chunk)
                at += len(chunk)
    return digest.hexdigest()


def _sectors_written(device: Path) -> int:
    """Sectors the block layer has written to the device (/sys/block/<dev>/stat, field 7)."""
    number = os.stat(device).st_rdev  # by number: the node may have another name
    stat_file = Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}/stat")
    return int(stat_file.read_text().split()[6])


# -- the probe set: one table of device kinds ----------------------------------------

_OPEN = "import os, sys; fd = os.open(sys.argv[1], {flags}); print('ready', flush=True); sys.stdin.read()"


def _hold_open(loops: Loops, device: Path, flags: str = "os.O_RDONLY") -> None:
    loops.hold([sys.executable, "-c", _OPEN.format(flags=flags), str(device)])


def _mkfs(fs: str, target: Path) -> None:
    quiet = {"ext4": ["-q", "-F"], "xfs": ["-q", "-f"], "btrfs": ["-q", "-f"]}[fs]
    _sh(f"mkfs.{fs}", *quiet, str(target))


def _fs_at(loops: Loops, image: Path, fs: str, offset: int) -> None:
    """A filesystem starting `offset` bytes into the image, with no partition table."""
    window = loops.attach(image, offset=offset)
    _mkfs(fs, window)
    loops.detach(window)


# Each maker builds one kind of device and returns it (mounting, holding, ... in loops).
Maker = Callable[[Loops], Path]


def _blank(loops: Loops) -> Path:
    return loops.device()


def _fs(fs: str, *, mounted: bool = False, options: tuple[str, ...] = ()) -> Maker:
    def make(loops: Loops) -> Path:
        device = loops.device(size_mib=320)  # mkfs.xfs wants at least 300 MiB
        _mkfs(fs, device)
        if mounted:
            loops.mount(device, *options)
        return device

    return make


def _fs_at_offset(fs: str, offset: int, size_mib: int = 320) -> Maker:
    def make(loops: Loops) -> Path:
        image = loops.image(size_mib)
        _fs_at(loops, image, fs, offset)
        return loops.attach(image)

    return make


def _lvm_pv(loops: Loops) -> Path:
    device = loops.device()
    _sh("pvcreate", "-q", "-y", "--norestorefile", str(device))
    return device


def _md_member(version: str) -> Maker:
    def make(loops: Loops) -> Path:
        image = loops.image()
        size = image.stat().st_size
        if version == "0.90":
            _write_md_090(image)
        else:
            offsets = {"1.1": 0, "1.2": 4096, "1.0": (size & ~4095) - 8192}
            _write_md_v1(image, offsets[version])
        return loops.attach(image)

    return make


def _read_only(loops: Loops) -> Path:
    return loops.attach(loops.image(), read_only=True)


def _partition_read_only(loops: Loops) -> Path:
    device = loops.device(mbr=True, scan_partitions=True)
    _sh("blockdev", "--setro", f"{device}p1")
    return device


def _empty_backing_file(loops: Loops) -> Path:
    return loops.attach(loops.image(size_bytes=0))


def _unattached_loop_device(loops: Loops) -> Path:
    return loops.unattached()


def _partitions_known_table_wiped(loops: Loops) -> Path:
    """ext4 on a partition that starts at 9.5 GiB of a 12 GiB device, then the partition
    table zeroed under the kernel (as `dd if=/dev/zero count=1` does): the kernel still
    lists loopNp1, and no sampled block of the whole device holds its superblock (beyond
    the head the scan samples 1 GiB apart)."""
    image = loops.image(12288)
    start, end = 9728 * MIB // 512, 12288 * MIB // 512
    mbr = bytearray(512)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x83, b"\0\0\0", start, end - start)
    mbr[510:512] = b"\x55\xaa"
    with image.open("r+b") as handle:
        handle.write(mbr)
    device = loops.attach(image, scan_partitions=True)
    _mkfs("ext4", Path(f"{device}p1"))
    with image.open("r+b") as handle:
        handle.write(bytes(512))
    assert devices.nonzero_offsets(device, 12288 * MIB) == []  # the scan alone sees nothing
    return device


def _partition_with_fs(loops: Loops) -> Path:
    device = loops.device(mbr=True, scan_partitions=True)
    _mkfs("ext4", Path(f"{device}p1"))
    return device


def _just_over_a_mib_with_data_at_the_end(loops: Loops) -> Path:
    image = loops.image(size_bytes=MIB + 2048)
    with image.open("r+b") as handle:
        handle.seek(MIB + 1536)
        handle.write(os.urandom(512))
    return loops.attach(image)


def _four_k_native(loops: Loops) -> Path:
    return loops.attach(loops.image(), sector_size=4096)


def _four_k_native_ext4(loops: Loops) -> Path:
    device = _four_k_native(loops)
    _mkfs("ext4", device)
    return device


def free_loop_name(at_least: int = 100) -> str:
    """A loop device name with a large number (/dev/loop123 style) that nothing uses."""
    for number in range(at_least, at_least + 900):
        if not Path(f"/sys/block/loop{number}/loop").exists():
            return f"/dev/loop{number}"
    raise AssertionError("no free loop device numbers")


def _large_number(loops: Loops) -> Path:
    device = loops.attach(loops.image(), name=free_loop_name(123))
    assert int(device.name.removeprefix("loop")) >= 123
    return device


def _under_another_name(make: Maker) -> Maker:
    """The same device through a node of another name (as a udev NAME rule or a container's
    own /dev makes them): sysfs knows it only by its kernel name."""

    def make_renamed(loops: Loops) -> Path:
        device = make(loops)
        node = loops.tmp_path / "xvdf"
        os.mknod(node, 0o600 | stat.S_IFBLK, os.stat(device).st_rdev)
        loops.nodes.append(node)
        return node

    return make_renamed


def _partition_held_exclusively(loops: Loops) -> Path:
    device = loops.device(mbr=True, scan_partitions=True)
    _hold_open(loops, Path(f"{device}p1"), "os.O_RDONLY | os.O_EXCL")
    return device


def _swap(*, active: bool) -> Maker:
    def make(loops: Loops) -> Path:
        device = loops.device()
        _sh("mkswap", str(device))
        if active:
            loops.swapon(device)
        return device

    return make


def _luks(loops: Loops) -> Path:
    device = loops.device()
    _sh(
        "cryptsetup",
        "luksFormat",
        "-q",
        "--type",
        "luks2",
        "--pbkdf",
        "pbkdf2",
        "--pbkdf-force-iterations",
        "1000",
        str(device),
        "-",
        stdin="not-a-secret",
    )
    return device


def _table(label: str) -> Maker:
    def make(loops: Loops) -> Path:
        image = loops.image()
        _sh("sfdisk", "-q", str(image), stdin=f"label: {label}\n,\n")
        return loops.attach(image)

    return make


def _dos_table_kernel_unaware(loops: Loops) -> Path:
    return loops.device(mbr=True)


def _partitions(*, mounted: bool = False, held: bool = False, swap: bool = False) -> Maker:
    def make(loops: Loops) -> Path:
        device = loops.device(mbr=True, scan_partitions=True)
        partition = Path(f"{device}p1")
        if mounted:
            _mkfs("ext4", partition)
            loops.mount(partition)
        if swap:
            _sh("mkswap", str(partition))
            loops.swapon(partition)
        if held:
            _hold_open(loops, partition)
        return device

    return make


def _junk_at(offset: int) -> Maker:
    def make(loops: Loops) -> Path:
        image = loops.image(320)
        with image.open("r+b") as handle:
            handle.seek(offset)
            handle.write(os.urandom(512))
        return loops.attach(image)

    return make


def _held_open(flags: str) -> Maker:
    def make(loops: Loops) -> Path:
        device = loops.device()
        _hold_open(loops, device, flags)
        return device

    return make


_MAP = (  # libc mmap, not Python's mmap module (which keeps a dup of the fd)
    "import ctypes, mmap, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "libc.mmap.restype = ctypes.c_void_p; "
    "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, "
    "ctypes.c_int, ctypes.c_long]; "
    "fd = os.open(sys.argv[1], os.O_RDONLY); "
    "addr = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0); os.close(fd); "
    "assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno(); "
    "print('ready', flush=True); sys.stdin.read()"
)


def _mapped_by_another_process(loops: Loops) -> Path:
    device = loops.device()
    loops.hold([sys.executable, "-c", _MAP, str(device)])
    return device


def _backing_a_loop_device(loops: Loops) -> Path:
    device = loops.device()
    loops.attach(device)  # a second loop device over this one
    return device


def _mounted_in_another_namespace(loops: Loops, options: str = "rw") -> Path:
    device = loops.device(size_mib=320)
    _mkfs("btrfs", device)
    point = loops.tmp_path / "ns-mnt"
    point.mkdir()
    script = f"mount -o {options} {device} {point} && echo ready && read _"
    loops.hold(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    assert str(point) not in Path("/proc/self/mounts").read_text()  # not in *our* namespace
    return device


def _regular_file(loops: Loops) -> Path:
    return loops.image(1)


def _root_disk(loops: Loops | None = None) -> Path:
    number = os.stat("/").st_dev
    real = Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}").resolve()
    if (real / "partition").exists():
        real = real.parent
    return Path("/dev") / real.name


NO_MD = None if Path("/proc/mdstat").exists() else "this kernel has no md driver (CONFIG_MD)"
NO_DM = (
    None
    if "device-mapper" in Path("/proc/devices").read_text()
    else "this kernel has no device-mapper driver (CONFIG_MD / CONFIG_BLK_DEV_DM)"
)


def _md_assembled(loops: Loops) -> Path:
    if NO_MD:
        pytest.skip(NO_MD)
    first, second = loops.device(), loops.device()
    name = f"/dev/md/iofleet-{uuid.uuid4().hex[:8]}"
    _sh(
        "mdadm",
        "--create",
        name,
        "--level=1",
        "--raid-devices=2",
        "--metadata=1.2",
        "--run",
        "--force",
        str(first),
        str(second),
    )
    loops.undo.append(["mdadm", "--stop", name])
    return first


def _lvm_active(loops: Loops) -> Path:
    if NO_DM:
        pytest.skip(NO_DM)
    device = loops.device()
    vg = f"iofleet{uuid.uuid4().hex[:8]}"
    _sh("pvcreate", "-q", "-y", str(device))
    _sh("vgcreate", "-q", vg, str(device))
    loops.undo.append(["vgremove", "-q", "-f", vg])
    _sh("lvcreate", "-q", "-y", "-l", "100%FREE", "-n", "lv", vg)
    loops.undo.append(["vgchange", "-q", "-an", vg])
    return device


def _luks_open(loops: Loops) -> Path:
    if NO_DM:
        pytest.skip(NO_DM)
    device = _luks(loops)
    name = f"iofleet-{uuid.uuid4().hex[:8]}"
    _sh("cryptsetup", "open", "--key-file", "-", str(device), name, stdin="not-a-secret")
    loops.undo.append(["cryptsetup", "close", name])
    return device


@dataclass(frozen=True)
class Kind:
    make: Maker
    created_by_run: bool
    refused: str | None  # a regex the one-line refusal must match; None = accepted


IN_USE = r"^refusing /dev/\S+: in use, the kernel refuses an exclusive open \("
SIGNATURE = r"^refusing /dev/\S+: it carries a signature \({}\); only blank"
READ_ONLY = r"^refusing /dev/\S+: it is read-only \(the kernel's ro flag is set\)$"
NO_CAPACITY = r"^refusing /dev/\S+: it has no capacity \(0 bytes: no medium, or a loop device"

KINDS: dict[str, Kind] = {
    "blank": Kind(_blank, False, None),
    "blank, created by run": Kind(_blank, True, None),
    "ext4": Kind(_fs("ext4"), False, SIGNATURE.format("TYPE=ext4")),
    "ext4, created by run": Kind(_fs("ext4"), True, None),
    "ext4 mounted": Kind(_fs("ext4", mounted=True), False, IN_USE + r"mounted on /\S+mnt0\)$"),
    "ext4 mounted, created by run": Kind(_fs("ext4", mounted=True), True, IN_USE + "mounted on"),
    "ext4 mounted read-only, created by run": Kind(
        _fs("ext4", mounted=True, options=("-o", "ro")), True, IN_USE + "mounted on"
    ),
    "xfs": Kind(_fs("xfs"), False, SIGNATURE.format("TYPE=xfs")),
    "xfs mounted": Kind(_fs("xfs", mounted=True), False, IN_USE + "mounted on"),
    "btrfs": Kind(_fs("btrfs"), False, SIGNATURE.format("TYPE=btrfs")),
    "btrfs, created by run": Kind(_fs("btrfs"), True, None),
    "btrfs mounted": Kind(_fs("btrfs", mounted=True), False, IN_USE + r"mounted on /\S+mnt0\)$"),
    "btrfs mounted, created by run": Kind(_fs("btrfs", mounted=True), True, IN_USE),
    "btrfs mounted in another mount namespace": Kind(
        _mounted_in_another_namespace, True, IN_USE + r"mounted on /\S+ in another mount namespace"
    ),
    "LVM physical volume": Kind(_lvm_pv, False, SIGNATURE.format("TYPE=LVM2_member")),
    "md RAID member, v1.2 superblock": Kind(
        _md_member("1.2"), False, SIGNATURE.format("TYPE=linux_raid_member")
    ),
    "md RAID member, v1.0 superblock at the end": Kind(
        _md_member("1.0"), False, SIGNATURE.format("TYPE=linux_raid_member")
    ),
    "swap": Kind(_swap(active=False), False, SIGNATURE.format("TYPE=swap")),
    "swap active": Kind(_swap(active=True), False, IN_USE + r"active swap \(loop\d+\)\)$"),
    "swap active, created by run": Kind(_swap(active=True), True, IN_USE + "active swap"),
    "LUKS": Kind(_luks, False, SIGNATURE.format("TYPE=crypto_LUKS")),
    "LUKS open (dm-crypt)": Kind(_luks_open, True, IN_USE + r"held by dm-\d+\)$"),
    "LVM logical volume active": Kind(_lvm_active, True, IN_USE + r"held by dm-\d+\)$"),
    "md RAID member, array assembled": Kind(_md_assembled, True, IN_USE + r"held by md\d+\)$"),
    "GPT partition table": Kind(_table("gpt"), False, SIGNATURE.format("PTTYPE=gpt")),
    "dos partition table": Kind(_table("dos"), False, SIGNATURE.format("PTTYPE=dos")),
    "dos table, kernel unaware": Kind(
        _dos_table_kernel_unaware, False, SIGNATURE.format("PTTYPE=dos")
    ),
    "partitioned, created by run": Kind(_partitions(), True, None),
    "partition mounted": Kind(_partitions(mounted=True), True, IN_USE + r"loop\d+p1 mounted on"),
    "partition as active swap": Kind(
        _partitions(swap=True), True, IN_USE + r"active swap \(loop\d+p1\)\)$"
    ),
    "partition held open": Kind(
        _partitions(held=True), True, r"^refusing /dev/\S+: open by another process \(pid \d+"
    ),
    "ext4 at 1 MiB, no partition table": Kind(
        _fs_at_offset("ext4", MIB), False, r"signature at offset 1048576 \(TYPE=ext4\)"
    ),
    "xfs at 1 MiB, no partition table": Kind(
        _fs_at_offset("xfs", MIB), False, r"signature at offset 1048576 \(TYPE=xfs\)"
    ),
    "btrfs at 100 MiB, no partition table": Kind(
        _fs_at_offset("btrfs", 100 * MIB), False, r"signature at offset 104857600 \(TYPE=btrfs\)"
    ),
    "ext4 at 1.5 GiB of 4 GiB, no partition table": Kind(
        _fs_at_offset("ext4", 1536 * MIB, 4096),
        False,
        r"signature at offset 1610612736 \(TYPE=ext4\)",
    ),
    "xfs at 1 GiB + 1 MiB of 4 GiB, no partition table": Kind(
        _fs_at_offset("xfs", 1025 * MIB, 4096),
        False,
        r"signature at offset 1074790400 \(TYPE=xfs\)",
    ),
    "btrfs at 6 GiB + 513 MiB of 8 GiB, no partition table": Kind(
        _fs_at_offset("btrfs", 6657 * MIB, 8192),
        False,
        r"signature at offset 6980370432 \(TYPE=btrfs\)",
    ),
    "unknown data at 5 MiB": Kind(
        _junk_at(5 * MIB), False, r"it is not blank \(non-zero data at offset \d+\)"
    ),
    "unknown data near the end": Kind(
        _junk_at(320 * MIB - 4096), False, r"it is not blank \(non-zero data at offset \d+\)"
    ),
    "held open by another process": Kind(
        _held_open("os.O_RDONLY"), False, r"^refusing /dev/\S+: open by another process \(pid \d+"
    ),
    "held open by another process, created by run": Kind(
        _held_open("os.O_RDWR"), True, r"open by another process \(pid \d+ \(python"
    ),
    "mapped by another process, fd closed": Kind(
        _mapped_by_another_process,
        True,
        r"open by another process \(pid \d+ \(python[0-9.]*, mapped\)",
    ),
    "backing a loop device": Kind(
        _backing_a_loop_device, True, r"^refusing /dev/\S+: it backs loop device loop\d+$"
    ),
    "held exclusively by another process": Kind(
        _held_open("os.O_RDONLY | os.O_EXCL"),
        True,
        IN_USE + r"held exclusively by another process\)$",
    ),
    "md RAID member, v0.90 superblock at the end": Kind(
        _md_member("0.90"), False, SIGNATURE.format("TYPE=linux_raid_member")
    ),
    "md RAID member, v1.1 superblock at the start": Kind(
        _md_member("1.1"), False, SIGNATURE.format("TYPE=linux_raid_member")
    ),
    "read-only (losetup -r)": Kind(_read_only, False, READ_ONLY),
    "read-only (losetup -r), created by run": Kind(_read_only, True, READ_ONLY),
    "partition read-only (blockdev --setro), created by run": Kind(
        _partition_read_only, True, r": its partition loop\d+p1 is read-only \(the kernel"
    ),
    "empty backing file (0 bytes)": Kind(_empty_backing_file, True, NO_CAPACITY),
    "loop device with nothing attached": Kind(_unattached_loop_device, True, NO_CAPACITY),
    "partitions the kernel lists, table wiped, fs at 9.5 GiB": Kind(
        _partitions_known_table_wiped,
        False,
        r"^refusing /dev/\S+: the kernel lists partitions on it \(loop\d+p1\); only blank",
    ),
    "ext4 on a partition only": Kind(_partition_with_fs, False, SIGNATURE.format("PTTYPE=dos")),
    "data in the last bytes of a device just over 1 MiB": Kind(
        _just_over_a_mib_with_data_at_the_end,
        False,
        r"it is not blank \(non-zero data at offset 1050112\)",
    ),
    "4Kn (4096-byte logical blocks)": Kind(_four_k_native, False, None),
    "4Kn with ext4": Kind(_four_k_native_ext4, False, SIGNATURE.format("TYPE=ext4")),
    "large loop number (/dev/loop123 and up)": Kind(_large_number, False, None),
    "partition held exclusively by another process, created by run": Kind(
        _partition_held_exclusively, True, IN_USE
    ),
    "held open by another process, node of another name": Kind(
        _under_another_name(_held_open("os.O_RDONLY")),
        False,
        r"^refusing /\S+/xvdf: open by another process \(pid \d+",
    ),
    "partition read-only, node of another name, created by run": Kind(
        _under_another_name(_partition_read_only),
        True,
        r"^refusing /\S+/xvdf: its partition loop\d+p1 is read-only",
    ),
    "partition mounted, node of another name, created by run": Kind(
        _under_another_name(_partitions(mounted=True)), True, r"in use, .*loop\d+p1 mounted on"
    ),
    "regular file": Kind(_regular_file, True, r"^refusing \S+: not a block device$"),
    "root disk": Kind(_root_disk, True, r"^refusing /dev/\S+: it backs the root filesystem \(/\)$"),
}


@pytest.mark.parametrize("kind", KINDS, ids=list(KINDS))
def test_device_kind(loops: Loops, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = KINDS[kind]
    device = spec.make(loops)
    opened: list[int] = []
    real_open = os.open

    def spy_open(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(path) == device:
            opened.append(flags)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(devices.os, "open", spy_open)

    if spec.refused is None:
        claim = claim_device(device, spec.created_by_run)
        try:
            assert claim.held
            with pytest.raises(OSError):  # the kernel now refuses anyone else's exclusive open
                real_open(device, os.O_RDONLY | os.O_EXCL)
        finally:
            claim.release()
        real_open_fd = real_open(device, os.O_RDONLY | os.O_EXCL)  # released means released
        os.close(real_open_fd)
    else:
        with pytest.raises(DeviceRefused) as info:
            claim_device(device, spec.created_by_run).release()  # (released if let through)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"refusing {device}: ")
        assert re.search(spec.refused, message), message
    # the guard only ever reads
    assert all(flags & (os.O_WRONLY | os.O_RDWR) == 0 for flags in opened), opened


def test_root_disk_is_refused_by_the_kernel_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # given the root-disk rule switched off, the exclusive open alone refuses the mounted root
    # (EBUSY; in a container whose device cgroup denies the root disk, EPERM comes first)
    root = _root_disk()
    monkeypatch.setattr(devices, "root_disks", lambda: set())

    with pytest.raises(DeviceRefused) as info:
        claim_device(root, created_by_run=True)

    assert re.match(
        rf"^refusing {root}: (in use, the kernel refuses an exclusive open \(.*mounted on /[ )]"
        r"|cannot open: Operation not permitted$)",
        str(info.value),
    ), str(info.value)


def test_an_opener_that_slips_in_before_mount_is_caught_and_the_mount_undone(
    loops: Loops, tmp_path: Path
) -> None:
    # given the guard passed and released its claim, and another process opened the device
    # in the window before mkfs (simulated: it holds the device open from the start)
    device = loops.device(size_mib=64)
    _hold_open(loops, device)
    point = tmp_path / "mnt-window"

    with pytest.raises(DeviceRefused, match=r"^refusing /dev/\S+: open by another process"):
        devices.format_and_mount(device, "ext4", point, created_by_run=True)

    assert str(point) not in Path("/proc/self/mounts").read_text()


def test_signatures_of_blank_device_is_empty(loops: Loops) -> None:
    assert signatures_of(loops.device()) == []


def test_check_device_is_blank_releases_its_claim(loops: Loops) -> None:
    device = loops.device()

    check_device_is_blank(device, created_by_run=False)

    os.close(os.open(device, os.O_RDONLY | os.O_EXCL))  # no EBUSY: nothing held


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
# -- a whole slot on a block target --------------------------------------------


def block_payload(
    root: Path,
    by_id: Path,
    workloads: list[dict],
    *,
    run_id: str,
    cell_id: str = "c000-loop-x1-r1",
    slot_index: int = 0,
    fleet_size: int = 1,
    filesystem: str = "raw",
    **target: object,
) -> dict:
    """One slot's payload on the loop device behind `by_id`'s EBS link, its results under
    `root`/raw: a raw target unless `filesystem` says otherwise (`target`: its other
    fields). What the raw-device tests and `scripts/signal_sweep.py --device` run."""
    return {
        "version": 1,
        "run_id": run_id,
        "cell": {
            "cell_id": cell_id,
            "cell_index": 0,
            "fleet_size": fleet_size,
            "repeat": 1,
        },
        "slot_index": slot_index,
        "target": {
            "kind": "block",
            "volume_id": VOLUME_ID,
            "by_id_dir": str(by_id),
            "filesystem": filesystem,
            **target,
        },
        "workloads": workloads,
        "results": {"kind": "directory", "root": str(root / "raw")},
        "time_limit_s": 120,
    }


BLOCK_RUN = "blk-20261121t000000z"


def _slot_files(tmp_path: Path) -> Path:
    return tmp_path / "raw" / BLOCK_RUN / "c000-loop-x1-r1" / "slot-0000"


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

    code = run_slot(block_payload(tmp_path, by_id, [IOPING_WRITE, app], run_id=BLOCK_RUN, **target))

    assert code == 0
    manifest = json.loads((_slot_files(tmp_path) / "manifest.json").read_text())
    assert (manifest["target_fstype"], manifest["target_device"]) == (filesystem, str(device))
    assert "noatime" in manifest["mount_options"]
    assert manifest["target_volume_id"] == VOLUME_ID  # CloudWatch metrics outlive the volume
    app_out = json.loads((_slot_files(tmp_path) / "w01-app-where.json").read_text())
    assert app_out["stdout_tail"].strip() == str(device)
    assert str(mount_point) not in Path("/proc/self/mounts").read_text()


# fio / ioping / the drain on a raw device: tests/integration/test_raw_device_io.py

FIO_WRITE = {
    "kind": "fio",
    "name": "seq-write-1m-qd32",
    "params": {"RUNTIME": "1", "SIZE": "4m", "IO_DEPTH": "4"},
}
REFUSED_IN_THE_AGENT = {
    "ext4": "carries a signature",
    "ext4 at 1 MiB, no partition table": "signature at offset 1048576",
    "unknown data at 5 MiB": "not blank",
    "held open by another process, created by run": "open by another process",
    "btrfs mounted read-only, created by run": "in use",
    "btrfs mounted read-only in another mount namespace": "in use",
    "read-only (losetup -r)": "it is read-only",
    "read-only (losetup -r), created by run": "it is read-only",
    "partition read-only (blockdev --setro), created by run": "partition",
    "empty backing file (0 bytes)": "it has no capacity",
    "partitions the kernel lists, table wiped, fs at 9.5 GiB": "the kernel lists partitions",
    "ext4 on a partition only": "PTTYPE=dos",
    "md RAID member, v0.90 superblock at the end": "TYPE=linux_raid_member",
    "data in the last bytes of a device just over 1 MiB": "not blank",
    "4Kn with ext4": "TYPE=ext4",
    "partition held exclusively by another process, created by run": "in use",
    "held open by another process, node of another name": "open by another process",
    "partition read-only, node of another name, created by run": "is read-only",
    "ext4 at 1.5 GiB of 4 GiB, no partition table": "signature at offset 1610612736",
}


@pytest.mark.parametrize("kind", REFUSED_IN_THE_AGENT, ids=list(REFUSED_IN_THE_AGENT))
def test_refused_device_fails_the_slot_and_is_never_written(
    loops: Loops, tmp_path: Path, by_id: Path, kind: str
) -> None:
    # given a device of this kind named as the slot's EBS volume (read-only mounts: the
    # filesystem itself writes nothing, so any change to the backing file is ours)
    if kind == "btrfs mounted read-only, created by run":
        device = loops.device(size_mib=320)
        _mkfs("btrfs", device)
        loops.mount(device, "-o", "ro")
        created = True
    elif kind == "btrfs mounted read-only in another mount namespace":
        device = _mounted_in_another_namespace(loops, "ro")
        created = True
    else:
        device = KINDS[kind].make(loops)
        created = KINDS[kind].created_by_run
    backing = loops.images[-1]
    before, written_before = _sha256(backing), _sectors_written(device)
    (by_id / EBS_LINK).symlink_to(device)
    target = {"filesystem": "raw", "created_by_run": created}

    # when the agent runs fio and ioping writes on it
    code = run_slot(
        block_payload(tmp_path, by_id, [FIO_WRITE, IOPING_WRITE], run_id=BLOCK_RUN, **target)
    )

    # then the slot failed with the guard's reason, nothing ran, and not a byte changed
    assert code != 0
    record = json.loads((_slot_files(tmp_path) / "slot.json").read_text())
    assert f"target: refusing {device}: " in record["error"]
    assert REFUSED_IN_THE_AGENT[kind] in record["error"]
    assert [w["status"] for w in record["workloads"]] == ["SKIPPED", "SKIPPED"]
    assert _sha256(backing) == before
    assert _sectors_written(device) == written_before  # the block layer wrote nothing either


def test_raw_device_is_held_exclusively_while_the_slot_runs(
    loops: Loops, tmp_path: Path, by_id: Path
) -> None:
    # given an app-less raw slot whose ioping we use as a window to look from outside
    device = loops.device()
    (by_id / EBS_LINK).symlink_to(device)
    seen: list[str] = []
    import iofleet.agent.slot as slot_module

    real = slot_module.run_child

    def look(argv, **kwargs):  # type: ignore[no-untyped-def]
        try:
            os.close(os.open(device, os.O_RDONLY | os.O_EXCL))
            seen.append("free")
        except OSError as exc:
            seen.append(os.strerror(exc.errno or 0))
        return real(argv, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(slot_module, "run_child", look)
        code = run_slot(block_payload(tmp_path, by_id, [IOPING_WRITE], run_id=BLOCK_RUN))

    assert code == 0
    assert seen == [os.strerror(16)]  # EBUSY while ioping ran: the agent held the device
    os.close(os.open(device, os.O_RDONLY | os.O_EXCL))  # and released it afterwards
