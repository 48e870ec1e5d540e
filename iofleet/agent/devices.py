"""Block devices: find an EBS volume's device by its id, refuse anything in use.

The device is never guessed from a name like `nvme1n1` (names move between
boots and attachments). On Nitro instances an EBS volume's NVMe serial is its
volume id without the dash, visible as `/dev/disk/by-id/nvme-Amazon_Elastic_
Block_Store_vol0123...` and in `/sys/block/*/device/serial`.

The guard (`claim_device`) asks the kernel, not a parser (docs/decisions.md #4):

1. The disk that backs `/` is refused without being opened for anything.
2. The device is opened `O_RDONLY | O_EXCL`. The kernel refuses that (EBUSY)
   while anything has the device or one of its partitions mounted, in any
   mount namespace, or holds it exclusively: md, device-mapper (LVM, dm-crypt),
   active swap, another exclusive opener (mkfs, another agent). The claim is
   kept open while the agent uses the device raw (fio and ioping do not open
   with O_EXCL, so they still can); for a filesystem target it is released
   just before mkfs, which opens O_EXCL itself, and mount claims the device
   again (the window and what it allows are in decisions #4).
3. A device with no capacity (0 bytes: an unattached loop device, no medium) or that
   is read-only, or has a read-only partition (the kernel's ro flag: BLKROGET, sysfs
   `ro`; losetup -r, blockdev --setro, a write-protected medium) is refused: writes
   would fail mid-run on a device someone protected.
4. A device (or partition) another process merely has open (seen in
   /proc/*/fd, as fuser does, or mapped in /proc/*/maps) or that backs a loop
   device (/sys/block/loop*/loop/backing_file: the kernel holds it without a
   claim) is refused.
5. Unless this run created the volume: no signature libblkid knows
   (`blkid -p`, at offset 0 and at every MiB boundary where data is found)
   and no non-zero byte in the sampled blocks: the whole first and last MiB,
   and the first 8 KiB and the 8 KiB at +64 KiB of every MiB up to 8 GiB and
   of evenly spaced points beyond (where filesystems, RAID and LVM
   superblocks sit in a partition that starts there), and no partition the
   kernel lists (a table wiped under the kernel leaves its partitions, whose
   data may sit between the samples). A volume this run created may carry
   anything (a filesystem from an earlier attempt), but the kernel rules 1-4
   hold for it too.

The device's partitions, holders and sysfs flags are looked up by its kernel name,
found from its device number (a node may carry any file name).

Every refusal is one line, `refusing DEVICE: reason`. Stdlib only (runs as
root on the instance).
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from iofleet.quote import quote
from iofleet.testhook import pause

BY_ID_DIR = Path("/dev/disk/by-id")
SYS_BLOCK = Path("/sys/block")
SYS_CLASS_BLOCK = Path("/sys/class/block")
SWAPS = Path("/proc/swaps")
EBS_BY_ID_PREFIX = "nvme-Amazon_Elastic_Block_Store_"
_VOLUME_ID = re.compile(r"vol-[0-9a-f]{8,17}\Z")  # \Z: `$` lets a trailing newline through
FILESYSTEMS = ("xfs", "ext4", "raw")


class DeviceError(Exception):
    """Block-device trouble; the message is one line."""


class DeviceNotFound(DeviceError):
    pass


class DeviceRefused(DeviceError):
    """The device is in use or carries data: the agent will not touch it."""


def volume_serial(volume_id: str) -> str:
    """`vol-0123...` -> `vol0123...` (the NVMe serial of an EBS volume)."""
    if not _VOLUME_ID.match(volume_id):
        raise DeviceError(f"not an EBS volume id: {quote(volume_id)} (expected vol-<hex>)")
    return volume_id.replace("-", "", 1)


def find_device_for_volume(
    volume_id: str,
    by_id_dir: Path = BY_ID_DIR,
    sys_block: Path = SYS_BLOCK,
) -> Path:
    """The block device (e.g. /dev/nvme2n1) of an attached EBS volume.

    Looks for the by-id link first (whole disk or namespace `_1`, never a
    `-partN` link), then at NVMe serials in sysfs. Raises DeviceNotFound.
    """
    serial = volume_serial(volume_id)
    wanted = {EBS_BY_ID_PREFIX + serial, EBS_BY_ID_PREFIX + serial + "_1"}
    found: set[Path] = set()
    try:
        entries = sorted(by_id_dir.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        if entry.name in wanted:
            found.add(entry.resolve())
    if not found:
        for serial_file in sorted(sys_block.glob("*/device/serial")):
            try:
                text = serial_file.read_text(errors="replace").strip()
            except OSError:
                continue
            if text == serial:
                found.add(Path("/dev") / serial_file.parent.parent.name)
    if not found:
        raise DeviceNotFound(
            f"no block device for EBS volume {volume_id} "
            f"(looked for {EBS_BY_ID_PREFIX}{serial} in {by_id_dir} and NVMe serials in {sys_block})"
        )
    if len(found) > 1:
        names = ", ".join(str(p) for p in sorted(found))
        raise DeviceRefused(f"EBS volume {volume_id} maps to several devices: {names}")
    device = found.pop()
    if not _is_block_device(device):
        raise DeviceNotFound(f"{device} (EBS volume {volume_id}) is not a block device")
    return device


def wait_for_volume(
    volume_id: str,
    timeout_s: float,
    by_id_dir: Path = BY_ID_DIR,
    sys_block: Path = SYS_BLOCK,
) -> Path:
    """find_device_for_volume, retried until the attachment shows up or timeout_s passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return find_device_for_volume(volume_id, by_id_dir, sys_block)
        except DeviceNotFound:
            if time.monotonic() >= deadline:
                raise
        time.sleep(1.0)


