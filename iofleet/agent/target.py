"""Prepare the storage under test for one slot, and clean it up afterwards.

Directory targets (a local path, an EFS or FSx mount point) get
`<path>/iofleet-<cell_id>/<slot-NNNN | populate>` as the working directory and
`<path>/iofleet-<cell_id>/shared` for IOFLEET_SHARED. Block targets are found
by EBS volume id, checked by the device guard, then formatted and mounted (or
used raw: fio and ioping on the device itself, no working directory there).

Stdlib only.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from iofleet.agent import devices
from iofleet.agent.manifest import mount_for_path
from iofleet.agent.payload import SlotPayload


@dataclass
class PreparedTarget:
    kind: str  # directory | block
    root: Path | None  # directory holding iofleet-<cell_id> (None for raw devices)
    workdir: Path  # cwd for the workloads (a temp dir off the target for raw devices)
    shared: Path | None
    raw_device: Path | None = None  # raw block device: fio/ioping do I/O here
    device: str | None = None
    fstype: str | None = None
    mount_options: str | None = None
    volume_id: str | None = None  # block targets: the EBS volume id (CloudWatch metrics)
    error: str | None = None
    _mounted: Path | None = field(default=None, repr=False)
    _claim: devices.DeviceClaim | None = field(default=None, repr=False)  # raw: held O_EXCL
    _own_workdir: bool = field(default=False, repr=False)

    def details(self) -> dict[str, object]:
        """The manifest's target fields."""
        path = str(self.raw_device) if self.raw_device else (str(self.root) if self.root else None)
        return {
            "target_kind": self.kind,
            "target_path": path,
            "target_fstype": self.fstype,
            "target_device": self.device,
            "mount_options": self.mount_options,
            "target_volume_id": self.volume_id,
            "target_error": self.error,
        }


def _describe_mount(prepared: PreparedTarget, path: Path) -> None:
    mount = mount_for_path(path)
    if mount is not None:
        prepared.fstype = prepared.fstype or mount.fstype
        prepared.device = prepared.device or mount.source
        prepared.mount_options = mount.options


def _fresh_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)  # a retried slot starts clean
    path.mkdir(parents=True)


def prepare_target(payload: SlotPayload, subdir: str) -> PreparedTarget:
    """Never raises for target trouble: the problem is returned in `.error`."""
    spec = payload.target
    if spec.kind == "directory":
        assert spec.path is not None
        root = Path(spec.path)
        prepared = PreparedTarget(
            "directory", root, root / f"iofleet-{payload.cell_id}" / subdir, None
        )
        prepared.shared = root / f"iofleet-{payload.cell_id}" / "shared"
        if not root.is_dir():
            prepared.error = f"target directory {root} does not exist"
            return prepared
        _describe_mount(prepared, root)
        try:
            _fresh_dir(prepared.workdir)
            prepared.shared.mkdir(parents=True, exist_ok=True)
            prepared._own_workdir = True
        except OSError as exc:
            prepared.error = f"cannot create {prepared.workdir}: {exc.strerror or exc}"
        return prepared
    return _prepare_block(payload, subdir)


def _prepare_block(payload: SlotPayload, subdir: str) -> PreparedTarget:
    spec = payload.target
    assert spec.volume_id is not None and spec.filesystem is not None
    prepared = PreparedTarget("block", None, Path(tempfile.mkdtemp(prefix="iofleet-raw-")), None)
    prepared.volume_id = spec.volume_id
    prepared._own_workdir = True
    by_id = Path(spec.by_id_dir) if spec.by_id_dir else devices.BY_ID_DIR
    try:
        device = devices.wait_for_volume(spec.volume_id, spec.attach_wait_s, by_id_dir=by_id)
        prepared.device = str(device)
        claim = devices.claim_device(device, spec.created_by_run)
        if spec.filesystem == "raw":
            # held until cleanup: nobody can mount, swapon or assemble it under fio/ioping
            prepared._claim = claim
        else:
            claim.release()  # mkfs opens O_EXCL itself, then mount claims it (decisions #4)
        mount_point = Path(spec.mount_point) if spec.mount_point else None
        done = devices.format_and_mount(
            device, spec.filesystem, mount_point, spec.created_by_run, spec.mount_options
        )
    except devices.DeviceError as exc:
        prepared.error = str(exc)
        if prepared._claim is not None:
            prepared._claim.release()
            prepared._claim = None
        return prepared
    prepared.fstype = done.filesystem
    if done.mount_point is None:
        prepared.raw_device = device
        return prepared
    prepared._mounted = done.mount_point
    shutil.rmtree(prepared.workdir, ignore_errors=True)
    root = done.mount_point
    prepared.root = root
    prepared.workdir = root / f"iofleet-{payload.cell_id}" / subdir
    prepared.shared = root / f"iofleet-{payload.cell_id}" / "shared"
    _describe_mount(prepared, root)
    try:
        _fresh_dir(prepared.workdir)
        prepared.shared.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        prepared.error = f"cannot create {prepared.workdir}: {exc.strerror or exc}"
    return prepared


def cleanup_target(prepared: PreparedTarget) -> str | None:
    """Remove the slot's data files (and unmount what we mounted). Returns a problem, if any."""
    problem = None
    if prepared._own_workdir and prepared.workdir.exists():
        shutil.rmtree(prepared.workdir, ignore_errors=True)
        if prepared.workdir.exists():
            problem = f"could not remove {prepared.workdir}"
        try:
            prepared.workdir.parent.rmdir()  # the cell dir, once nothing else is in it
        except OSError:
            pass
    if prepared._mounted is not None:
        try:
            devices.unmount(prepared._mounted)
        except devices.DeviceError as exc:
            problem = problem or str(exc)
    if prepared._claim is not None:
        prepared._claim.release()
        prepared._claim = None
    return problem
