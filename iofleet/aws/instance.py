"""Runs on a benchmark instance: payload from S3 -> agent -> raw to S3 -> task token.

Stdlib only, boto3 imported lazily (distro package python3-boto3). Invoked by
the user-data as `python3 -m iofleet.aws.instance --region R --bucket B --key K`.

K is the payload's folder (`control/<run>/<cell>/slot-0003/`): the payload is
`K<aws:userid>.json`, the instance's own role-session id (`<role id>:<instance id>`, from
STS GetCallerIdentity), the only payload its role may read; the launcher writes it once
RunInstances has named the instance, so it is waited for (`PAYLOAD_WAIT_S`). Raw results
go under `raw/<aws:userid>/`, the only prefix the role may write (docs/decisions.md).
A K that does not end in `/` is read as the payload's key itself.

The instance payload (written by the launcher Lambda under `control/`):

    {"mode": "slot" | "populate", "task_token": "...", "table": "...",
     "heartbeat_s": 300,
     "slot": {...the agent's slot payload, barrier kind "dynamodb"...},
     "populate_workloads": [3]}            # populate mode only
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from iofleet.agent.slot import EXIT_INTERRUPTED, sigterm_interrupts
from iofleet.aws import barrier, keys
from iofleet.aws.store import S3ResultsStore

IMDS = "http://169.254.169.254/latest"
PAYLOAD_WAIT_S = 600.0  # the launcher writes it right after RunInstances returns
PAYLOAD_POLL_S = 2.0


REGION_ENV = "IOFLEET_REGION"  # tells the agent child where its DynamoDB barrier is


def _imds(path: str) -> str:
    req = urllib.request.Request(
        f"{IMDS}/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    )
    token = urllib.request.urlopen(req, timeout=5).read().decode()
    req = urllib.request.Request(f"{IMDS}/{path}", headers={"X-aws-ec2-metadata-token": token})
    return urllib.request.urlopen(req, timeout=5).read().decode()


def whoami(sts: Any) -> str | None:
    """This instance's `aws:userid` (`<role id>:<instance id>`), None when the credentials
    are not an instance role's session. GetCallerIdentity needs no permission."""
    user_id = str(sts.get_caller_identity().get("UserId") or "")
    return user_id if keys.owner_instance(user_id) else None


def read_payload(
    s3: Any,
    bucket: str,
    key: str,
    *,
    wait_s: float = PAYLOAD_WAIT_S,
    poll_s: float = PAYLOAD_POLL_S,
    clock: Any = time.monotonic,
    sleep: Any = time.sleep,
) -> dict[str, Any]:
    """The payload document, polled for until it exists (NoSuchKey, or AccessDenied: the
    role has no ListBucket, so S3 answers a missing key with 403) for at most `wait_s`."""
    deadline = clock() + wait_s
    while True:
        try:
            doc: dict[str, Any] = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            return doc
        except Exception as exc:
            code = str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
            if code not in ("NoSuchKey", "AccessDenied", "404", "403") or clock() >= deadline:
                raise
        sleep(poll_s)


class Signals:
    """SendTaskSuccess / Failure / Heartbeat for one task token, at most one final signal."""

    def __init__(self, sfn: Any, token: str | None) -> None:
        self.sfn = sfn
        self.token = token
        self.done = False
        self._stop = threading.Event()

    def heartbeat_every(self, seconds: float) -> None:
        """Beat now, then every `seconds` until the final signal. The first beat is at once:
        the task's heartbeat clock started at launch, so boot time already counts against it."""

        def beat() -> None:
            while True:
                try:
                    self.sfn.send_task_heartbeat(taskToken=self.token)
                except Exception:  # noqa: BLE001 - a missed beat is retried next period
                    pass
                if self._stop.wait(seconds):
                    return

        if self.token:
            threading.Thread(target=beat, daemon=True).start()

    def success(self, output: dict[str, Any]) -> bool:
        return self._final("send_task_success", output=json.dumps(output))

    def failure(self, error: str, cause: str) -> bool:
        return self._final("send_task_failure", error=error, cause=cause[:32000])

    def _final(self, call: str, **kw: str) -> bool:
        """The one final signal; False if Step Functions refused it (the execution was
        stopped, the task timed out): said on stderr, the results are uploaded anyway."""
        self._stop.set()
        sent = True
        if self.token and not self.done:
            try:
                getattr(self.sfn, call)(taskToken=self.token, **kw)
            except Exception as exc:  # noqa: BLE001 - TaskTimedOut, InvalidToken, network
                print(f"iofleet: {call} refused: {type(exc).__name__}: {exc}", file=sys.stderr)
                sent = False
        self.done = True
        return sent


def mount_argv(mount: dict[str, Any], path: str) -> list[str]:
    """The mount command for a shared file system: NFS v4.1 (EFS, FSx for OpenZFS) or
    the Lustre client (FSx for Lustre, `DNS@tcp:/MOUNTNAME`)."""
    if mount.get("fstype") == "lustre":
        source = f"{mount['dns_name']}@tcp:/{mount['mount_name']}"
        return ["mount", "-t", "lustre", "-o", "relatime,flock", source, path]
    opts = "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport"
    source = f"{mount['dns_name']}:{mount.get('export', '/')}"
    return ["mount", "-t", "nfs4", "-o", opts, source, path]


