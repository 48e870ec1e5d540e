"""User-data rendering (bash -n, shellcheck, the cell's host set-up) and the EC2 launch
details (pure, no engine)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.aws import ec2
from iofleet.aws.userdata import (
    AGENT_MARKER,
    PACKAGES,
    UserDataParams,
    parse_agent_command,
    render_user_data,
)
from iofleet.plan.apps import get_preset
from iofleet.plan.hosts import HostPlan, resolve

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


# --------------------------------------------------------------------------- the cell's host

YOCTO_HOST = resolve([(0, "c-build"), (1, "yocto-core-image-sato-sdk")])[0]
YOCTO_PARAMS = UserDataParams(**{**PARAMS.__dict__, "host": YOCTO_HOST})


@pytest.fixture(scope="module")
def yocto_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ud-yocto") / "user-data.sh"
    path.write_text(render_user_data(YOCTO_PARAMS))
    return path


def _installed(text: str) -> list[str]:
    """Every package named on an `apt-get install` line, in order."""
    names: list[str] = []
    for line in text.splitlines():
        if line.startswith("apt-get install "):
            names += [w for w in shlex.split(line)[2:] if not w.startswith("-")]
    return names


def test_yocto_user_data_is_valid_bash_and_passes_shellcheck(yocto_script: Path) -> None:
    out = subprocess.run(["bash", "-n", str(yocto_script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is installed by `make bootstrap` (apt-get)"
    out = subprocess.run(
        [shellcheck, "-s", "bash", str(yocto_script)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout


def test_yocto_user_data_installs_every_preset_package_exactly_once(yocto_script: Path) -> None:
    installed = _installed(yocto_script.read_text())
    wanted = (
        set(get_preset("yocto-core-image-sato-sdk").host.packages)
        | set(get_preset("c-build").host.packages)
        | set(PACKAGES)
    )
    assert sorted(installed) == sorted(wanted)  # each once, nothing else
    assert len(installed) == len(set(installed))


def test_yocto_user_data_sets_up_the_host_before_the_agent_runs(yocto_script: Path) -> None:
    lines = yocto_script.read_text().splitlines()
    agent = next(i for i, line in enumerate(lines) if line.startswith("timeout "))
    marker = next(i for i, line in enumerate(lines) if line.startswith(AGENT_MARKER))
    stage = lines.index("STAGE=agent")
    host_steps = [
        i
        for i, line in enumerate(lines)
        if line.startswith(("apt-get install ", "locale-gen ", "host_os="))
    ]
    assert len(host_steps) == 4  # base packages, os-release, preset packages, locale
    assert max(host_steps) < stage < marker < agent


def test_without_presets_the_user_data_checks_24_04_and_installs_only_the_base(
    script: Path,
) -> None:
    text = script.read_text()
    assert _installed(text) == list(PACKAGES)
    assert "!= 'ubuntu 24.04'" in text and "locale-gen" not in text


def test_an_ami_of_unstated_release_gets_no_release_check() -> None:
    text = render_user_data(UserDataParams(**{**PARAMS.__dict__, "host": HostPlan(release=None)}))
    assert "os-release" not in text


@pytest.mark.parametrize(
    ("instance_type", "release", "name"),
    [
        ("m6i.4xlarge", "22.04", "22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"),
        ("m7g.large", "22.04", "22.04/stable/current/arm64/hvm/ebs-gp2/ami-id"),
        ("m6i.4xlarge", "24.04", "24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"),
        ("c7gn.2xlarge", "24.04", "24.04/stable/current/arm64/hvm/ebs-gp3/ami-id"),
        ("m6i.4xlarge", None, "24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"),
    ],
)
def test_ami_parameter_per_release_and_architecture(
    instance_type: str, release: str | None, name: str
) -> None:
    parameter = ec2.ami_parameter(instance_type, release)
    assert parameter == "/aws/service/canonical/ubuntu/server/" + name
    assert parameter in ec2.ami_parameter_names()


def test_a_release_the_stack_cannot_launch_has_no_parameter() -> None:
    with pytest.raises(KeyError):
        ec2.ami_parameter("m6i.large", "20.04")


def test_no_pipeline_ends_in_an_early_exiting_reader_under_pipefail(yocto_script: Path) -> None:
    # `cmd | grep -q x` under `set -o pipefail`: grep exits at its first match, cmd can then
    # die of SIGPIPE (141) and fail the bootstrap at random; seen on the locale check
    text = yocto_script.read_text()
    assert "pipefail" in text
    piped = [
        line for line in text.splitlines() if "|" in line and not line.lstrip().startswith("#")
    ]
    assert not [line for line in piped if re.search(r"\|\s*(grep\s+-\w*q|head\b)", line)]
    assert "locale -a | grep -ix" in text
