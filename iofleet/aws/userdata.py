"""User-data for a benchmark instance: bootstrap, run one slot, power off.

Stdlib only. The script is plain bash run once by cloud-init as root:

1. `poweroff` on exit, whatever happened (instance-initiated shutdown =
   terminate, so the instance and its delete-on-termination volumes go away);
2. install fio, ioping, xfsprogs, nvme-cli, nfs-common and python3-boto3 from
   the distro;
3. fetch the agent bundle (a CDK asset zip of `iofleet/` + `fio-jobs/`) with
   python3 + boto3 and unpack it;
4. the cell's host (iofleet/plan/hosts.py): one task heartbeat (the heartbeat clock runs
   from launch), check /etc/os-release against the release the plan chose,
   install the app presets' packages (the union, each once) and
   generate their locales. All of this is bootstrap, before the agent and so
   before the start barrier: none of it counts toward measured time. A failure
   here signals the task with its reason;
5. raise fs.aio-max-nr and the open-files limit to what the plan checked fio's
   jobs against (`kernel_limit_steps`);
6. run `python3 -m iofleet.aws.instance` under `timeout` (the hard limit); it
   reads the instance payload from S3, runs the agent and signals the task token.

The agent command line is also written on a marker line so a local instance
runner (the local-cloud suite) can find and execute exactly what EC2 would.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from iofleet.plan.fiojobs import AWS_AIO_MAX_NR, AWS_OPEN_FILES
from iofleet.plan.hosts import BASE_PACKAGES, HostPlan

AGENT_MARKER = "# iofleet-agent-command: "
AGENT_DIR = "/opt/iofleet"
PACKAGES = BASE_PACKAGES


@dataclass(frozen=True)
class UserDataParams:
    region: str
    bucket: str  # results bucket (payload under control/, raw results under raw/)
    # the payload's folder, control/{run}/{cell}/slot-0003/: the instance reads
    # `<folder><its aws:userid>.json`, written by the launcher once the instance exists
    payload_key: str
    agent_bucket: str  # CDK asset bucket
    agent_key: str  # CDK asset object key (zip)
    time_limit_s: int  # hard limit for the agent, after bootstrap
    poweroff: bool = True  # False only for local test runners
    host: HostPlan = field(default_factory=HostPlan)  # the cell's release and extra packages
    lustre_client: bool = False  # the cell mounts FSx for Lustre (iofleet/aws/fsx.py)
    mount_s3: bool = False  # install Mountpoint for Amazon S3 (iofleet/aws/s3mount.py)


def agent_command(p: UserDataParams, agent_dir: str = AGENT_DIR) -> list[str]:
    """argv that runs the instance wrapper (cwd-independent)."""
    return [
        "python3",
        "-m",
        "iofleet.aws.instance",
        "--region",
        p.region,
        "--bucket",
        p.bucket,
        "--key",
        p.payload_key,
    ]


def parse_agent_command(user_data: str) -> list[str]:
    """The agent argv from a rendered script (for local instance runners)."""
    for line in user_data.splitlines():
        if line.startswith(AGENT_MARKER):
            return shlex.split(line[len(AGENT_MARKER) :])
    raise ValueError("no iofleet agent command in user-data")


def _host_steps(host: HostPlan, heartbeat_cmd: str) -> str:
    """Bash for the cell's host: release check, the presets' packages, their locales."""
    q = shlex.quote
    who = ", ".join(host.presets) or "this cell"
    lines = []
    if host.packages or host.locales:
        # installing takes minutes, and the task's heartbeat clock has run since launch
        lines.append(f'(cd "$AGENT_DIR" && PYTHONPATH="$AGENT_DIR" {heartbeat_cmd}) || true')
    if host.release is not None:
        want = f"{host.distro} {host.release}"
        lines += [
            f"# the plan chose {want} for {who} (iofleet/plan/hosts.py)",
            "# shellcheck source=/dev/null",
            'host_os=$(. /etc/os-release && echo "${ID:-unknown} ${VERSION_ID:-unknown}")',
            f'if [ "$host_os" != {q(want)} ]; then',
            f'  FAIL_REASON="the image runs $host_os; the plan chose {want} for {who}"',
            "  exit 1",
            "fi",
        ]
    extra = [p for p in host.packages if p not in BASE_PACKAGES]
    if extra:
        lines += [
            f"# host packages of {who}, with their recommends as their documentation installs them",
            f'FAIL_REASON="apt-get could not install the host packages of {who}"',
            f"apt-get install -y -q {' '.join(q(p) for p in extra)}",
        ]
    for locale in host.locales:
        lines += [
            f'FAIL_REASON="could not generate the {locale} locale for {who}"',
            f"locale-gen {q(locale)}",
            # not `grep -q`: it exits at the first match, and under pipefail the SIGPIPE
            # that `locale -a` then gets would fail the bootstrap with status 141
            f"locale -a | grep -ix {q(locale.replace('UTF-8', 'utf8'))} >/dev/null",
        ]
    if lines:
        lines.append("unset FAIL_REASON")
    return "".join(line + "\n" for line in lines)


# FSx for Lustre's client for Ubuntu (the FSx for Lustre User Guide, "Installing the
# Lustre client"): AWS's apt repository, modules built for the running kernel.
LUSTRE_KEY_URL = (
    "https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc"
)
LUSTRE_REPO_URL = "https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu"
LUSTRE_KEYRING = "/usr/share/keyrings/fsx-ubuntu-public-key.gpg"


def lustre_client_steps() -> str:
    """Bash that installs the Lustre client (untimed bootstrap, before the start barrier)."""
    return f"""FAIL_REASON="could not install the FSx for Lustre client for kernel $(uname -r)"
