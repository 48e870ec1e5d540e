"""User-data rendering (bash -n, shellcheck) and the EC2 launch details (pure, no engine)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.aws import ec2
from iofleet.aws.userdata import UserDataParams, parse_agent_command, render_user_data

PARAMS = UserDataParams(
    region="eu-west-1",
    bucket="results-bucket",
    payload_key="control/demo-20261121t051200z/c000-gp3-m6i.large-x1-r1/slot-0000.json",
    agent_bucket="cdk-hnb659fds-assets-123456789012-eu-west-1",
    agent_key="0123abcd.zip",
    time_limit_s=7200,
)


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ud") / "user-data.sh"
    path.write_text(render_user_data(PARAMS))
    return path


def test_user_data_is_valid_bash(script: Path) -> None:
    out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_user_data_passes_shellcheck(script: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is installed by `make bootstrap` (apt-get)"
    out = subprocess.run([shellcheck, "-s", "bash", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def test_user_data_powers_off_on_every_exit_and_bounds_the_agent(script: Path) -> None:
    text = script.read_text()
    assert "trap finish EXIT" in text and "systemctl poweroff" in text
    assert "timeout --kill-after=60 7200 python3 -m iofleet.aws.instance" in text
    for package in ("fio", "ioping", "xfsprogs", "nvme-cli", "python3-boto3"):
        assert f" {package}" in text


def test_agent_command_round_trips_through_the_marker(script: Path) -> None:
    argv = parse_agent_command(script.read_text())
    assert argv[:3] == ["python3", "-m", "iofleet.aws.instance"]
    assert argv[argv.index("--key") + 1] == PARAMS.payload_key


def test_zero_time_limit_is_refused() -> None:
    with pytest.raises(ValueError):
        render_user_data(UserDataParams(**{**PARAMS.__dict__, "time_limit_s": 0}))


@pytest.mark.parametrize(
    ("instance_type", "arch"),
    [
        ("c6a.xlarge", "amd64"),
        ("m5a.xlarge", "amd64"),
        ("m7g.large", "arm64"),
        ("c7gn.2xlarge", "arm64"),
        ("t4g.micro", "arm64"),
        ("a1.large", "arm64"),
        ("g5.xlarge", "amd64"),
        ("g5g.xlarge", "arm64"),
        ("im4gn.large", "arm64"),
    ],
)
def test_architecture_follows_the_graviton_suffix(instance_type: str, arch: str) -> None:
    assert ec2.architecture(instance_type) == arch
    assert f"/current/{arch}/hvm/ebs-gp3/ami-id" in ec2.ami_parameter(instance_type)


def test_io2_volume_is_mapped_with_its_iops_encrypted_and_deleted_with_the_instance() -> None:
    spec = {
        "type": "ebs",
        "label": "io2-50k",
        "volume_type": "io2",
        "size_gib": 100,
        "iops": 50000,
        "filesystem": "xfs",
    }
    root, data = ec2.block_device_mappings(spec)
    assert root["DeviceName"] == "/dev/sda1" and root["Ebs"]["Encrypted"] is True
    assert data == {
        "DeviceName": "/dev/sdf",
        "Ebs": {
            "VolumeType": "io2",
            "VolumeSize": 100,
            "Iops": 50000,
            "Encrypted": True,
            "DeleteOnTermination": True,
        },
    }


def test_shared_file_systems_get_no_extra_volume_and_a_directory_target() -> None:
    spec = {"type": "efs", "label": "efs"}
    assert len(ec2.block_device_mappings(spec)) == 1
    target = ec2.target_for(spec, {"dns_name": "fs-1.efs.eu-west-1.amazonaws.com", "export": "/"})
    assert target["kind"] == "directory" and target["mount"]["dns_name"].startswith("fs-1")
