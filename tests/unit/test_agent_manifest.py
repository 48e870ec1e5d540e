"""Manifest helpers: the mount holding a path, EC2 identity over IMDSv2, the clock status."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from iofleet.agent import manifest
from iofleet.agent.manifest import (
    STA_UNSYNC,
    TOOL_VERSIONS,
    clock_status,
    ec2_identity,
    memory_bytes,
    mount_for_path,
    read_timex,
    system_info,
    tool_version,
    tool_versions_started,
)

MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
40 22 0:35 / /mnt/efs rw,noatime shared:2 - nfs4 fs-1234.efs.eu-west-1.amazonaws.com:/ rw,vers=4.1
41 22 259:1 / /mnt/my\\040data rw,noatime - xfs /dev/nvme1n1 rw,attr2,inode64
"""


@pytest.fixture
def mountinfo(tmp_path: Path) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text(MOUNTINFO)
    return path


def test_deepest_mount_wins(mountinfo: Path) -> None:
    mount = mount_for_path(Path("/mnt/efs/iofleet/slot-0000"), mountinfo)

    assert mount is not None
    assert (mount.mount_point, mount.fstype) == ("/mnt/efs", "nfs4")
    assert mount.source == "fs-1234.efs.eu-west-1.amazonaws.com:/"


def test_mount_options_merge_per_mount_and_superblock_options(mountinfo: Path) -> None:
    mount = mount_for_path(Path("/mnt/efs"), mountinfo)

    assert mount is not None
    assert mount.options == "rw,noatime,vers=4.1"


def test_sibling_with_common_prefix_is_not_inside(mountinfo: Path) -> None:
    mount = mount_for_path(Path("/mnt/efs2"), mountinfo)

    assert mount is not None
    assert mount.mount_point == "/"


def test_escaped_spaces_in_mount_points(mountinfo: Path) -> None:
    mount = mount_for_path(Path("/mnt/my data/x"), mountinfo)

    assert mount is not None
    assert mount.source == "/dev/nvme1n1"


def test_memory_is_read_in_bytes(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        2048 kB\nMemFree: 1 kB\n")

    assert memory_bytes(meminfo) == 2048 * 1024


class _FakeImds(BaseHTTPRequestHandler):
    TOKEN = "tok-123"
    VALUES = {
        "/latest/meta-data/instance-type": "m6i.large",
        "/latest/meta-data/instance-id": "i-0abc",
        "/latest/meta-data/placement/availability-zone-id": "euw1-az2",
    }

    def do_PUT(self) -> None:  # noqa: N802 - http.server naming
        ok = self.path == "/latest/api/token" and self.headers.get(
            "X-aws-ec2-metadata-token-ttl-seconds"
        )
        self._reply(200 if ok else 400, self.TOKEN if ok else "")

    def do_GET(self) -> None:  # noqa: N802
        if self.headers.get("X-aws-ec2-metadata-token") != self.TOKEN:
            self._reply(401, "")
        elif self.path in self.VALUES:
            self._reply(200, self.VALUES[self.path])
        else:
            self._reply(404, "")

    def _reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def imds() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _FakeImds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_ec2_identity_uses_an_imdsv2_token(imds: str) -> None:
    assert ec2_identity(base_url=imds) == {
        "instance_type": "m6i.large",
        "instance_id": "i-0abc",
        "az_id": "euw1-az2",
    }


def test_unreachable_imds_gives_nulls() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    identity = ec2_identity(timeout_s=0.5, base_url=f"http://127.0.0.1:{port}")

    assert identity == {"instance_type": None, "instance_id": None, "az_id": None}


# --- clock status (adjtimex) ---------------------------------------------------


def test_timex_fields_sit_where_the_kernel_writes_them() -> None:
    # the struct's later fields have values known without adjtimex: if they read
    # right, the fields before them (maxerror, esterror, status) are at their offsets
    before = time.time()
    timex = read_timex()
    after = time.time()
    assert int(before) - 1 <= timex["time_sec"] <= after + 1  # the kernel's current time
    assert 0 <= timex["time_usec"] < 1_000_000 or timex["status"] & 0x2000  # STA_NANO: ns
    assert timex["tolerance"] == 500 << 16  # MAXFREQ_SCALED: 500 ppm, scaled by 2^16
    assert timex["tick"] == 1_000_000 // os.sysconf("SC_CLK_TCK")  # us per USER_HZ tick
    assert 0 <= timex["esterror"] and 0 <= timex["maxerror"] <= 16_000_000  # NTP_PHASE_LIMIT


def test_clock_status_reports_the_kernels_sync_verdict_and_error_bounds() -> None:
    timex = read_timex()
    status = clock_status()
    assert status["error"] is None
    # the kernel answers TIME_ERROR when the clock is unsynchronised (or faulty)
    assert status["synced"] is (status["state"] != "TIME_ERROR")
    if timex["status"] & STA_UNSYNC:
        assert status["synced"] is False
    assert isinstance(status["max_error_us"], int) and isinstance(status["est_error_us"], int)
    assert status["max_error_us"] <= 16_000_000


def test_clock_status_says_why_when_the_kernel_cannot_be_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a seccomp filter refusing adjtimex (EPERM), as some container runtimes do
    def refused() -> dict[str, int]:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr("iofleet.agent.manifest.read_timex", refused)
    # when
    status = clock_status()
    # then nothing is guessed
    assert status["synced"] is None and status["max_error_us"] is None
    assert status["error"] == "adjtimex: Operation not permitted"


def test_system_info_records_the_hosts_distro_and_release_from_os_release() -> None:
    # the shell's reading of os-release(5) (the format is shell-compatible) is the reference
    shell = subprocess.run(
        [
            "bash",
            "-c",
            '. /etc/os-release 2>/dev/null || . /usr/lib/os-release; echo "$ID|$VERSION_ID"',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    distro, release = shell.split("|")
    info = system_info()
    assert (info["distro"], info["distro_release"]) == (distro or None, release or None)
    assert info["distro"]  # every Linux with os-release has an ID


def test_system_info_records_the_host_name_the_system_gives() -> None:
    # hostname(1) asks the kernel (uname's nodename), as socket.gethostname() does
    shell = subprocess.run(["hostname"], capture_output=True, text=True, check=True)
    assert system_info()["hostname"] == shell.stdout.strip() == socket.gethostname()


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not a child of ours any more, zombie or not
        return True
    return False


def test_started_version_probes_answer_the_manifest_as_probes_run_alone() -> None:
    # given the version probes started ahead (as `iofleet agent` does before its imports)
    alone = {key: tool_version(argv) for key, argv in TOOL_VERSIONS.items()}
    with tool_versions_started():
        pids = [p.proc.pid for p in manifest._started.values() if p.proc is not None]
        # when the manifest's system info is taken
        info = system_info()
        # then it has their answers, the same as each tool run on its own
        assert {key: info[key] for key in TOOL_VERSIONS} == alone
        assert all(_reaped(pid) for pid in pids)


def test_version_probes_not_taken_leave_no_process_behind() -> None:
    # given the probes started and never asked (the payload was bad: no manifest)
    with tool_versions_started():
        pids = [p.proc.pid for p in manifest._started.values() if p.proc is not None]
    # then on leaving, every probe process has been waited for: none is left running or
    # as a zombie
    assert all(_reaped(pid) for pid in pids)
    assert not manifest._started
