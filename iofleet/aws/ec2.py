"""EC2 launch details derived from the plan: architecture, AMI parameter, block devices.

Stdlib only. Storage specs are plain mappings (the plan manifest's JSON form of
the matrix storage model), so the launcher Lambda needs no pydantic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Canonical's public SSM parameters, one per release and architecture. 24.04 is
# published for gp3 root volumes only; 22.04's long-standing path is ebs-gp2. The
# root volume's type comes from our block device mapping either way (gp3).
UBUNTU_SSM_PARAMETERS = {
    "22.04": "/aws/service/canonical/ubuntu/server/22.04/stable/current/{arch}/hvm/ebs-gp2/ami-id",
    "24.04": "/aws/service/canonical/ubuntu/server/24.04/stable/current/{arch}/hvm/ebs-gp3/ami-id",
}
UBUNTU_SSM_PARAMETER = UBUNTU_SSM_PARAMETERS["24.04"]
ARCHITECTURES = ("amd64", "arm64")
ROOT_DEVICE = "/dev/sda1"
DATA_DEVICE = "/dev/sdf"
ROOT_VOLUME_GIB = 30
MOUNT_POINT = "/mnt/iofleet"
GP3_BASELINE_IOPS = 3000

_TYPE = re.compile(r"^(?P<family>[a-z]+)(?P<gen>\d+)(?P<suffix>[a-z-]*)\.[a-z0-9-]+$")


def architecture(instance_type: str) -> str:
    """`arm64` for Graviton families (a1, t4g, m7g, c7gn, r8gd, im4gn, ...), else `amd64`.

    The generation suffix carries the processor: a `g` in it means Graviton.
    Unknown shapes default to amd64 (a wrong guess fails fast at RunInstances).
    """
    if instance_type.startswith("a1."):
        return "arm64"
    m = _TYPE.match(instance_type.lower())
    if not m:
        return "amd64"
    return "arm64" if "g" in m.group("suffix") else "amd64"


def ami_parameter(instance_type: str, release: str | None = None) -> str:
    """The public SSM parameter holding the current Ubuntu AMI of `release` (default
    24.04) for this type's architecture; KeyError for a release the stack cannot launch."""
    return UBUNTU_SSM_PARAMETERS[release or "24.04"].format(arch=architecture(instance_type))


def ami_parameter_names() -> list[str]:
    """Every parameter `ami_parameter` can name (the launch role may read exactly these)."""
    return [p.format(arch=a) for p in UBUNTU_SSM_PARAMETERS.values() for a in ARCHITECTURES]


def _get(spec: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if spec.get(name) is not None:
            return spec[name]
    return None


def ebs_volume(spec: Mapping[str, Any]) -> dict[str, Any]:
    """EC2 `Ebs` block for an EBS storage spec (type, size, iops, throughput)."""
    volume_type = str(_get(spec, "volume_type", "ebs_type", "type") or "gp3")
    if volume_type == "ebs":
        volume_type = "gp3"
    ebs: dict[str, Any] = {
        "VolumeType": volume_type,
        "VolumeSize": int(_get(spec, "size_gib", "size") or 100),
        "Encrypted": True,
        "DeleteOnTermination": True,
    }
    iops = _get(spec, "iops")
    if iops is None and volume_type == "gp3":
        iops = GP3_BASELINE_IOPS  # explicit baseline (the same as leaving it out on AWS)
    if iops is not None and volume_type in ("gp3", "io1", "io2"):
        ebs["Iops"] = int(iops)
    throughput = _get(spec, "throughput_mibps", "throughput")
    if throughput is not None and volume_type == "gp3":
        ebs["Throughput"] = int(throughput)
    return ebs


def block_device_mappings(storage: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Root volume plus, for EBS storage, the volume under test at /dev/sdf.

    Everything is encrypted and deleted with the instance, so nothing outlives a slot.
    """
    mappings: list[dict[str, Any]] = [
        {
            "DeviceName": ROOT_DEVICE,
            "Ebs": {
                "VolumeType": "gp3",
                "VolumeSize": ROOT_VOLUME_GIB,
                "Iops": GP3_BASELINE_IOPS,
                "Encrypted": True,
                "DeleteOnTermination": True,
            },
        }
    ]
    if storage_kind(storage) == "ebs":
        mappings.append({"DeviceName": DATA_DEVICE, "Ebs": ebs_volume(storage)})
    return mappings


def storage_kind(storage: Mapping[str, Any]) -> str:
    """ebs | efs | fsx-openzfs | instance-store | local."""
    kind = str(_get(storage, "storage_type", "kind", "type") or "ebs").lower()
    if kind in ("gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"):
        return "ebs"
    return kind


def target_for(
    storage: Mapping[str, Any], mount: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The slot payload's `target` for an instance.

    EBS: a block target whose `volume_id` the instance fills in at boot (the id
    only exists once the mapping is attached). Shared file systems: a directory
    under the NFS mount the instance makes from `mount`.
    """
    kind = storage_kind(storage)
    filesystem = str(_get(storage, "filesystem", "fs") or "xfs")
    if kind == "ebs":
        return {
            "kind": "block",
            "volume_id": None,
            "device_name": DATA_DEVICE,
            "filesystem": filesystem,
            "created_by_run": True,
            "mount_point": MOUNT_POINT,
        }
    if kind == "instance-store":
        return {
            "kind": "block",
            "volume_id": None,
            "instance_store": True,
            "filesystem": filesystem,
            "created_by_run": True,
            "mount_point": MOUNT_POINT,
        }
    # EFS, FSx: NFS; Mountpoint for S3: mount-s3 (iofleet/aws/s3mount.py), by mount["kind"]
    target: dict[str, Any] = {"kind": "directory", "path": MOUNT_POINT}
    if mount:
        target["mount"] = dict(mount)
    return target
