"""The instance side of FSx: the mount command and the Lustre client in the user-data."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from iofleet.aws.instance import mount_argv
from iofleet.aws.userdata import UserDataParams, render_user_data

PARAMS = dict(
    region="us-east-1",
    bucket="b",
    payload_key="control/r/c/slot-0000.json",
    agent_bucket="a",
    agent_key="agent.zip",
    time_limit_s=600,
)


def test_openzfs_mounts_its_root_volume_over_nfs_4_1() -> None:
    argv = mount_argv(
        {"dns_name": "fs-1.fsx.us-east-1.amazonaws.com", "export": "/fsx", "fstype": "nfs4"},
        "/mnt/t",
    )
    assert argv[:3] == ["mount", "-t", "nfs4"]
    assert "nfsvers=4.1" in argv[4].split(",")
    assert argv[-2:] == ["fs-1.fsx.us-east-1.amazonaws.com:/fsx", "/mnt/t"]


def test_lustre_mounts_dns_at_tcp_and_its_mount_name() -> None:
    argv = mount_argv(
        {
            "dns_name": "fs-1.fsx.us-east-1.amazonaws.com",
            "mount_name": "abcd1234",
            "fstype": "lustre",
        },
        "/mnt/t",
    )
    assert argv == [
        "mount",
        "-t",
        "lustre",
        "-o",
        "relatime,flock",
        "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd1234",
        "/mnt/t",
    ]


def test_lustre_client_is_installed_before_the_agent_only_for_lustre_cells(tmp_path: Path) -> None:
    plain = render_user_data(UserDataParams(**PARAMS))  # type: ignore[arg-type]
    lustre = render_user_data(UserDataParams(**PARAMS, lustre_client=True))  # type: ignore[arg-type]
    assert "lustre-client-modules" not in plain
    install = lustre.index('apt-get install -y -q "lustre-client-modules-$(uname -r)"')
    assert install < lustre.index("STAGE=agent")  # untimed bootstrap, before the barrier
    assert "fsx-lustre-client-repo.s3.amazonaws.com/ubuntu $codename main" in lustre
    script = tmp_path / "user-data.sh"
    script.write_text(lustre)
    subprocess.run(["bash", "-n", str(script)], check=True)
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is installed by `make bootstrap` (apt-get)"
    out = subprocess.run([shellcheck, "-s", "bash", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