def mount_shared(target: dict[str, Any]) -> None:
    """Mount an EFS / FSx for OpenZFS / FSx for Lustre file system at the target path, or
    the cell's bucket there with Mountpoint for Amazon S3."""
    mount = target.get("mount")
    if not mount:
        return
    path = target["path"]
    os.makedirs(path, exist_ok=True)
    if mount.get("kind") == "mountpoint-s3":
        from iofleet.aws.s3mount import mount_argv as mount_s3_argv

        subprocess.run(mount_s3_argv(mount, path), check=True)
        return
    subprocess.run(mount_argv(mount, path), check=True)


def unmount_shared(target: dict[str, Any]) -> None:
    """Unmount a Mountpoint bucket after the slot (its uploads are complete once the
    files are closed; a failed unmount is said on stderr, the results still go up)."""
    mount = target.get("mount") or {}
    if mount.get("kind") != "mountpoint-s3":
        return
    from iofleet.aws.s3mount import unmount_argv

    done = subprocess.run(unmount_argv(target["path"]), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"iofleet: umount {target['path']}: {done.stderr.strip()}", file=sys.stderr)


def resolve_volume(ec2: Any, target: dict[str, Any]) -> None:
    """Fill the block target's volume id from this instance's attachment."""
    if target.get("kind") != "block" or target.get("volume_id") or not target.get("device_name"):
        return
    instance_id = _imds("meta-data/instance-id")
    vols = ec2.describe_volumes(
        Filters=[
            {"Name": "attachment.instance-id", "Values": [instance_id]},
            {"Name": "attachment.device", "Values": [target["device_name"]]},
        ]
    )["Volumes"]
    if not vols:
        raise RuntimeError(f"no volume attached at {target['device_name']}")
    target["volume_id"] = vols[0]["VolumeId"]


def run_agent(doc: dict[str, Any], results_root: Path) -> int:
    """The core agent, in process, with results to a local directory."""
    slot = dict(doc["slot"])
    slot["results"] = {"kind": "directory", "root": str(results_root)}
    from iofleet.agent.slot import run_populate, run_slot

    if doc.get("mode") == "populate":
        codes = [run_populate(slot, int(wi)) for wi in doc.get("populate_workloads", [])]
        return max(codes, default=0)
    return run_slot(slot)


def run_in_process(doc: dict[str, Any], results_root: Path) -> int:
    """run_agent, stopped by SIGTERM the way Ctrl-C stops it (`sigterm_interrupts`), so
    what was measured is still written. The agent child of `run_interruptible`."""
    try:
        with sigterm_interrupts(after=signal.SIG_IGN):
            return run_agent(doc, results_root)
    except KeyboardInterrupt:  # before the agent's own handler was reached
        return EXIT_INTERRUPTED


def run_interruptible(doc: dict[str, Any], results_root: Path, region: str | None = None) -> int:
    """Run the agent in a child process and outlive it, so what was measured is uploaded
    whatever happens to the agent.

    SIGTERM comes from the instance shutting down (TerminateInstances: the cell's
    cleanup, the abort rule, the janitor) or from `timeout` at the slot's time limit:
    it is passed on to the agent once, which stops like Ctrl-C stops it and writes
    slot.json. After that, SIGTERM stays ignored until exit: the upload that follows
    must not be cut short by a second one (systemd and `timeout` may both send it); the
    OS's final SIGKILL still ends everything. If the agent dies by any other signal
    (SIGKILL, the OOM killer), this program, a child subreaper, kills what it left
    behind, removes the slot's files from a directory target and writes slot.json
    (FAILED, "agent killed by SIGKILL"). If this program dies, the agent gets SIGTERM.
    `region` (on EC2): the agent child makes its own DynamoDB client there for the
    start barrier (clients do not cross a process boundary).
    """
    from iofleet.agent.reaper import children, kill_orphans, set_subreaper

    stopping: list[int] = []
    child: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, frame: object) -> None:
        if not stopping:
            stopping.append(signum)
            if child:
                child[0].send_signal(signal.SIGTERM)

    with (
        tempfile.TemporaryDirectory(prefix="iofleet-doc-") as tmp,
        # the agent's TMPDIR (its apps' temp directories are made there), removed once the
        # agent and what it left are gone: a SIGKILLed agent cleans up nothing (decision 73)
        tempfile.TemporaryDirectory(prefix="iofleet-agent-", ignore_cleanup_errors=True) as own,
    ):
        doc_file = Path(tmp) / "instance.json"
        doc_file.write_text(json.dumps(doc), encoding="utf-8")
        env = dict(os.environ, TMPDIR=own)
        package_parent = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
        if region:
            env[REGION_ENV] = region
        signal.signal(signal.SIGTERM, forward)
        others = children()  # not ours to kill
        set_subreaper(True)
        try:
            proc = subprocess.Popen(  # noqa: S603 - this program, argv list
                [
                    sys.executable,
                    "-m",
                    "iofleet.aws.instance",
                    "--run-agent",
                    str(doc_file),
                    str(results_root),
                    str(os.getpid()),
                ],
                env=env,
                start_new_session=True,
            )
            child.append(proc)
            if stopping:
                proc.send_signal(signal.SIGTERM)
            code = proc.wait()
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            kill_orphans(others)
            set_subreaper(False)
    if code != 0 and doc.get("mode", "slot") == "slot":
        _record_dead_agent(doc, results_root, code)
    return code


