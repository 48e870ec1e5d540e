"""Block devices: find an EBS volume's device by its id, refuse anything in use.

The device is never guessed from a name like `nvme1n1` (names move between
boots and attachments). On Nitro instances an EBS volume's NVMe serial is its
volume id without the dash, visible as `/dev/disk/by-id/nvme-Amazon_Elastic_
Block_Store_vol0123...` and in `/sys/block/*/device/serial`.

Before writing, the device must be unused: not mounted (itself, a partition
or a holder such as device-mapper), not swap, not partitioned, no filesystem
or partition-table signature. A volume this run created skips the partition
and signature checks (it may carry a filesystem from an earlier attempt);
a mounted device is always refused.

Stdlib only (runs as root on the instance).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

BY_ID_DIR = Path("/dev/disk/by-id")
SYS_BLOCK = Path("/sys/block")
SYS_CLASS_BLOCK = Path("/sys/class/block")
MOUNTINFO = Path("/proc/self/mountinfo")
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
        raise DeviceError(f"not an EBS volume id: {volume_id!r} (expected vol-<hex>)")
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


def _dev_number(path: Path) -> str:
    st = os.stat(path)
    if not stat.S_ISBLK(st.st_mode):
        raise DeviceError(f"{path} is not a block device")
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def partitions_of(device: Path, sys_class_block: Path = SYS_CLASS_BLOCK) -> list[str]:
    """Kernel names of the device's partitions (e.g. ['loop3p1'])."""
    base = sys_class_block / device.resolve().name
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


def mounts_of(dev_numbers: dict[str, str], mountinfo: Path = MOUNTINFO) -> list[tuple[str, str]]:
    """(kernel name, mount point) for every mount whose source is one of dev_numbers (major:minor -> name)."""
    hits: list[tuple[str, str]] = []
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError as exc:
        raise DeviceError(f"cannot read {mountinfo}: {exc.strerror or exc}") from None
    for line in lines:
        fields = line.split()
        if len(fields) >= 5 and fields[2] in dev_numbers:
            hits.append((dev_numbers[fields[2]], _unescape(fields[4])))
    return hits


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def signatures_of(device: Path) -> list[str]:
    """Filesystem / partition-table / RAID signatures found on the device (low-level probe)."""
    blkid = shutil.which("blkid")
    if blkid:
        proc = subprocess.run(
            [blkid, "-p", "-o", "export", str(device)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode == 2:  # nothing found
            return []
        if proc.returncode == 0:
            found = []
            for line in proc.stdout.splitlines():
                key, _, value = line.partition("=")
                if key in ("TYPE", "PTTYPE"):
                    found.append(f"{key}={value}")
            return found or ["unknown signature"]
        # blkid exits 4/8 on ambivalent probes (several signatures): that is not blank
        detail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return [f"blkid: {detail[0]}"]
    wipefs = shutil.which("wipefs")
    if wipefs:
        proc = subprocess.run(
            [wipefs, "--no-act", "--noheadings", "--output", "TYPE,OFFSET", str(device)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise DeviceError(f"wipefs failed on {device}: {proc.stderr.strip()}")
        return [f"TYPE={line.split()[0]}" for line in proc.stdout.splitlines() if line.strip()]
    raise DeviceRefused(
        f"cannot check {device} for signatures: neither blkid nor wipefs is installed"
    )


def check_device_is_blank(
    device: Path,
    created_by_run: bool,
    *,
    sys_class_block: Path = SYS_CLASS_BLOCK,
    mountinfo: Path = MOUNTINFO,
    swaps: Path = SWAPS,
) -> None:
    """Raise DeviceRefused unless the device is safe to format or write raw."""
    device = Path(device)
    if not _is_block_device(device):
        raise DeviceRefused(f"{device} is not a block device")
    name = device.resolve().name
    parts = partitions_of(device, sys_class_block)
    users = {name: _dev_number(device)}
    for kernel_name in parts + holders_of(name, sys_class_block):
        number = _sysfs_dev(kernel_name, sys_class_block)
        if number:
            users[kernel_name] = number
    for part in parts:
        for holder in holders_of(part, sys_class_block):
            number = _sysfs_dev(holder, sys_class_block)
            if number:
                users[holder] = number
    mounted = mounts_of({number: kname for kname, number in users.items()}, mountinfo)
    if mounted:
        where = ", ".join(f"{k} on {m}" for k, m in mounted)
        raise DeviceRefused(f"refusing {device}: mounted ({where})")
    swapping = _swap_users(set(users), swaps)
    if swapping:
        raise DeviceRefused(f"refusing {device}: in use as swap ({', '.join(swapping)})")
    if created_by_run:
        return
    if parts:
        raise DeviceRefused(f"refusing {device}: it has partitions ({', '.join(parts)})")
    holders = holders_of(name, sys_class_block)
    if holders:
        raise DeviceRefused(f"refusing {device}: in use by {', '.join(holders)}")
    found = signatures_of(device)
    if found:
        raise DeviceRefused(
            f"refusing {device}: it carries a signature ({', '.join(found)}); "
            "only blank volumes or volumes created by this run are used"
        )


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
    """Make a filesystem and mount it (or leave the device raw). Call check_device_is_blank first."""
    if filesystem not in FILESYSTEMS:
        raise DeviceError(f"filesystem must be one of {', '.join(FILESYSTEMS)}, got {filesystem!r}")
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
    return PreparedDevice(device, filesystem, mount_point, mount_options)


def unmount(mount_point: Path) -> None:
    _run(["umount", str(mount_point)], f"umount {mount_point}")
