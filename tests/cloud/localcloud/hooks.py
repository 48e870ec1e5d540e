"""Hooks installed in the moto server process (see `motoserver.py` and the package docstring).

Configuration comes from `$IOFLEET_LOCALCLOUD_DIR/config.json`, written by the
test process after the engines are up (`write_config`); without it moto
behaves as stock moto. It is re-read on each hooked call, so tests can add
fault rules between executions:

    {"env": {"AWS_ENDPOINT_URL": ..., "AWS_ENDPOINT_URL_DYNAMODB": ..., ...},
     "file_systems": {"fs-0123": "/tmp/.../efs-a"},
     "faults": [{"payload_key_prefix": "control/RUN-", "cell": "x3", "slot": 1,
                 "kind": "hang" | "tiny-disk"}],
     "ec2_faults": {"throttle_fraction": 0.3, "no_capacity_zones": ["us-east-1a"], ...}}

`ec2_faults` (see `ec2_faults.py`) makes moto's RunInstances answer as EC2 does under
load: RequestLimitExceeded, InsufficientInstanceCapacity, Unsupported; each injected
fault is appended to `$IOFLEET_LOCALCLOUD_DIR/ec2-faults.jsonl`.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
RUNTIME = HERE / "lambda_runtime.py"
AGENT_MARKER = "# iofleet-agent-command: "


def state_dir() -> Path:
    return Path(os.environ["IOFLEET_LOCALCLOUD_DIR"])


def write_config(directory: Path, config: dict[str, Any]) -> None:
    """Atomically (re)write the hooks' configuration (called by the test process)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / "config.json.tmp"
    tmp.write_text(json.dumps(config, indent=1))
    tmp.replace(directory / "config.json")


def config() -> dict[str, Any] | None:
    if "IOFLEET_LOCALCLOUD_DIR" not in os.environ:
        return None
    try:
        doc: dict[str, Any] = json.loads((state_dir() / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return doc


def _base_env(cfg: dict[str, Any]) -> dict[str, str]:
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION",
    )
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.update(cfg.get("env", {}))
    return env


# --------------------------------------------------------------------------- Lambda


class Worker:
    """One warm runtime process for one function version + environment."""

    def __init__(self, code_dir: Path, env: dict[str, str], log: Path) -> None:
        read_fd, write_fd = os.pipe()
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", str(RUNTIME), str(write_fd)],
                cwd=code_dir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                text=True,
            )
        os.close(write_fd)
        self.answers = os.fdopen(read_fd)

    def invoke(self, event: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(event) + "\n")
            self.proc.stdin.flush()
            line = self.answers.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            return {
                "ok": False,
                "payload": {"errorType": "Runtime.ExitError", "errorMessage": "the runtime exited"},
            }
        answer: dict[str, Any] = json.loads(line)
        return answer

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()


class Pool:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[str, list[Worker]] = {}

    def _code_dir(self, fn: Any) -> Path:
        digest = (fn.code_sha_256 or "empty").replace("/", "_").replace("+", "-").rstrip("=")
        dest = state_dir() / "lambda-code" / digest
        with self.lock:
            if not dest.is_dir():
                tmp = dest.with_name(dest.name + ".tmp")
                zipfile.ZipFile(io.BytesIO(fn.code_bytes)).extractall(tmp)
                tmp.rename(dest)
        return dest

    def invoke(self, fn: Any, event: Any, cfg: dict[str, Any]) -> dict[str, Any]:
        code_dir = self._code_dir(fn)
        env = _base_env(cfg)
        env.update(
            {k: str(v) for k, v in (fn.environment_vars or {}).items() if not k.startswith("AWS_")}
        )
        env.update(
            {
                "AWS_LAMBDA_FUNCTION_NAME": fn.function_name,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size),
                "IOFLEET_FUNCTION_ARN": fn.function_arn,
                "_HANDLER": fn.handler or "handler.handler",
                "PYTHONPATH": str(code_dir),
                "POWERTOOLS_TRACE_DISABLED": "true",
                # the stack's layers this function has (by name): lambda_runtime lets it
                # import a layer's modules only then (the venv has them all)
                "IOFLEET_LOCAL_LAYERS": ",".join(
                    str(layer["Arn"]).split(":")[-2] for layer in (fn.layers or [])
                ),
            }
        )
        key = json.dumps([fn.function_arn, fn.code_sha_256, env], sort_keys=True)
        with self.lock:
            free = self.idle.setdefault(key, [])
            worker = free.pop() if free else None
        if worker is None or not worker.alive():
            log = state_dir() / "logs" / f"lambda-{fn.function_name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            worker = Worker(code_dir, env, log)
        answer = worker.invoke(event)
        with self.lock:
            if worker.alive():
                self.idle.setdefault(key, []).append(worker)
        return answer