python3 - {LUSTRE_KEY_URL} > /tmp/fsx-ubuntu-public-key.asc <<'PY'
import sys, urllib.request
sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=60).read())
PY
gpg --batch --yes --dearmor -o {LUSTRE_KEYRING} /tmp/fsx-ubuntu-public-key.asc
# shellcheck source=/dev/null
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
echo "deb [signed-by={LUSTRE_KEYRING}] {LUSTRE_REPO_URL} $codename main" > /etc/apt/sources.list.d/fsxlustreclientrepo.list
apt-get update -q
apt-get install -y -q "lustre-client-modules-$(uname -r)"
modprobe lustre
unset FAIL_REASON
"""


def kernel_limit_steps() -> str:
    """Bash that gives the agent the libaio events and open files the AWS plan checks fio's
    jobs against (iofleet.plan.fiojobs.AWS_AIO_MAX_NR, AWS_OPEN_FILES): fs.aio-max-nr
    raised (never lowered), and the open-files limit, soft and hard, for the agent and
    every process it starts."""
    return (
        "# libaio events and open files for the fio jobs (the plan checked them against these)\n"
        f'FAIL_REASON="could not raise fs.aio-max-nr to {AWS_AIO_MAX_NR}"\n'
        f'if [ "$(cat /proc/sys/fs/aio-max-nr)" -lt {AWS_AIO_MAX_NR} ]; then\n'
        f"  echo {AWS_AIO_MAX_NR} > /proc/sys/fs/aio-max-nr\n"
        "fi\n"
        f'FAIL_REASON="could not set the open-files limit to {AWS_OPEN_FILES}"\n'
        f"ulimit -n {AWS_OPEN_FILES}\n"
        "unset FAIL_REASON\n"
    )


def _mount_s3_steps() -> str:
    """Install Mountpoint for Amazon S3 from its official .deb (not in Ubuntu's archive),
    before the agent and so before the start barrier."""
    from iofleet.aws.s3mount import DEB_URL

    url = DEB_URL.format(arch="$mount_s3_arch")
    return (
        "# Mountpoint for Amazon S3 for this cell's bucket (iofleet/aws/s3mount.py)\n"
        'FAIL_REASON="could not install mount-s3"\n'
        'case "$(dpkg --print-architecture)" in\n'
        "  amd64) mount_s3_arch=x86_64 ;;\n"
        "  arm64) mount_s3_arch=arm64 ;;\n"
        '  *) FAIL_REASON="no mount-s3 package for $(dpkg --print-architecture)"; exit 1 ;;\n'
        "esac\n"
        'mkdir -p "$AGENT_DIR/pkg"\n'
        f'curl -fsSL --retry 5 -o "$AGENT_DIR/pkg/mount-s3.deb" "{url}"\n'
        'apt-get install -y -q "$AGENT_DIR/pkg/mount-s3.deb"\n'
        "mount-s3 --version\n"
        "unset FAIL_REASON\n"
    )


def render_user_data(p: UserDataParams) -> str:
    if p.time_limit_s <= 0:
        raise ValueError("time_limit_s must be positive")
    q = shlex.quote
    cmd = " ".join(q(a) for a in agent_command(p))
    fail_cmd = cmd + " --fail"
    end = "systemctl poweroff || shutdown -h now" if p.poweroff else "true"
    return f"""#!/bin/bash
# iofleet instance bootstrap (rendered by iofleet.aws.userdata; do not edit by hand)
set -euo pipefail
AGENT_DIR={q(AGENT_DIR)}
STAGE=bootstrap
finish() {{
  status=$?
  if [ "$STAGE" = bootstrap ] && [ -d "$AGENT_DIR/iofleet" ]; then
    (cd "$AGENT_DIR" && PYTHONPATH="$AGENT_DIR" {fail_cmd} "${{FAIL_REASON:-bootstrap failed}} (status $status)") || true
  fi
  sync
  {end}
}}
trap finish EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends {" ".join(PACKAGES)}
mkdir -p "$AGENT_DIR"
python3 - {q(p.region)} {q(p.agent_bucket)} {q(p.agent_key)} "$AGENT_DIR" <<'PY'
import sys, zipfile, boto3
region, bucket, key, dest = sys.argv[1:5]
boto3.client("s3", region_name=region).download_file(bucket, key, dest + "/agent.zip")
zipfile.ZipFile(dest + "/agent.zip").extractall(dest)
PY
{lustre_client_steps() if p.lustre_client else ""}{_host_steps(p.host, cmd + " --heartbeat")}{_mount_s3_steps() if p.mount_s3 else ""}{kernel_limit_steps()}export PYTHONPATH="$AGENT_DIR" IOFLEET_FIO_JOBS="$AGENT_DIR/fio-jobs"
cd "$AGENT_DIR"
STAGE=agent
{AGENT_MARKER}{cmd}
timeout --kill-after=60 {int(p.time_limit_s)} {cmd}
"""