def _record_dead_agent(doc: dict[str, Any], results_root: Path, code: int) -> None:
    from iofleet.agent.reaper import agent_death, record_dead_agent

    slot = doc.get("slot") or {}
    try:
        run_id, cell_id = str(slot["run_id"]), str(slot["cell"]["cell_id"])
        index = int(slot["slot_index"])
    except (KeyError, TypeError, ValueError):
        return
    target = slot.get("target") or {}
    path = target.get("path") if target.get("kind") == "directory" else None
    record_dead_agent(
        results_root / run_id / cell_id / f"slot-{index:04d}",
        run_id=run_id,
        cell_id=cell_id,
        slot_index=index,
        why=agent_death(code),
        exit_code=code,
        target=Path(path) if path else None,
    )


def _run_agent_main(argv: list[str]) -> int:
    """`python3 -m iofleet.aws.instance --run-agent DOC RESULTS PARENT_PID`: the agent
    child. It gets SIGTERM when its parent dies (PR_SET_PDEATHSIG; set here rather than
    in a preexec_fn because the parent has a heartbeat thread)."""
    from iofleet.agent.reaper import PR_SET_PDEATHSIG, prctl

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(EXIT_INTERRUPTED))
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(argv[2]):  # the parent died before prctl took effect
        return EXIT_INTERRUPTED
    doc = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    region = os.environ.get(REGION_ENV)
    if region:  # the payload's barrier is kind dynamodb (boto3 only on EC2)
        import boto3

        barrier.register(boto3.client("dynamodb", region_name=region))
    return run_in_process(doc, Path(argv[1]))


def main(argv: list[str] | None = None, clients: dict[str, Any] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="iofleet.aws.instance")
    ap.add_argument("--region", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--fail", metavar="REASON", help="only signal failure with this reason")
    ap.add_argument(
        "--heartbeat", action="store_true", help="only send one heartbeat (a long bootstrap)"
    )
    args = ap.parse_args(argv)
    if clients is None:
        import boto3

        clients = {
            n: boto3.client(n, region_name=args.region)
            for n in ("s3", "stepfunctions", "dynamodb", "ec2", "sts")
        }
    s3 = clients["s3"]
    owner = whoami(clients["sts"]) if clients.get("sts") is not None else None
    key = args.key
    if key.endswith("/"):
        if owner is None:
            print(
                f"iofleet: no instance-role session here: cannot name the payload in {key}",
                file=sys.stderr,
            )
            return 1
        key = f"{key}{owner}.json"
    doc = read_payload(s3, args.bucket, key)
    signals = Signals(clients["stepfunctions"], doc.get("task_token"))
    if args.fail:
        signals.failure("BootstrapFailed", args.fail)
        return 1
    if args.heartbeat:  # the task's heartbeat clock runs from launch, through the bootstrap
        if signals.token:
            clients["stepfunctions"].send_task_heartbeat(taskToken=signals.token)
        return 0
    signals.heartbeat_every(max(5.0, float(doc.get("heartbeat_s", 300)) / 3))
    slot = doc["slot"]
    try:
        target = slot.get("target", {})
        mount_shared(target)
        resolve_volume(clients["ec2"], target)
        with tempfile.TemporaryDirectory(prefix="iofleet-raw-") as tmp:
            try:
                code = run_interruptible(doc, Path(tmp), region=args.region)
            finally:
                unmount_shared(target)
            uploaded = S3ResultsStore(s3, args.bucket, owner).upload_tree(Path(tmp))
    except Exception as exc:  # noqa: BLE001 - every failure becomes the task's cause
        signals.failure(type(exc).__name__, f"{type(exc).__name__}: {exc}")
        print(f"iofleet: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if code == 0:
        signals.success({"exit_code": 0, "objects": len(uploaded)})
    elif code < 0:
        from iofleet.agent.reaper import agent_death

        signals.failure("AgentKilled", f"{agent_death(code)} ({len(uploaded)} raw objects kept)")
        return 1
    elif code == EXIT_INTERRUPTED:
        signals.failure(
            "AgentInterrupted",
            f"agent stopped by SIGTERM: instance shutting down or slot time limit "
            f"({len(uploaded)} raw objects kept)",
        )
    else:
        signals.failure(
            "AgentFailed", f"agent exited with status {code} ({len(uploaded)} raw objects kept)"
        )
    return code


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run-agent"]:
        sys.exit(_run_agent_main(sys.argv[2:]))
    sys.exit(main())
