"""What the slot ran on: kernel, distro and release, tool versions, CPUs, memory, target
mount, EC2 identity, and whether the wall clock is synchronised (the start barrier's
instants are wall-clock).

Stdlib only. EC2 identity comes from IMDSv2 (token PUT, then GETs) with a
short timeout, and only when the payload says the slot runs on AWS. The clock
status comes from the kernel: adjtimex(2) in read-only mode via ctypes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import re
import subprocess
import time
from collections.abc import Iterator
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


TOOL_VERSIONS = {"fio_version": ["fio", "--version"], "ioping_version": ["ioping", "-v"]}
TOOL_TIMEOUT_S = 10.0


def tool_version(argv: list[str]) -> str | None:
    """First line of `tool --version` style output, or None when the tool is missing."""
    return _ToolProbe(argv).answer()


class _ToolProbe:
    """One `tool --version` run, started at once; `answer()` waits for it (once)."""

    def __init__(self, argv: list[str]) -> None:
        self.deadline = time.monotonic() + TOOL_TIMEOUT_S
        self.proc: subprocess.Popen[str] | None
        try:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        except OSError:
            self.proc = None

    def answer(self) -> str | None:
        proc = self.proc
        if proc is None:
            return None
        try:
            out, err = proc.communicate(timeout=max(self.deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            self.stop()
            return None
        except BaseException:
            self.stop()
            raise
        line = (out.strip() or err.strip()).splitlines()
        return line[0].strip() if line and proc.returncode == 0 else None

    def stop(self) -> None:
        """Kill and reap the probe if it still runs."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            self.proc.communicate()


_started: dict[str, _ToolProbe] = {}  # tool_versions_started: probes not yet answered


@contextlib.contextmanager
def tool_versions_started() -> Iterator[None]:
    """Start the tool version probes (`fio --version`, `ioping -v`) now, side by side and
    beside what the caller does next (the agent's imports, its target), instead of one
    after the other when the manifest is written: fio alone takes 30-40 ms to load its
    shared libraries. `system_info` inside the block takes their answers; a probe not
    taken by the end of the block is killed and reaped."""
    _started.update((key, _ToolProbe(argv)) for key, argv in TOOL_VERSIONS.items())
    try:
        yield
    finally:
        for probe in _started.values():
            probe.stop()
        _started.clear()


def tool_versions() -> dict[str, str | None]:
    """`fio_version` and `ioping_version`: the probes started by `tool_versions_started`,
    else run now, both at once."""
    probes = {
        key: _started.pop(key) if key in _started else _ToolProbe(argv)
        for key, argv in TOOL_VERSIONS.items()
    }
    try:
        return {key: probe.answer() for key, probe in probes.items()}
    finally:
        for probe in probes.values():
            probe.stop()


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


def host_distro() -> dict[str, str | None]:
    """`distro` (os-release ID, e.g. ubuntu) and `distro_release` (VERSION_ID, e.g. 22.04);
    None where the file or the field is missing (a rolling release has no VERSION_ID)."""
    try:
        fields = platform.freedesktop_os_release()  # /etc/os-release, else /usr/lib/os-release
    except OSError:
        fields = {}
    return {
        "distro": fields.get("ID") or None,
        "distro_release": fields.get("VERSION_ID") or None,
    }


def cpu_count() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def iofleet_version() -> str:
    """The version of the iofleet that ran the slot (the package's __version__)."""
    from iofleet import __version__

    return __version__


def system_info() -> dict[str, object]:
    return {
        "iofleet_version": iofleet_version(),
        "hostname": os.uname().nodename,  # socket.gethostname(), without importing socket
        "kernel": platform.release(),
        "os": os_release(),
        **host_distro(),
        "python": platform.python_version(),
        **tool_versions(),
        "cpus": cpu_count(),
        "memory_bytes": memory_bytes(),
    }


def ec2_identity(timeout_s: float = 2.0, base_url: str = IMDS) -> dict[str, str | None]:
    """instance_type, instance_id, az_id from IMDSv2; None values when unreachable."""
    import urllib.error  # here: http.client, email and ssl are a third of the agent's
    import urllib.request  # import time, and only a slot on EC2 comes here

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


# --- clock synchronisation: adjtimex(2) -------------------------------------------

STA_UNSYNC = 0x0040  # the kernel's "clock not synchronised" status bit
STA_CLOCKERR = 0x1000  # clock hardware fault
TIME_STATES = ("TIME_OK", "TIME_INS", "TIME_DEL", "TIME_OOP", "TIME_WAIT", "TIME_ERROR")


class _Timex(ctypes.Structure):
    """struct timex of <linux/timex.h> (the `long` fields are the kernel's __kernel_long_t)."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),  # us, worst-case bound on the clock's error
        ("esterror", ctypes.c_long),  # us, estimated error
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time_sec", ctypes.c_long),
        ("time_usec", ctypes.c_long),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_reserved", ctypes.c_int * 11),
    ]


def read_timex() -> dict[str, int]:
    """adjtimex(2) with modes 0 (reads, changes nothing; no privilege needed): every
    field of struct timex plus `state`, the call's return value (TIME_OK ...).
    Raises OSError when the call fails (a seccomp filter, not Linux)."""
    # the libc this process already has loaded (find_library("c") runs `ldconfig -p`)
    libc = ctypes.CDLL(None, use_errno=True)
    timex = _Timex()
    state = libc.adjtimex(ctypes.byref(timex))
    if state == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    fields = {f[0]: getattr(timex, f[0]) for f in _Timex._fields_ if not f[0].startswith("_")}
    return {**fields, "state": int(state)}


def clock_status() -> dict[str, object]:
    """The kernel's verdict on the wall clock, for the manifest and slot.json.

    `synced`: STA_UNSYNC (and STA_CLOCKERR) clear: a time daemon (chrony, on EC2
    fed by the Amazon Time Sync Service) is disciplining the clock.
    `max_error_us`: the kernel's maxerror, a worst-case bound on the offset from
    true time (the daemon sets it at each update; the kernel adds 500 us per
    second between updates and marks the clock unsynchronised at 16 s).
    `est_error_us`: the daemon's estimated error. Values are null with `error`
    set when the kernel cannot be asked.
    """
    status: dict[str, object] = {
        "source": "adjtimex",
        "synced": None,
        "max_error_us": None,
        "est_error_us": None,
        "state": None,
        "status_flags": None,
        "error": None,
    }
    try:
        timex = read_timex()
    except (OSError, AttributeError) as exc:  # AttributeError: a libc without adjtimex
        status["error"] = f"adjtimex: {getattr(exc, 'strerror', None) or exc}"
        return status
    state = timex["state"]
    status.update(
        synced=not timex["status"] & (STA_UNSYNC | STA_CLOCKERR),
        max_error_us=timex["maxerror"],
        est_error_us=timex["esterror"],
        state=TIME_STATES[state] if 0 <= state < len(TIME_STATES) else str(state),
        status_flags=timex["status"],
    )
    return status
