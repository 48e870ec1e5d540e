"""Prepare the storage under test for one slot, and clean it up afterwards.

Directory targets (a local path, an EFS or FSx mount point) get
`<path>/iofleet-<run_id>/<cell_id>/<slot-NNNN | populate>` as the working
directory and `<path>/iofleet-<run_id>/<cell_id>/shared` for IOFLEET_SHARED:
keyed by run id, so two runs on one path never share (or delete) a directory.
Every directory below `<path>` is created and removed through directory file
descriptors opened with O_NOFOLLOW: a symlink planted at any of those names (or
inside the working directory) is refused or unlinked, never followed, so
neither preparation nor cleanup writes or deletes outside `<path>`. Block targets are found
by EBS volume id, checked by the device guard, then formatted and mounted (or
used raw: fio and ioping on the device itself, no working directory there).

Stdlib only.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from iofleet.agent import devices
from iofleet.agent.manifest import mount_for_path
from iofleet.agent.payload import SlotPayload
from iofleet.agent.stops import stops_held
from iofleet.testhook import pause


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
    _cell_fd: int | None = field(default=None, repr=False)  # O_NOFOLLOW fd of the cell dir
    _names: tuple[str, str, str] = field(default=("", "", ""), repr=False)  # run, cell, subdir
    _making: bool = field(default=False, repr=False)  # the workdir is being made (_names set)
    _mount_at: Path | None = field(default=None, repr=False)  # where a mount was asked for

    def device_change(self) -> str | None:
        """For a raw device: what became of it since the guard claimed it, if anything."""
        return self._claim.change() if self._claim is not None else None

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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def run_dir_name(run_id: str) -> str:
    return f"iofleet-{run_id}"


def _open_child_dir(parent_fd: int, name: str, create: bool) -> int:
    """Open `name` below parent_fd as a directory without following a symlink there."""
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(exc.errno, f"{name} is a symlink or not a directory") from None
        raise


def _open_cell_dir(root: Path, run_id: str, cell_id: str, create: bool) -> int:
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        run_fd = _open_child_dir(root_fd, run_dir_name(run_id), create)
    finally:
        os.close(root_fd)
    try:
        return _open_child_dir(run_fd, cell_id, create)
    finally:
        os.close(run_fd)


def _remove_entry(parent_fd: int, name: str) -> None:
    """Remove `name` below parent_fd: a directory tree (never following a symlink in it),
    or a symlink / file itself (not what it points to)."""
    try:
        st = os.lstat(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=parent_fd)  # fd-based on Linux: symlinks are unlinked
    else:
        os.unlink(name, dir_fd=parent_fd)


def _make_workdir(prepared: PreparedTarget, root: Path, payload: SlotPayload, subdir: str) -> None:
    """Create a fresh `<root>/iofleet-<run>/<cell>/<subdir>` and `.../shared` (raises OSError)."""
    cell_dir = root / run_dir_name(payload.run_id) / payload.cell_id
    prepared.workdir = cell_dir / subdir
    prepared.shared = cell_dir / "shared"
    prepared._names = (payload.run_id, payload.cell_id, subdir)
    prepared._making = True  # from here a stop's cleanup removes what was made, by name
    cell_fd = _open_cell_dir(root, payload.run_id, payload.cell_id, create=True)
    try:
        _remove_entry(cell_fd, subdir)  # a retried slot starts clean
        os.mkdir(subdir, 0o755, dir_fd=cell_fd)
        pause("workdir-made")  # a test stops the agent here (iofleet.testhook)
        os.close(_open_child_dir(cell_fd, "shared", create=True))
    except BaseException:
        os.close(cell_fd)
        raise
    prepared._cell_fd = cell_fd
    prepared._making = False


def remove_workdir(root: Path, run_id: str, cell_id: str, subdir: str) -> str | None:
    """Remove `<root>/iofleet-<run_id>/<cell_id>/<subdir>` (and the cell and run
    directories once empty) without following symlinks. Returns a problem, if any.
    For the slot of an agent that died before its own cleanup."""
    try:
        cell_fd = _open_cell_dir(root, run_id, cell_id, create=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"could not remove {root / run_dir_name(run_id) / cell_id / subdir}: {exc.strerror}"
    return _remove_workdir_at(cell_fd, root, run_id, cell_id, subdir)


def remove_run_dir(root: Path, run_id: str) -> str | None:
    """Remove `<root>/iofleet-<run_id>` whole without following symlinks (what a runner
    that died left: iofleet.local.leftovers). Returns a problem, if any."""
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return f"could not open {root}: {exc.strerror or exc}"
    try:
        _remove_entry(root_fd, run_dir_name(run_id))
    except FileNotFoundError:  # removed meanwhile (another run doing the same)
        pass
    except OSError as exc:
        return f"could not remove {root / run_dir_name(run_id)}: {exc.strerror or exc}"
    finally:
        os.close(root_fd)
    return None


def _remove_workdir_at(
    cell_fd: int, root: Path, run_id: str, cell_id: str, subdir: str
) -> str | None:
    problem = None
    try:
        _remove_entry(cell_fd, subdir)
    except OSError as exc:
        problem = f"could not remove {root / run_dir_name(run_id) / cell_id / subdir}: {exc.strerror or exc}"
    finally:
        os.close(cell_fd)
    try:  # the cell dir, then the run dir, once nothing else is in them
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return problem
    try:
        run_fd = _open_child_dir(root_fd, run_dir_name(run_id), create=False)
        try:
            os.rmdir(cell_id, dir_fd=run_fd)
        finally:
            os.close(run_fd)
        os.rmdir(run_dir_name(run_id), dir_fd=root_fd)
    except OSError:
        pass
    finally:
        os.close(root_fd)
    return problem


def prepare_target(
    payload: SlotPayload, subdir: str, made: list[PreparedTarget] | None = None
) -> PreparedTarget:
    """Never raises for target trouble: the problem is returned in `.error`.

    A stop (KeyboardInterrupt) may come at any point of it. The PreparedTarget is put in
    `made` as soon as it exists and records each step before taking it (the workdir's
    names, the mount point asked for), so the caller's `cleanup_target` undoes what was
    done by then and records any problem. Without `made`, it cleans up itself on a stop.
    """
    own = made is None
    made = [] if made is None else made
    try:
        return _prepare(payload, subdir, made)
    except BaseException:
        if own and made:
            cleanup_target(made[0])
        raise


def _prepare(payload: SlotPayload, subdir: str, made: list[PreparedTarget]) -> PreparedTarget:
    spec = payload.target
    if spec.kind == "directory":
        assert spec.path is not None
        root = Path(spec.path)
        cell_dir = root / run_dir_name(payload.run_id) / payload.cell_id
        prepared = PreparedTarget("directory", root, cell_dir / subdir, cell_dir / "shared")
        made.append(prepared)
        if not root.is_dir():
            prepared.error = f"target directory {root} does not exist"
            return prepared
        _describe_mount(prepared, root)
        try:
            _make_workdir(prepared, root, payload, subdir)
            prepared._own_workdir = True
        except OSError as exc:
            prepared._making = False  # the error is the slot's; the target is left as it is
            prepared.error = f"cannot create {prepared.workdir}: {exc.strerror or exc}"
        return prepared
    assert spec.volume_id is not None and spec.filesystem is not None
    with stops_held():  # made and recorded in one step: a stop inside mkdtemp, after its
        # mkdir, left the directory in TMPDIR (which nothing sweeps); it comes after, now
        scratch = Path(tempfile.mkdtemp(prefix="iofleet-raw-"))
        prepared = PreparedTarget("block", None, scratch, None)
        prepared.volume_id = spec.volume_id
        prepared._own_workdir = True
        made.append(prepared)
    return _claim_block(prepared, payload, subdir)


def _claim_block(prepared: PreparedTarget, payload: SlotPayload, subdir: str) -> PreparedTarget:
    spec = payload.target
    assert spec.volume_id is not None and spec.filesystem is not None
    by_id = Path(spec.by_id_dir) if spec.by_id_dir else devices.BY_ID_DIR
    pause("raw-target")  # its scratch directory made, the device not yet claimed (a test hook)
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
        prepared._mount_at = mount_point  # a stop from here: cleanup_target looks for the mount
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
    shutil.rmtree(prepared.workdir, ignore_errors=True)  # (a stop here: cleanup_target's too)
    root = done.mount_point
    prepared.root = root
    _describe_mount(prepared, root)
    try:
        _make_workdir(prepared, root, payload, subdir)
    except OSError as exc:
        prepared.error = f"cannot create {prepared.workdir}: {exc.strerror or exc}"
    return prepared


def cleanup_target(prepared: PreparedTarget) -> str | None:
    """Remove the slot's data files (and unmount what we mounted). Returns a problem, if any.
    Also for a target whose preparation a stop cut short (`prepare_target`'s `made`)."""
    problem = None
    if prepared._cell_fd is not None:
        assert prepared.root is not None
        cell_fd, prepared._cell_fd = prepared._cell_fd, None
        problem = _remove_workdir_at(cell_fd, prepared.root, *prepared._names)
    elif prepared._making and prepared.root is not None:  # stopped while making it
        prepared._making = False
        problem = remove_workdir(prepared.root, *prepared._names)
    elif prepared._own_workdir and prepared.workdir.exists():  # the temp cwd of a raw device
        shutil.rmtree(prepared.workdir, ignore_errors=True)
        if prepared.workdir.exists():
            problem = f"could not remove {prepared.workdir}"
    if prepared._mounted is None and prepared._mount_at is not None and prepared.device:
        # stopped in or just after the mount: is the filesystem made on the device there?
        if devices.mounted_from(prepared._mount_at, Path(prepared.device)):
            prepared._mounted = prepared._mount_at
    if prepared._mounted is not None:
        mounted, prepared._mounted = prepared._mounted, None
        try:
            devices.unmount(mounted)
        except devices.DeviceError as exc:
            problem = problem or str(exc)
    if prepared._claim is not None:
        prepared._claim.release()
        prepared._claim = None
    return problem
