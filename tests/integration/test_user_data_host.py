"""The rendered user-data, executed: the host set-up happens before the agent, and a
wrong image or a failed install signals the task with its reason instead of running.

The script runs for real under bash in a private mount namespace (a tmpfs on /opt for
its agent directory, a stand-in /etc/os-release bound over the real one). apt-get,
locale-gen, locale, the agent download (python3) and `timeout` are hand-written
stand-ins on PATH that only log their arguments: installing Ubuntu packages or reaching
S3 is not possible on this machine (the docs say what only AWS can check).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iofleet.aws.userdata import PACKAGES, UserDataParams, render_user_data
from iofleet.plan.apps import get_preset
from iofleet.plan.hosts import resolve

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a private mount namespace (unshare --mount) needs root",
)

HOST = resolve([(0, "c-build"), (1, "yocto-core-image-sato-sdk")])[0]
PARAMS = UserDataParams(
    region="eu-west-1",
    bucket="results-bucket",
    payload_key="control/r/c000/slot-0000.json",
    agent_bucket="assets",
    agent_key="agent.zip",
    time_limit_s=7200,
    poweroff=False,
    host=HOST,
)
WHO = "c-build, yocto-core-image-sato-sdk"

STUBS = {
    "apt-get": 'echo "apt-get $*" >> "$LOG"\n'
    'case " $* " in *" $FAIL_PACKAGE "*) exit 100 ;; esac\n',
    "python3": 'if [ "$1" = - ]; then cat > /dev/null; mkdir -p "$5/iofleet"; '
    'echo "download $3 $4" >> "$LOG"; exit 0; fi\n'
    'for a in "$@"; do if [ "$prev" = --fail ]; then echo "fail: $a" >> "$LOG"; fi; prev=$a; done\n'
    'case " $* " in *" --heartbeat "*) echo heartbeat >> "$LOG" ;; esac\n',
    "locale-gen": 'echo "locale-gen $*" >> "$LOG"\n',
    "locale": "printf 'C.utf8\\nen_US.utf8\\nPOSIX\\n'\n",
    "timeout": 'echo "agent $*" >> "$LOG"\n',
    "sync": "true\n",
}


def _boot(tmp_path: Path, os_release: str, fail_package: str = "-") -> tuple[int, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STUBS.items():
        stub = bin_dir / name
        stub.write_text("#!/bin/bash\n" + body)
        stub.chmod(0o755)
    script = tmp_path / "user-data.sh"
    script.write_text(render_user_data(PARAMS))
    fake = tmp_path / "os-release"
    fake.write_text(os_release)
    log = tmp_path / "log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
        "LOG": str(log),
        "FAIL_PACKAGE": fail_package,
    }
    inner = 'mount -t tmpfs tmpfs /opt && mount --bind "$1" /etc/os-release && exec bash "$2"'
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", inner, "-"]
        + [str(fake), str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = log.read_text().splitlines()
    if out.returncode not in (0, 1, 100):  # not the script's own verdict: say what happened
        pytest.fail(f"user-data exited {out.returncode}: {out.stderr}\nlog: {lines}")
    return out.returncode, lines


UBUNTU_2204 = 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n'
UBUNTU_2404 = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\n'


def test_the_presets_host_is_set_up_before_the_agent_runs(tmp_path: Path) -> None:
    # given an instance booted from Ubuntu 22.04, the release the plan chose for yocto
    status, log = _boot(tmp_path, UBUNTU_2204)
    # then the bootstrap installed base, agent, presets' packages, locale, then ran the agent
    assert status == 0, log
    preset_packages = " ".join(
        dict.fromkeys(
            get_preset("c-build").host.packages
            + get_preset("yocto-core-image-sato-sdk").host.packages
        )
    )
    assert log == [
        "apt-get update -q",
        f"apt-get install -y -q --no-install-recommends {' '.join(PACKAGES)}",
        "download assets agent.zip",
        "heartbeat",  # the task hears from the instance before the minutes of installing
        f"apt-get install -y -q {preset_packages}",
        "locale-gen en_US.UTF-8",
        "agent --kill-after=60 7200 python3 -m iofleet.aws.instance --region eu-west-1 "
        "--bucket results-bucket --key control/r/c000/slot-0000.json",
    ]


def test_an_image_of_another_release_signals_the_reason_and_never_runs_the_agent(
    tmp_path: Path,
) -> None:
    # given an image that runs 24.04 where the plan chose 22.04 (a wrong ubuntu_release)
    status, log = _boot(tmp_path, UBUNTU_2404)
    # then nothing is installed for the presets, no agent runs, the task hears why
    assert status == 1
    assert not any(line.startswith(("agent ", "locale-gen")) for line in log)
    assert sum(line.startswith("apt-get install") for line in log) == 1  # the base only
    assert log[-1] == (
        f"fail: the image runs ubuntu 24.04; the plan chose ubuntu 22.04 for {WHO} (status 1)"
    )


def test_a_failed_package_install_signals_the_reason_and_never_runs_the_agent(
    tmp_path: Path,
) -> None:
    # given apt-get that cannot install one of yocto's packages
    status, log = _boot(tmp_path, UBUNTU_2204, fail_package="chrpath")
    assert status == 100
    assert not any(line.startswith("agent ") for line in log)
    assert log[-1] == f"fail: apt-get could not install the host packages of {WHO} (status 100)"