POOL = Pool()


def _lambda_invoke(original: Any) -> Any:
    def invoke(self: Any, body: str, request_headers: Any, response_headers: Any) -> str | bytes:
        cfg = config()
        if cfg is None:
            return original(self, body, request_headers, response_headers)  # type: ignore[no-any-return]
        event = json.loads(body) if body else {}
        if (request_headers or {}).get("x-amz-invocation-type") == "Event":
            threading.Thread(target=POOL.invoke, args=(self, event, cfg), daemon=True).start()
            return b""
        answer = POOL.invoke(self, event, cfg)
        if not answer["ok"]:
            response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps(answer["payload"]).encode()

    return invoke


# --------------------------------------------------------------------------- EC2 instances


def _user_data_text(user_data: Any) -> str:
    if not user_data:
        return ""
    raw = user_data if isinstance(user_data, str | bytes) else str(user_data)
    if isinstance(raw, bytes):
        raw = raw.decode(errors="replace")
    if AGENT_MARKER in raw:
        return raw
    try:
        return base64.b64decode(raw).decode(errors="replace")
    except ValueError:
        return raw


def _bundle_location(user_data: str) -> tuple[str, str, str]:
    """(region, bucket, key) of the agent bundle, from the user-data's download step."""
    for line in user_data.splitlines():
        if line.startswith("python3 - "):
            region, bucket, key = shlex.split(line)[2:5]
            return region, bucket, key
    raise ValueError("no agent bundle download in user-data")


def _time_limit(user_data: str) -> str:
    for line in user_data.splitlines():
        if line.startswith("timeout "):
            return shlex.split(line)[2]
    raise ValueError("no timeout line in user-data")


MOUNT_SHIM = """#!{python}
# local cloud: an NFS or Lustre mount of a shared file system becomes a bind mount of its
# directory. EFS ids map through IOFLEET_LOCALCLOUD_FILE_SYSTEMS; an FSx file system's DNS
# name (fs-ID.fsx.REGION.amazonaws.com) maps to $IOFLEET_LOCALCLOUD_FSX_ROOT/fs-ID, and each
# FSx mount is logged (argv) to $IOFLEET_LOCALCLOUD_FSX_ROOT/mounts.jsonl
import json, os, sys
args = sys.argv[1:]
fstype = args[args.index("-t") + 1] if "-t" in args else ""
if fstype.startswith("nfs") or fstype == "lustre":
    source, target = args[-2], args[-1]
    fs_id = source.split(":", 1)[0].split("@", 1)[0].split(".", 1)[0]
    tiny = os.environ.get("IOFLEET_LOCALCLOUD_TINY_DISK")
    if tiny:
        os.execv("/usr/bin/mount", ["mount", "-t", "tmpfs", "-o", "size=" + tiny, "tmpfs", target])
    directory = json.loads(os.environ["IOFLEET_LOCALCLOUD_FILE_SYSTEMS"]).get(fs_id)
    fsx_root = os.environ.get("IOFLEET_LOCALCLOUD_FSX_ROOT")
    if directory is None and fsx_root and ".fsx." in source:
        directory = os.path.join(fsx_root, fs_id)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(fsx_root, "mounts.jsonl"), "a") as log:
            log.write(json.dumps({{"fs_id": fs_id, "argv": args}}) + "\\n")
    if directory is None:
        sys.exit("mount." + fstype + ": access denied by server while mounting " + source)
    os.execv("/usr/bin/mount", ["mount", "--bind", directory, target])
os.execv("/usr/bin/mount", ["mount"] + args)
"""


