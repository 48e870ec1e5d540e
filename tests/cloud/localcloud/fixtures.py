"""Session fixture `local_stack`: the synthesized stack deployed into the local cloud once.

Imported by tests/cloud/conftest.py. See the package docstring for what is real
and what is a substitute.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from engines import Engine

from iofleet.aws import keys
from tests.cloud.localcloud import hooks
from tests.cloud.localcloud.athena import AthenaOnTrino
from tests.cloud.localcloud.deploy import Deployment, EventSourceMapping, deploy, synth

HEARTBEAT_S = 600  # the plan's default; the heartbeat fault test lowers it on the function


@dataclass
class LocalStack:
    d: Deployment
    esm: EventSourceMapping
    athena: AthenaOnTrino
    state_dir: Path
    file_systems: dict[str, Path]  # fs id -> directory standing in for the NFS export
    ami: str
    base_config: dict[str, Any]
    faults: list[dict[str, Any]] = field(default_factory=list)
    ec2_faults: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        return self.d.client(service)

    def _write_config(self) -> None:
        hooks.write_config(
            self.state_dir,
            {**self.base_config, "faults": self.faults, "ec2_faults": self.ec2_faults},
        )

    def set_faults(self, faults: list[dict[str, Any]]) -> None:
        self.faults = faults
        self._write_config()

    def set_ec2_faults(self, rules: dict[str, Any]) -> None:
        """RunInstances faults in moto (tests/cloud/localcloud/ec2_faults.py); {} for none."""
        self.ec2_faults = rules
        self._write_config()

    def injected_ec2_faults(self) -> list[dict[str, Any]]:
        """Every RunInstances fault moto has answered with so far, in order."""
        log = self.state_dir / hooks.EC2_FAULT_LOG
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line]

    def start(self, matrix: dict[str, Any]) -> str:
        out = self.client("stepfunctions").start_execution(
            stateMachineArn=self.d.state_machine_arn,
            name=f"{matrix['name']}-{uuid.uuid4().hex[:6]}",
            input=json.dumps(matrix),
        )
        return str(out["executionArn"])

    def wait(self, execution_arn: str, timeout_s: float = 420.0) -> dict[str, Any]:
        return poll(
            lambda: _done(
                self.client("stepfunctions").describe_execution(executionArn=execution_arn)
            ),
            timeout_s=timeout_s,
            what=f"execution {execution_arn.rsplit(':', 1)[-1]}",
        )

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        sfn = self.client("stepfunctions")
        events: list[dict[str, Any]] = []
        for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
            events += page["events"]
        return events

    def run_id_of(self, execution_arn: str) -> str:
        item = self.client("dynamodb").get_item(
            TableName=self.d.table, Key={"pk": {"S": f"exec#{execution_arn}"}, "sk": {"S": "exec"}}
        )["Item"]
        return str(item["run_id"]["S"])

    def item(self, key: dict[str, str]) -> dict[str, Any]:
        got = self.client("dynamodb").get_item(
            TableName=self.d.table, Key={k: {"S": v} for k, v in key.items()}, ConsistentRead=True
        )
        return {k: next(iter(v.values())) for k, v in got.get("Item", {}).items()}

    def run_item(self, run_id: str) -> dict[str, Any]:
        return self.item(keys.run_item_key(run_id))

    def items(self, run_id: str, prefix: str) -> list[dict[str, Any]]:
        got = self.client("dynamodb").query(
            TableName=self.d.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": {"S": f"run#{run_id}"}, ":p": {"S": prefix}},
            ConsistentRead=True,
        )["Items"]
        return [{k: next(iter(v.values())) for k, v in i.items()} for i in got]

    def live_instances(self, run_id: str) -> list[str]:
        out = self.client("ec2").describe_instances(
            Filters=[
                {"Name": f"tag:{keys.TAG_RUN}", "Values": [run_id]},
                {
                    "Name": "instance-state-name",
                    "Values": ["pending", "running", "stopping", "stopped"],
                },
            ]
        )
        return [i["InstanceId"] for r in out["Reservations"] for i in r["Instances"]]

    def all_instances(self, run_id: str) -> list[str]:
        out = self.client("ec2").describe_instances(
            Filters=[{"Name": f"tag:{keys.TAG_RUN}", "Values": [run_id]}]
        )
        return [i["InstanceId"] for r in out["Reservations"] for i in r["Instances"]]

    def agents_running(self, instance_ids: list[str]) -> list[str]:
        """Local instances whose agent process has not finished (no exit code, no fault, no error)."""
        running = []
        for i in instance_ids:
            home = self.state_dir / "instances" / i
            if not any((home / n).exists() for n in ("exit_code.json", "fault.json", "error.json")):
                running.append(i)
        return running

    def keys(self, prefix: str) -> list[str]:
        out: list[str] = []
        for page in (
            self.client("s3")
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.d.bucket, Prefix=prefix)
        ):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def raw_objects(self, run_id: str) -> dict[str, str]:
        """A run's raw objects, relpath -> key: `raw/<relpath>` (Lambdas) or
        `raw/<instance's aws:userid>/<relpath>` (instances)."""
        out: dict[str, str] = {}
        for key in self.keys(keys.RAW_PREFIX):
            _, relpath = keys.split_raw_key(key)
            if relpath.startswith(f"{run_id}/"):
                assert relpath not in out, f"{relpath} written twice: {out[relpath]}, {key}"
                out[relpath] = key
        return dict(sorted(out.items()))

    def download(self, prefix: str, dest: Path) -> Path:
        """Raw objects whose `raw/<relpath>` starts with `prefix` (`raw/<run_id>/`) into
        `dest`, files at their relpath (the writer's id left out)."""
        s3 = self.client("s3")
        run_id = prefix[len(keys.RAW_PREFIX) :].split("/", 1)[0]
        for relpath, key in self.raw_objects(run_id).items():
            if not (keys.RAW_PREFIX + relpath).startswith(prefix):
                continue
            path = dest / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(s3.get_object(Bucket=self.d.bucket, Key=key)["Body"].read())
        return dest


def _done(desc: dict[str, Any]) -> dict[str, Any] | None:
    return desc if desc["status"] != "RUNNING" else None


def poll(check: Callable[[], Any], *, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    interval = 0.1
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached after {timeout_s:.0f} s")
        time.sleep(interval)  # polling interval, not synchronisation
        interval = min(interval * 1.5, 0.5)  # a poll is cheap; a later one costs every wait


@pytest.fixture(scope="session")
def local_stack(
    moto_server: Engine,
    trino_starting: Future[Engine],
    dynamodb_starting: Future[Engine],
    localcloud_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[LocalStack]:
    # given: the template synthesized with the projection starting yesterday
    # (every run of this session is dated today) and a new file system checked every
    # second instead of every 15 s (moto's FSx is CREATING for one check:
    # fsx_lifecycle.py), published and deployed
    yesterday = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).strftime("%Y-%m-%d")
    outdir = tmp_path_factory.mktemp("cdk-out")
    template = synth(outdir, {"projection_start": yesterday, "storage_poll_s": 1})
    # (DynamoDB Local and Trino have been starting meanwhile: tests/cloud/conftest.py)
    dynamodb_local: Engine = request.getfixturevalue("dynamodb_local")
    trino_server: Engine = request.getfixturevalue("trino_server")
    aws_client: Callable[[str], Any] = request.getfixturevalue("aws_client")
    athena = AthenaOnTrino(trino_server.endpoint).start()
    efs = aws_client("efs")
    file_systems: dict[str, Path] = {}
    for label in ("a", "b"):
        fs_id = efs.create_file_system(CreationToken=f"localcloud-{label}-{uuid.uuid4().hex[:6]}")[
            "FileSystemId"
        ]
        file_systems[fs_id] = Path(
            tempfile.mkdtemp(prefix=f"efs-{label}-", dir=tmp_path_factory.getbasetemp())
        )
    base_config = {
        "env": {
            "AWS_ENDPOINT_URL": moto_server.endpoint,
            "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_local.endpoint,
            "AWS_ENDPOINT_URL_ATHENA": athena.endpoint,
        },
        "file_systems": {k: str(v) for k, v in file_systems.items()},
        # FSx file systems created by runs: fs-ID's DNS name mounts $fsx_root/fs-ID (hooks.py)
        "fsx_root": tempfile.mkdtemp(prefix="fsx-", dir=tmp_path_factory.getbasetemp()),
    }
    hooks.write_config(localcloud_dir, {**base_config, "faults": []})
    d = deploy(
        template,
        outdir,
        client=aws_client,
        stack_name="IofleetStack",
        cfn_response_url=athena.response_url,
        cfn_responses=athena.cfn_responses,
    )
    # a local instance signs with a session of this role named by its instance id, as EC2 does
    role, _ = d.one("AWS::IAM::Role", "Fleet/InstanceRole")
    base_config["instance_role_arn"] = d.resolve.ref(role, "Arn")
    hooks.write_config(localcloud_dir, {**base_config, "faults": []})
    athena.workgroups = {d.workgroup}  # from now on, another workgroup is not found
    _, mapping = d.one("AWS::Lambda::EventSourceMapping")
    esm = EventSourceMapping(d, batch_size=int(mapping["Properties"]["BatchSize"])).start()
    ami = aws_client("ec2").describe_images()["Images"][0]["ImageId"]
    stack = LocalStack(d, esm, athena, localcloud_dir, file_systems, ami, base_config)
    try:
        yield stack
    finally:
        esm.stop()
        athena.stop()
