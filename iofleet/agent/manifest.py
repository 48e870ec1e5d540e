"""What the slot ran on: kernel, tool versions, CPUs, memory, target mount, EC2 identity.

Stdlib only. EC2 identity comes from IMDSv2 (token PUT, then GETs) with a
short timeout, and only when the payload says the slot runs on AWS.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

IMDS = "http://169.254.169.254"


@dataclass(frozen=True)
class MountInfo:
    mount_point: str
    fstype: str
    source: str
    options: str  # per-mount options, then the superblock's


def mount_for_path(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> MountInfo | None:
    """The mount holding `path` (longest mount-point prefix of its real path)."""
    real = os.path.realpath(path)
    best: MountInfo | None = None
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 2:
            continue
        point = _unescape(fields[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mount_point)):
            super_opts = tail[2] if len(tail) > 2 else ""
            merged = fields[5].split(",") + (super_opts.split(",") if super_opts else [])
            options = ",".join(dict.fromkeys(o for o in merged if o))
            best = MountInfo(point, tail[0], _unescape(tail[1]), options)
    return best


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def tool_version(argv: list[str]) -> str | None:
    """First line of `tool --version` style output, or None when the tool is missing."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    return line[0].strip() if line and proc.returncode == 0 else None


def memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def os_release(path: Path = Path("/etc/os-release")) -> str | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        return None
    return None


def cpu_count() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def system_info() -> dict[str, object]:
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": os_release(),
        "python": platform.python_version(),
        "fio_version": tool_version(["fio", "--version"]),
        "ioping_version": tool_version(["ioping", "-v"]),
        "cpus": cpu_count(),
        "memory_bytes": memory_bytes(),
    }


def ec2_identity(timeout_s: float = 2.0, base_url: str = IMDS) -> dict[str, str | None]:
    """instance_type, instance_id, az_id from IMDSv2; None values when unreachable."""
    identity: dict[str, str | None] = {"instance_type": None, "instance_id": None, "az_id": None}
    try:
        request = urllib.request.Request(
            f"{base_url}/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"},
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            token = response.read().decode()
    except (OSError, urllib.error.URLError):
        return identity
    paths = {
        "instance_type": "instance-type",
        "instance_id": "instance-id",
        "az_id": "placement/availability-zone-id",
    }
    for key, path in paths.items():
        request = urllib.request.Request(
            f"{base_url}/latest/meta-data/{path}",
            headers={"X-aws-ec2-metadata-token": token},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                identity[key] = response.read().decode().strip()
        except (OSError, urllib.error.URLError):
            identity[key] = None
    return identity