MOUNT_S3_SHIM = """#!{python}
# local cloud stand-in for mount-s3 (there is no Mountpoint here): check the bucket exists
# (for a directory bucket, through a CreateSession on it, as Mountpoint's client does),
# leave a marker object in it (so cleanup has something to empty), record the command line,
# and bind-mount an empty directory at the target. Mountpoint's own semantics are not
# emulated (tests/integration/test_mountpoint_semantics.py checks fio against them).
import json, os, sys, tempfile
import boto3
args = sys.argv[1:]
bucket, target = args[-2], args[-1]
region = args[args.index("--region") + 1]
s3 = boto3.client("s3", region_name=region, endpoint_url=os.environ.get("AWS_ENDPOINT_URL"))
s3.head_bucket(Bucket=bucket)
home = os.environ["IOFLEET_LOCALCLOUD_HOME"]
s3.put_object(Bucket=bucket, Key="localcloud-mount/" + os.path.basename(home), Body=json.dumps(args))
with open(os.path.join(home, "mount-s3.json"), "w") as out:
    json.dump(args, out)
directory = tempfile.mkdtemp(prefix="mount-s3-", dir=home)
os.execv("/usr/bin/mount", ["mount", "--bind", directory, target])
"""


class LocalInstance:
    def __init__(self, backend: Any, instance_id: str, user_data: str, cfg: dict[str, Any]) -> None:
        self.backend = backend
        self.instance_id = instance_id
        self.user_data = user_data
        self.cfg = cfg
        self.home = state_dir() / "instances" / instance_id
        self.proc: subprocess.Popen[bytes] | None = None
        self.terminated = threading.Event()
        self.lock = threading.Lock()

    def fault(self, payload_key: str) -> dict[str, Any] | None:
        for rule in self.cfg.get("faults", []):
            if not payload_key.startswith(rule.get("payload_key_prefix", "")):
                continue
            if rule.get("cell") and rule["cell"] not in payload_key:
                continue
            slot = f"/slot-{int(rule.get('slot', 0)):04d}"
            if "slot" in rule and not payload_key.endswith((f"{slot}.json", f"{slot}/")):
                continue
            return dict(rule)
        return None

    def _role_session(self) -> dict[str, str]:
        """The instance role's credentials as EC2 delivers them: a session named by the
        instance id, so GetCallerIdentity answers `<role id>:<instance id>`."""
        import boto3

        arn = self.cfg.get("instance_role_arn")
        if not arn:
            return {}
        env = _base_env(self.cfg)
        sts = boto3.client(
            "sts",
            region_name=env["AWS_REGION"],
            endpoint_url=env.get("AWS_ENDPOINT_URL"),
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        creds = sts.assume_role(RoleArn=arn, RoleSessionName=self.instance_id)["Credentials"]
        return {
            "AWS_ACCESS_KEY_ID": creds["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
            "AWS_SESSION_TOKEN": creds["SessionToken"],
        }

    def _record(self, name: str, value: object) -> None:
        (self.home / name).write_text(json.dumps(value))

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # noqa: BLE001 - recorded for the tests, the instance still powers off
            self._record("error.json", f"{type(exc).__name__}: {exc}")
        finally:
            if not self.terminated.is_set():
                # the user-data's EXIT trap powers off; shutdown behaviour is terminate
                self.backend.terminate_instances([self.instance_id])

    def _run(self) -> None:
        import boto3

        self.home.mkdir(parents=True, exist_ok=True)
        argv = _agent_argv(self.user_data)
        payload_key = argv[argv.index("--key") + 1]
        self._record("payload_key.json", payload_key)
        fault = self.fault(payload_key)
        if fault and fault["kind"] == "hang":
            self._record("fault.json", fault)
            self.terminated.wait()  # boots, never runs the agent, never signals
            return
        env = {**_base_env(self.cfg), **self._role_session()}
        region, bucket, key = _bundle_location(self.user_data)
        agent_dir = self.home / "opt-iofleet"
        s3 = boto3.client("s3", region_name=region, endpoint_url=env.get("AWS_ENDPOINT_URL"))
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        zipfile.ZipFile(io.BytesIO(body)).extractall(agent_dir)
        bin_dir = self.home / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "python3").symlink_to(sys.executable)
        shim = bin_dir / "mount"
        shim.write_text(MOUNT_SHIM.format(python=sys.executable))
        shim.chmod(0o755)
        mount_s3 = bin_dir / "mount-s3"
        mount_s3.write_text(MOUNT_S3_SHIM.format(python=sys.executable))
        mount_s3.chmod(0o755)
        env.update(
            {
                "PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}",
                "PYTHONPATH": str(agent_dir),
                "IOFLEET_FIO_JOBS": str(agent_dir / "fio-jobs"),
                "IOFLEET_LOCALCLOUD_FILE_SYSTEMS": json.dumps(self.cfg.get("file_systems", {})),
                "IOFLEET_LOCALCLOUD_FSX_ROOT": str(self.cfg.get("fsx_root", "")),
                "IOFLEET_LOCALCLOUD_HOME": str(self.home),
            }
        )
        if fault and fault["kind"] == "tiny-disk":
            self._record("fault.json", fault)
            env["IOFLEET_LOCALCLOUD_TINY_DISK"] = str(fault.get("size", "2m"))
        cmd = ["unshare", "--mount", "--propagation", "private"]
        cmd += ["timeout", "--kill-after=60", _time_limit(self.user_data), *argv]
        with self.lock:
            if self.terminated.is_set():
                return
            with (self.home / "agent.log").open("wb") as log:
                self.proc = subprocess.Popen(
                    cmd,
                    cwd=agent_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        self._record("exit_code.json", self.proc.wait())

    def kill(self) -> None:
        """TerminateInstances: the OS goes down (TERM, then KILL after a grace period)."""
        with self.lock:
            self.terminated.set()
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _agent_argv(user_data: str) -> list[str]:
    for line in user_data.splitlines():
        if line.startswith(AGENT_MARKER):
            return shlex.split(line[len(AGENT_MARKER) :])
    raise ValueError("no iofleet agent command in user-data")


INSTANCES: dict[str, LocalInstance] = {}
INSTANCES_LOCK = threading.Lock()


def _run_instances(original: Any) -> Any:
    def run_instances(
        self: Any,
        image_id: str,
        count: int,
        user_data: Any,
        security_group_names: Any,
        **kwargs: Any,
    ) -> Any:
        reservation = original(self, image_id, count, user_data, security_group_names, **kwargs)
        cfg = config()
        text = _user_data_text(user_data)
        if cfg is None or AGENT_MARKER not in text:
            return reservation
        for instance in reservation.instances:
            with INSTANCES_LOCK:
                if instance.id in INSTANCES:  # an idempotent retry (same ClientToken)
                    continue
                local = INSTANCES[instance.id] = LocalInstance(self, instance.id, text, cfg)
            threading.Thread(target=local.run, name=f"instance-{instance.id}", daemon=True).start()
        return reservation

    return run_instances


def _terminate_instances(original: Any) -> Any:
    def terminate_instances(self: Any, instance_ids: list[str]) -> Any:
        out = original(self, instance_ids)
        for instance_id in instance_ids:
            with INSTANCES_LOCK:
                local = INSTANCES.get(instance_id)
            if local is not None and threading.current_thread().name != f"instance-{instance_id}":
                threading.Thread(target=local.kill, daemon=True).start()
        return out

    return terminate_instances


EC2_FAULT_LOG = "ec2-faults.jsonl"
EC2_FAULT_LOCK = threading.Lock()


def _log_ec2_fault(fault: dict[str, Any]) -> None:
    """One line per injected RunInstances fault, for the tests to match with recorded retries."""
    with EC2_FAULT_LOCK, (state_dir() / EC2_FAULT_LOG).open("a") as out:
        out.write(json.dumps(fault) + "\n")


def install() -> None:
    from moto.awslambda.models import LambdaFunction
    from moto.ec2.models.instances import InstanceBackend

    from tests.cloud.localcloud import (
        ec2_faults,
        fsx_lifecycle,
        s3express,
        sfn_patches,
        sqs_patches,
    )

    sfn_patches.install()  # Map failure threshold and StopExecution as in AWS (see that module)
    fsx_lifecycle.install()  # FSx Lifecycle and Lustre MountName, which moto lacks
    s3express.install()  # S3 Express One Zone directory buckets, which moto lacks
    sqs_patches.install()  # ReceiveMessage without an O(queue) attribute build per message

    LambdaFunction.invoke = _lambda_invoke(LambdaFunction.invoke)  # type: ignore[method-assign]
    InstanceBackend.run_instances = _run_instances(  # type: ignore[method-assign]
        ec2_faults.wrap(
            InstanceBackend.run_instances,
            lambda: (config() or {}).get("ec2_faults"),
            _log_ec2_fault,
        )
    )
    InstanceBackend.terminate_instances = _terminate_instances(InstanceBackend.terminate_instances)  # type: ignore[method-assign]