def _is_block_device(path: Path) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def device_bytes(device: Path) -> int:
    """The size of a block device in bytes (DeviceError if it cannot be opened)."""
    try:
        fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise DeviceError(f"{device}: cannot open: {exc.strerror or exc}") from None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


BLKSSZGET = 0x1268  # linux/fs.h _IO(0x12, 104): logical block size, what O_DIRECT aligns to


def logical_block_size(device: Path) -> int:
    """The device's logical block size in bytes (512, or 4096 on a 4Kn device): the unit an
    O_DIRECT I/O's offset and length must be a multiple of. DeviceError if it cannot tell."""
    import fcntl

    try:
        fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise DeviceError(f"{device}: cannot open: {exc.strerror or exc}") from None
    try:
        out = bytearray(4)
        fcntl.ioctl(fd, BLKSSZGET, out)
    except OSError as exc:
        raise DeviceError(f"{device}: no logical block size: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return int.from_bytes(out, "little")


def kernel_name(device: Path, sys_class_block: Path = SYS_CLASS_BLOCK) -> str:
    """The kernel's name of the block device behind `device` (e.g. `loop3`), found by its
    device number in sysfs: a node may carry any file name (a udev NAME rule, a container's
    own /dev, a node made with mknod), and sysfs knows the device only by its kernel name.
    The node's own name when sysfs does not list the number."""
    number = _rdev(device)
    if number is not None:
        wanted = f"{os.major(number)}:{os.minor(number)}"
        name = device.resolve().name
        if _sysfs_dev(name, sys_class_block) == wanted:
            return name
        try:
            return _sys_dev(number).resolve(strict=True).name
        except OSError:
            for dev_file in sys_class_block.glob("*/dev"):
                if _sysfs_dev(dev_file.parent.name, sys_class_block) == wanted:
                    return dev_file.parent.name
    return device.resolve().name


def partitions_of(device: Path, sys_class_block: Path = SYS_CLASS_BLOCK) -> list[str]:
    """Kernel names of the device's partitions (e.g. ['loop3p1'])."""
    base = sys_class_block / kernel_name(device, sys_class_block)
    try:
        children = sorted(base.iterdir())
    except OSError:
        return []
    return [c.name for c in children if (c / "partition").exists()]


def holders_of(name: str, sys_class_block: Path = SYS_CLASS_BLOCK) -> list[str]:
    try:
        return sorted(p.name for p in (sys_class_block / name / "holders").iterdir())
    except OSError:
        return []


def _sysfs_dev(name: str, sys_class_block: Path) -> str | None:
    try:
        return (sys_class_block / name / "dev").read_text().strip()
    except OSError:
        return None


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def signatures_of(device: Path, offset: int = 0) -> list[str]:
    """Signatures libblkid finds on the device (a low-level probe: superblocks and partition
    tables, including those it looks for at the device's end), probing from `offset`."""
    blkid = shutil.which("blkid")
    if blkid:
        argv = [blkid, "-p", "-o", "export"] + (["-O", str(offset)] if offset else [])
        proc = subprocess.run(argv + [str(device)], capture_output=True, text=True, check=False)
        if proc.returncode == 2:  # nothing found
            return []
        if proc.returncode == 0:
            found = []
            for line in proc.stdout.splitlines():
                key, _, value = line.partition("=")
                if key in ("TYPE", "PTTYPE"):
                    found.append(f"{key}={value.replace(chr(92), '')}")
            return found or ["unknown signature"]
        # blkid exits 8 on ambivalent probes (several signatures): that is not blank
        detail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return [f"blkid: {detail[0]}"]
    wipefs = shutil.which("wipefs")
    if wipefs and not offset:
        proc = subprocess.run(
            [wipefs, "--no-act", "--json", str(device)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise DeviceRefused(f"refusing {device}: wipefs failed: {proc.stderr.strip()}")
        try:
            rows = json.loads(proc.stdout or "{}").get("signatures", [])
        except ValueError:
            raise DeviceRefused(f"refusing {device}: wipefs printed no JSON") from None
        return [f"TYPE={row.get('type')}" for row in rows]
    if wipefs:
        return []  # wipefs probes offset 0 only; the data scan still covers this offset
    raise DeviceRefused(f"refusing {device}: neither blkid nor wipefs is installed")


MIB = 1 << 20
HEAD_SCAN_BYTES = 8 << 30  # every MiB boundary is sampled up to here (partition starts)
SCAN_THREADS = 16  # sampled reads in flight at once (an EBS volume serves them in parallel)
MAX_FAR_SAMPLES = 1024  # beyond it, at most this many evenly spaced boundaries
MAX_NAMED_PROBES = 16  # blkid runs to name data found at boundaries (the refusal stands anyway)
_WINDOWS = ((0, 8192), (65536, 8192))  # at a boundary: ext, xfs, LVM, md 1.2, swap; btrfs


def sample_plan(size: int) -> list[tuple[int, int]]:
    """(offset, length) of the blocks read to tell a blank device from one with data."""
    plan = [(0, min(MIB, size))]
    boundaries = list(range(MIB, min(size, HEAD_SCAN_BYTES), MIB))
    if size > HEAD_SCAN_BYTES:
        stride = max(1 << 30, -(-(size - HEAD_SCAN_BYTES) // MAX_FAR_SAMPLES // MIB) * MIB)
        boundaries += list(range(HEAD_SCAN_BYTES, size, stride))
    for boundary in boundaries:
        for at, length in _WINDOWS:
            if boundary + at + length <= size:
                plan.append((boundary + at, length))
    tail = max(size - MIB, 0) // 4096 * 4096
    if size > MIB:  # (a device just over 1 MiB: the tail read starts at 0 and covers it all)
        plan.append((tail, size - tail))
    return plan


def _read_at(fd: int, offset: int, length: int) -> bytes:
    buf = mmap.mmap(-1, -(-length // 4096) * 4096)  # page-aligned, as O_DIRECT wants
    try:
        got = os.preadv(fd, [buf], offset)
        return bytes(buf[: min(got, length)])
    finally:
        buf.close()


def nonzero_offsets(device: Path, size: int) -> list[int]:
    """Offsets of sampled blocks holding a non-zero byte, read past the page cache."""
    flags = os.O_RDONLY | os.O_CLOEXEC
    try:
        fd = os.open(device, flags | getattr(os, "O_DIRECT", 0))
    except OSError:
        fd = os.open(device, flags)
    from concurrent.futures import ThreadPoolExecutor  # reads overlap: QD>1 on a volume

    def first_nonzero(block: tuple[int, int]) -> int | None:
        offset, length = block
        try:
            data = _read_at(fd, offset, length)
        except OSError as exc:
            raise DeviceRefused(
                f"refusing {device}: cannot read it at offset {offset}: {exc.strerror or exc}"
            ) from None
        if data.strip(b"\0"):
            return offset + (len(data) - len(data.lstrip(b"\0")))
        return None

    try:
        with ThreadPoolExecutor(max_workers=SCAN_THREADS) as pool:
            hits = list(pool.map(first_nonzero, sample_plan(size)))
    finally:
        os.close(fd)
    return [at for at in hits if at is not None]


def _mib(size: int) -> str:
    return f"{size / MIB:.6g} MiB"


def _rdev(path: Path) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_rdev if stat.S_ISBLK(st.st_mode) else None


def _sys_dev(number: int) -> Path:
    return Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}")


def root_disks() -> set[int]:
    """Device numbers of what backs `/`: its device, that device's whole disk, and what a
    device-mapper/md root is built from (slaves), recursively."""
    try:
        number = os.stat("/").st_dev
    except OSError:
        return set()
    found: set[int] = set()
    todo = [number]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.add(current)
        node = _sys_dev(current)
        try:
            real = node.resolve(strict=True)
        except OSError:
            continue
        related = list((real / "slaves").glob("*/dev"))
        if (real / "partition").exists():
            related.append(real.parent / "dev")
        for dev_file in related:
            try:
                major, minor = dev_file.read_text().strip().split(":")
            except (OSError, ValueError):
                continue
            todo.append(os.makedev(int(major), int(minor)))
    return found


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def openers(numbers: set[int], proc: Path = Path("/proc")) -> list[str]:
    """`pid N (comm)` of every other process with one of these block devices open."""
    me = str(os.getpid())
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or entry.name == me:
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue  # gone, or a kernel thread
        for fd in fds:
            try:
                st = os.stat(fd)
            except OSError:
                continue
            if stat.S_ISBLK(st.st_mode) and st.st_rdev in numbers:
                found.append(f"pid {entry.name} ({_comm(entry.name)})")
                break
        else:
            if _maps_device(entry, numbers):  # an mmap of the device outlives its fd
                found.append(f"pid {entry.name} ({_comm(entry.name)}, mapped)")
    return found


def _maps_device(pid_dir: Path, numbers: set[int]) -> bool:
    try:
        text = (pid_dir / "maps").read_text()
    except OSError:
        return False
    paths = {line.split(None, 5)[5] for line in text.splitlines() if " /dev/" in line}
    return any(_rdev(Path(path.strip())) in numbers for path in paths)


def loop_backers(numbers: set[int], sys_block: Path = SYS_BLOCK) -> list[str]:
    """Loop devices whose backing file is one of these block devices (the kernel holds it
    open for them: no process fd, no exclusive claim)."""
    found = []
    for backing in sorted(sys_block.glob("loop*/loop/backing_file")):
        try:
            path = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if _rdev(Path(path)) in numbers:
            found.append(backing.parent.parent.name)
    return found


def _family(device: Path, sys_class_block: Path) -> dict[str, tuple[int, str]]:
    """Kernel name -> (device number, role) for the device, its partitions and what holds
    either (md, dm); role is "device", "partition" or "holder"."""
    name = kernel_name(device, sys_class_block)
    roles = {name: "device"}
    for part in partitions_of(device, sys_class_block):
        roles[part] = "partition"
    for member in list(roles):
        for holder in holders_of(member, sys_class_block):
            roles.setdefault(holder, "holder")
    members: dict[str, tuple[int, str]] = {}
    for member, role in roles.items():
        number = _sysfs_dev(member, sys_class_block)
        if number and number.count(":") == 1:
            major, minor = number.split(":")
            members[member] = (os.makedev(int(major), int(minor)), role)
    return members


def _why_busy(device: Path, sys_class_block: Path, swaps: Path) -> str:
    """What the kernel's EBUSY is probably about, for the message (never the decision):
    mounts in any mount namespace (by device number, or by source path for btrfs, whose
    mounts carry an anonymous number), active swap, sysfs holders."""
    family = _family(device, sys_class_block)
    by_number = {f"{os.major(n)}:{os.minor(n)}": k for k, (n, _) in family.items()}
    name = kernel_name(device, sys_class_block)
    by_path = {f"/dev/{k}": k for k in family} | {str(device): name, str(device.resolve()): name}
    seen_ns: set[str] = set()
    where: list[str] = []
    own_ns = _mnt_ns("self")
    for pid_dir in [Path("/proc/self")] + sorted(Path("/proc").glob("[0-9]*")):
        ns = _mnt_ns(pid_dir.name)
        if ns is None or ns in seen_ns:
            continue
        seen_ns.add(ns)
        try:
            lines = (pid_dir / "mountinfo").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            dash = fields.index("-") if "-" in fields else len(fields)
            source = fields[dash + 2] if dash + 2 < len(fields) else ""
            kname = by_number.get(fields[2]) if len(fields) > 4 else None
            kname = kname or by_path.get(source)
            if kname is None:
                continue
            what = "" if family[kname][1] == "device" else f"{kname} "
            other = "" if ns == own_ns else f" in another mount namespace (pid {pid_dir.name})"
            where.append(f"{what}mounted on {_unescape(fields[4])}{other}")
    swapping = _swap_users(set(family), swaps)
    if swapping:
        where.append(f"active swap ({', '.join(swapping)})")
    held = [k for k, (_, role) in family.items() if role == "holder"]
    if held:
        where.append(f"held by {', '.join(held)}")
    return "; ".join(dict.fromkeys(where)) or "held exclusively by another process"


def _mnt_ns(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


class DeviceClaim:
    """An exclusive (O_EXCL) read-only open of a block device: while it is held the kernel
    refuses anyone else's mount, swapon, md/dm assembly or exclusive open of the device."""

    def __init__(self, device: Path, fd: int, size: int):
        self.device = device
        self.size = size
        self._fd: int | None = fd
        self.number = os.fstat(fd).st_rdev

    @property
    def held(self) -> bool:
        return self._fd is not None

    def change(self) -> str | None:
        """What became of the device since it was claimed (one line), None if nothing: its
        node gone or naming another device (an EBS volume detached, another attached under
        its name), its size changed, or it turned read-only. The agent asks before each
        workload on a raw device (a node that names another device is one the guard never
        checked) and after one fails (to say why)."""
        if self._fd is None:
            return None
        since = "since the guard claimed it"
        try:
            now = os.stat(self.device).st_rdev
        except OSError as exc:
            return f"{self.device} is gone {since} ({exc.strerror or exc})"
        if now != self.number:
            return (
                f"{self.device} names another device {since} "
                f"({os.major(now)}:{os.minor(now)}, not {os.major(self.number)}:"
                f"{os.minor(self.number)})"
            )
        try:
            size = os.lseek(self._fd, 0, os.SEEK_END)
        except OSError as exc:
            return f"{self.device} cannot be read {since} ({exc.strerror or exc})"
        if size != self.size:
            return f"{self.device} changed size {since} ({_mib(self.size)} -> {_mib(size)})"
        if _read_only(self._fd):
            return f"{self.device} turned read-only {since}"
        return None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DeviceClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


UDEV_GRACE_S = 5.0  # udev probes a device briefly after attach/change events


def claim_device(
    device: Path,
    created_by_run: bool,
    *,
    sys_class_block: Path = SYS_CLASS_BLOCK,
    swaps: Path = SWAPS,
) -> DeviceClaim:
    """The guard: a DeviceClaim on a device that is safe to format or write raw, or
    DeviceRefused (one line). See the module docstring for the rules."""
    device = Path(device)
    number = _rdev(device)
    if number is None:
        raise DeviceRefused(f"refusing {device}: not a block device")
    if number in root_disks():
        raise DeviceRefused(f"refusing {device}: it backs the root filesystem (/)")
    try:
        fd = os.open(device, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            why = _why_busy(device, sys_class_block, swaps)
            raise DeviceRefused(
                f"refusing {device}: in use, the kernel refuses an exclusive open ({why})"
            ) from None
        raise DeviceRefused(f"refusing {device}: cannot open: {exc.strerror or exc}") from None
    claim = DeviceClaim(device, fd, os.lseek(fd, 0, os.SEEK_END))
    try:
        if claim.size == 0:
            raise DeviceRefused(
                f"refusing {device}: it has no capacity (0 bytes: no medium, or a loop "
                "device with nothing attached)"
            )
        _refuse_if_read_only(device, fd, sys_class_block)
        _refuse_if_open(device, sys_class_block)
        if not created_by_run:
            _refuse_unless_blank(device, claim.size, sys_class_block)
    except BaseException:
        claim.release()
        raise
    return claim


BLKROGET = 0x125E  # linux/fs.h _IO(0x12, 94): the kernel's read-only flag of a block device


def _read_only(fd: int) -> bool:
    import fcntl  # not at module level: the agent's imports stay light

    flag = bytearray(4)
    try:
        fcntl.ioctl(fd, BLKROGET, flag)
    except OSError:
        return False  # not a block device ioctl here: sysfs below still answers
    return int.from_bytes(flag, "little") != 0


def _refuse_if_read_only(device: Path, fd: int, sys_class_block: Path) -> None:
    """A read-only device (losetup -r, blockdev --setro, a write-protected medium) or one
    with a read-only partition: someone protected it, and writes to it would fail mid-run."""
    name = kernel_name(device, sys_class_block)
    if _read_only(fd) or _sysfs_flag(sys_class_block / name / "ro"):
        raise DeviceRefused(f"refusing {device}: it is read-only (the kernel's ro flag is set)")
    protected = [
        p for p in partitions_of(device, sys_class_block) if _sysfs_flag(sys_class_block / p / "ro")
    ]
    if protected:
        raise DeviceRefused(
            f"refusing {device}: its partition {', '.join(protected)} is read-only "
            "(the kernel's ro flag is set)"
        )


def _sysfs_flag(path: Path) -> bool:
    try:
        return path.read_text().strip() not in ("", "0")
    except OSError:
        return False


def _refuse_if_partitioned(device: Path, sys_class_block: Path) -> None:
    """Partitions the kernel knows mean a partition table was read from the device, even if
    it has since been wiped: their data may sit anywhere (beyond what the scan samples)."""
    parts = partitions_of(device, sys_class_block)
    if parts:
        raise DeviceRefused(
            f"refusing {device}: the kernel lists partitions on it ({', '.join(parts)}); "
            "only blank volumes or volumes created by this run are used"
        )


def _refuse_if_open(device: Path, sys_class_block: Path) -> None:
    numbers = {number for number, _ in _family(device, sys_class_block).values()}
    deadline = time.monotonic() + UDEV_GRACE_S
    while True:
        found = openers(numbers)
        udev_only = found and all("udev" in who for who in found)
        if not found or not udev_only or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if found:
        raise DeviceRefused(f"refusing {device}: open by another process ({', '.join(found)})")
    backed = loop_backers(numbers)
    if backed:
        raise DeviceRefused(f"refusing {device}: it backs loop device {', '.join(backed)}")


def _refuse_unless_blank(device: Path, size: int, sys_class_block: Path) -> None:
    found = signatures_of(device)
    if found:
        raise DeviceRefused(
            f"refusing {device}: it carries a signature ({', '.join(found)}); "
            "only blank volumes or volumes created by this run are used"
        )
    _refuse_if_partitioned(device, sys_class_block)
    data = nonzero_offsets(device, size)
    if not data:
        return
    boundaries = sorted({at // MIB * MIB for at in data if 0 < at // MIB * MIB < size - MIB})
    for boundary in boundaries[:MAX_NAMED_PROBES]:
        named = signatures_of(device, boundary)
        if named and not named[0].startswith("blkid:"):
            raise DeviceRefused(
                f"refusing {device}: it carries a signature at offset {boundary} "
                f"({', '.join(named)}); only blank volumes or volumes created by this run "
                "are used"
            )
    raise DeviceRefused(
        f"refusing {device}: it is not blank (non-zero data at offset {data[0]}); "
        "only blank volumes or volumes created by this run are used"
    )


def check_device_is_blank(device: Path, created_by_run: bool, **kwargs: Path) -> None:
    """claim_device, released at once: raise DeviceRefused unless the device is safe to use."""
    claim_device(device, created_by_run, **kwargs).release()


def _swap_users(names: set[str], swaps: Path) -> list[str]:
    try:
        lines = swaps.read_text().splitlines()[1:]
    except OSError:
        return []
    used = []
    for line in lines:
        fields = line.split()
        if fields and Path(fields[0]).name in names:
            used.append(Path(fields[0]).name)
    return used


@dataclass(frozen=True)
class PreparedDevice:
    device: Path
    filesystem: str  # xfs | ext4 | raw
    mount_point: Path | None  # None for raw
    mount_options: str | None


def _run(argv: list[str], what: str) -> None:
    try:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise DeviceError(f"{what}: {argv[0]} is not installed") from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise DeviceError(f"{what} failed: {detail[-1] if detail else f'exit {proc.returncode}'}")


def format_and_mount(
    device: Path,
    filesystem: str,
    mount_point: Path | None,
    created_by_run: bool,
    mount_options: str | None = None,
) -> PreparedDevice:
    """Make a filesystem and mount it (or leave the device raw). Call claim_device first and
    release the claim just before (mkfs opens O_EXCL); after the mount the device is checked
    again for other openers (the window of decisions #4)."""
    if filesystem not in FILESYSTEMS:
        raise DeviceError(
            f"filesystem must be one of {', '.join(FILESYSTEMS)}, got {quote(filesystem)}"
        )
    if filesystem == "raw":
        return PreparedDevice(device, "raw", None, None)
    if mount_point is None:
        raise DeviceError("mount_point is required for a filesystem target")
    if filesystem == "xfs":
        # -f (overwrite) only for our own volumes: on anything else mkfs keeps its own guard
        argv = ["mkfs.xfs", "-q"] + (["-f"] if created_by_run else []) + [str(device)]
    else:
        argv = ["mkfs.ext4", "-q"] + (["-F"] if created_by_run else []) + [str(device)]
    _run(argv, f"mkfs.{filesystem} {device}")
    mount_point.mkdir(parents=True, exist_ok=True)
    mount_argv = ["mount", "-t", filesystem]
    if mount_options:
        mount_argv += ["-o", mount_options]
    _run(mount_argv + [str(device), str(mount_point)], f"mount {device}")
    pause("target-mounted")  # a test stops the agent here (iofleet.testhook)
    # the claim was released for mkfs: check nobody slipped in before mount claimed it again
    try:
        if os.stat(mount_point).st_dev != os.stat(device).st_rdev:
            raise DeviceRefused(
                f"refusing {device}: {mount_point} is not the filesystem made on it"
            )
        _refuse_if_open(device, SYS_CLASS_BLOCK)
    except (DeviceRefused, OSError) as exc:
        subprocess.run(["umount", str(mount_point)], capture_output=True, check=False)
        if isinstance(exc, DeviceRefused):
            raise
        raise DeviceError(f"{mount_point}: {exc.strerror or exc}") from None
    return PreparedDevice(device, filesystem, mount_point, mount_options)


def mounted_from(mount_point: Path, device: Path) -> bool:
    """Is `mount_point` a mount of the filesystem on `device` (for the cleanup of a slot
    stopped in or just after format_and_mount's mount)?"""
    try:
        return (
            os.path.ismount(mount_point) and os.stat(mount_point).st_dev == os.stat(device).st_rdev
        )
    except OSError:
        return False


def unmount(mount_point: Path) -> None:
    _run(["umount", str(mount_point)], f"umount {mount_point}")
