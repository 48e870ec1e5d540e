"""The rendered user-data, executed: the host set-up happens before the agent, and a
wrong image or a failed install signals the task with its reason instead of running.

The script runs for real under bash in a private mount namespace (a tmpfs on /opt for
its agent directory, a stand-in /etc/os-release bound over the real one, and a file bound
over /proc/sys/fs/aio-max-nr, so that raising it changes the file, not this machine: the
test reads what the script wrote there). The open-files limit is set for real in one
test; the others give bash a stand-in `ulimit -n` that logs it (BASH_ENV), because root
here lacks CAP_SYS_RESOURCE and cannot raise a hard limit, as root on EC2 can. apt-get,
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
from iofleet.plan.fiojobs import AWS_AIO_MAX_NR, AWS_OPEN_FILES
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
    # and the open-files limit the agent starts with: what `timeout` (its parent) was given
    "timeout": 'echo "agent $*" >> "$LOG"; echo "$(ulimit -Sn)/$(ulimit -Hn)" > "$NOFILE"\n',
    "sync": "true\n",
}


def _boot(
    tmp_path: Path,
    os_release: str,
    fail_package: str = "-",
    aio_max_nr: int = 65536,
    real_ulimit: bool = False,
) -> tuple[int, list[str]]:
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
    aio = tmp_path / "aio-max-nr"
    aio.write_text(f"{aio_max_nr}\n")
    log = tmp_path / "log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
        "LOG": str(log),
        "FAIL_PACKAGE": fail_package,
        "NOFILE": str(tmp_path / "nofile"),
    }
    if not real_ulimit:
        stand_in = tmp_path / "ulimit.sh"
        stand_in.write_text(
            'ulimit() { if [ "$1" = -n ] && [ $# = 2 ]; then echo "ulimit $*" >> "$LOG"; '
            'else builtin ulimit "$@"; fi; }\n'
        )
        env["BASH_ENV"] = str(stand_in)
    inner = (
        'mount -t tmpfs tmpfs /opt && mount --bind "$1" /etc/os-release && '
        'mount --bind "$3" /proc/sys/fs/aio-max-nr && exec bash "$2"'
    )
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", inner, "-"]
        + [str(fake), str(script), str(aio)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = log.read_text().splitlines() + [f"aio-max-nr {aio.read_text().strip()}"]
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
        f"ulimit -n {AWS_OPEN_FILES}",  # the stand-in's line: soft and hard, for nrfiles
        "agent --kill-after=60 7200 python3 -m iofleet.aws.instance --region eu-west-1 "
        "--bucket results-bucket --key control/r/c000/slot-0000.json",
        f"aio-max-nr {AWS_AIO_MAX_NR}",  # raised from Ubuntu's 65,536 for libaio's io_setup
    ]


def test_the_agent_gets_the_open_files_limit_or_the_task_hears_why(tmp_path: Path) -> None:
    # given this machine's root, which may or may not raise a hard limit (CAP_SYS_RESOURCE)
    can_raise = (
        subprocess.run(["bash", "-c", f"ulimit -n {AWS_OPEN_FILES}"], check=False).returncode == 0
    )
    # when the bootstrap sets the limit with bash's own ulimit
    status, log = _boot(tmp_path, UBUNTU_2204, real_ulimit=True)
    if can_raise:  # then the agent starts with it, soft and hard (root on EC2)
        assert status == 0, log
        assert (tmp_path / "nofile").read_text().split() == [f"{AWS_OPEN_FILES}/{AWS_OPEN_FILES}"]
    else:  # or the task hears why and no agent runs (root here)
        assert status == 1
        assert not any(line.startswith("agent ") for line in log)
        assert not (tmp_path / "nofile").exists()
        assert log[-2] == f"fail: could not set the open-files limit to {AWS_OPEN_FILES} (status 1)"


def test_a_higher_aio_max_nr_is_kept(tmp_path: Path) -> None:
    # given an image whose fs.aio-max-nr is already above what the plan checks against
    status, log = _boot(tmp_path, UBUNTU_2204, aio_max_nr=4 * AWS_AIO_MAX_NR)
    # then the agent ran and the limit was not lowered
    assert status == 0, log
    assert log[-2].startswith("agent ")
    assert log[-1] == f"aio-max-nr {4 * AWS_AIO_MAX_NR}"


def test_an_image_of_another_release_signals_the_reason_and_never_runs_the_agent(
    tmp_path: Path,
) -> None:
    # given an image that runs 24.04 where the plan chose 22.04 (a wrong ubuntu_release)
    status, log = _boot(tmp_path, UBUNTU_2404)
    # then nothing is installed for the presets, no agent runs, the task hears why
    assert status == 1
    assert not any(line.startswith(("agent ", "locale-gen")) for line in log)
    assert sum(line.startswith("apt-get install") for line in log) == 1  # the base only
    assert log[-1] == "aio-max-nr 65536"  # stopped before the kernel limits
    assert log[-2] == (
        f"fail: the image runs ubuntu 24.04; the plan chose ubuntu 22.04 for {WHO} (status 1)"
    )


def test_a_failed_package_install_signals_the_reason_and_never_runs_the_agent(
    tmp_path: Path,
) -> None:
    # given apt-get that cannot install one of yocto's packages
    status, log = _boot(tmp_path, UBUNTU_2204, fail_package="chrpath")
    assert status == 100
    assert not any(line.startswith("agent ") for line in log)
    assert log[-1] == "aio-max-nr 65536"
    assert log[-2] == f"fail: apt-get could not install the host packages of {WHO} (status 100)"
