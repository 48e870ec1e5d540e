"""The plan and launch Lambdas against a moto server: the release the plan chose for the
presets decides which public Ubuntu AMI parameter the launcher reads, per architecture,
and the instance's user-data sets up that preset's host.

moto carries no Canonical parameters (/aws/service/canonical/...), and put_parameter
refuses the reserved /aws prefix, so the test publishes them straight into the moto
SSM backend the server runs on, as moto itself loads the Amazon Linux ones: a stand-in
for AWS's public parameters, each pointing at a different moto image so the launched
instance's ImageId shows which parameter was read.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from iofleet.aws import ec2 as ec2_spec
from iofleet.aws import keys
from iofleet.plan.apps import get_preset
from lambdas.launch import handler as launch
from lambdas.plan import handler as plan
from tests.unit.lambdas.conftest import REGION, Cloud, FakeLambdaContext

TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAf-test-token"
ROLE_ID = "AROAEXAMPLEINSTANCE1"
YOCTO = "yocto-core-image-sato-sdk"


@pytest.fixture
def published(cloud: Cloud, moto_images: list[str]) -> Iterator[dict[str, str]]:
    """Every Canonical parameter the launcher may read -> a distinct moto image id."""
    from moto.backends import get_backend
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ssm.models import Parameter

    images = moto_images
    names = ec2_spec.ami_parameter_names()
    assert len(set(images)) >= len(names)
    table = dict(zip(names, sorted(set(images)), strict=False))
    params = get_backend("ssm")[DEFAULT_ACCOUNT_ID][REGION]._parameters
    for name, image in table.items():
        params[name].append(
            Parameter(
                account_id=DEFAULT_ACCOUNT_ID,
                name=name,
                value=image,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=time.time(),
                version=1,
                data_type="aws:ec2:image",
            )
        )
    yield table
    for name in table:
        params.pop(name, None)


@pytest.fixture
def network(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    ec2 = cloud.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    lt = ec2.create_launch_template(
        LaunchTemplateName=f"lt-{cloud.table}",
        LaunchTemplateData={"MetadataOptions": {"HttpTokens": "required"}},
    )["LaunchTemplate"]["LaunchTemplateId"]
    monkeypatch.setenv("LAUNCH_TEMPLATE_ID", lt)
    monkeypatch.setenv("SUBNET_IDS", subnet)
    monkeypatch.setenv("STORAGE_SECURITY_GROUP", "sg-0")
    monkeypatch.setenv("AGENT_BUCKET", "cdk-assets")
    monkeypatch.setenv("AGENT_KEY", "agent.zip")
    monkeypatch.setenv("INSTANCE_ROLE_ID", ROLE_ID)


def _matrix(instance_type: str, workloads: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": f"host-{uuid.uuid4().hex[:8]}",  # one run id per test: moto's EC2 is shared
        "instance_types": [instance_type],
        "storage": [{"type": "ebs", "label": "gp3", "volume_type": "gp3", "size_gib": 100}],
        "workloads": workloads,
        "parallelism": [1],
        **extra,
    }


def _launch(context: FakeLambdaContext, matrix: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    run = plan.handler(
        {
            "matrix": matrix,
            "execution_arn": f"arn:aws:states:{REGION}:123456789012:execution:sm:{matrix['name']}",
            "started_at": "2026-11-21T05:12:00Z",
        },
        context,
    )
    assert run["valid"], run
    cell = run["cells"][0]
    launch.handler(
        {
            "mode": "slot",
            "run_id": run["run_id"],
            "cell_id": cell["cell_id"],
            "slot_index": 0,
            "storage": {"ready": True, "kind": "ebs"},
            "task_token": TOKEN,
        },
        context,
    )
    return run["run_id"], cell


def _instance(cloud: Cloud, run_id: str) -> tuple[dict[str, Any], str]:
    ec2 = cloud.client("ec2")
    res = ec2.describe_instances(Filters=[{"Name": f"tag:{keys.TAG_RUN}", "Values": [run_id]}])
    (inst,) = [i for r in res["Reservations"] for i in r["Instances"]]
    data = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
    return inst, base64.b64decode(data["UserData"]["Value"]).decode()


@pytest.mark.parametrize(
    ("instance_type", "workloads", "extra", "parameter"),
    [
        (
            "m6i.4xlarge",
            [{"app": YOCTO}],
            {},
            "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
        ),
        (
            "m7g.4xlarge",
            [{"app": YOCTO}],
            {},
            "/aws/service/canonical/ubuntu/server/22.04/stable/current/arm64/hvm/ebs-gp2/ami-id",
        ),
        (
            "m6i.4xlarge",
            [{"app": "c-build"}],
            {},
            "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
        ),
        (
            "m7g.4xlarge",
            [{"fio": "seq-read-1m-qd32"}],
            {},
            "/aws/service/canonical/ubuntu/server/24.04/stable/current/arm64/hvm/ebs-gp3/ami-id",
        ),
        (
            "m7g.4xlarge",
            [{"app": "c-build"}],
            {"ubuntu_release": "22.04"},
            "/aws/service/canonical/ubuntu/server/22.04/stable/current/arm64/hvm/ebs-gp2/ami-id",
        ),
    ],
    ids=["yocto-amd64", "yocto-arm64", "c-build-amd64", "fio-arm64", "c-build-22.04-arm64"],
)
def test_the_instance_boots_the_ami_of_the_release_the_plan_chose(
    cloud: Cloud,
    network: None,
    published: dict[str, str],
    context: FakeLambdaContext,
    instance_type: str,
    workloads: list[dict[str, Any]],
    extra: dict[str, Any],
    parameter: str,
) -> None:
    # given a plan with no ami_id
    run_id, cell = _launch(context, _matrix(instance_type, workloads, **extra))
    # then the instance runs the image published under that release's parameter
    inst, user_data = _instance(cloud, run_id)
    assert inst["ImageId"] == published[parameter]
    release = parameter.split("/")[6]
    assert f"!= 'ubuntu {release}'" in user_data  # and the bootstrap checks it


def test_the_yocto_instance_installs_the_presets_packages_before_the_agent(
    cloud: Cloud, network: None, published: dict[str, str], context: FakeLambdaContext
) -> None:
    run_id, _ = _launch(context, _matrix("m6i.4xlarge", [{"app": YOCTO}]))
    _, user_data = _instance(cloud, run_id)
    lines = user_data.splitlines()
    installs = [i for i, line in enumerate(lines) if line.startswith("apt-get install ")]
    agent = next(i for i, line in enumerate(lines) if line.startswith("timeout "))
    assert len(installs) == 2 and max(installs) < agent
    words = lines[installs[1]].split()
    for package in get_preset(YOCTO).host.packages:
        assert words.count(package) == 1, package
    assert "locale-gen en_US.UTF-8" in lines[installs[1] : agent]


def test_a_matrix_ami_is_used_as_given_and_no_parameter_is_read(
    cloud: Cloud, network: None, moto_images: list[str], context: FakeLambdaContext
) -> None:
    # given no published parameters at all and an AMI said to run 22.04
    image = moto_images[0]
    matrix = _matrix("m6i.4xlarge", [{"app": YOCTO}], ami_id=image, ubuntu_release="22.04")
    run_id, _ = _launch(context, matrix)
    inst, user_data = _instance(cloud, run_id)
    assert inst["ImageId"] == image
    assert "!= 'ubuntu 22.04'" in user_data  # the bootstrap holds the image to its word


class _Recorder:
    """Step Functions, a hand-written stand-in: records the calls the instance program makes
    (the heartbeat's effect on an execution is Step Functions' own; tests/cloud covers it)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda **kw: self.calls.append((name, kw))


def test_the_bootstrap_heartbeat_sends_one_beat_and_runs_nothing(cloud: Cloud) -> None:
    from iofleet.aws.instance import main

    key = "control/r/c000/slot-0000.json"
    doc = {"task_token": TOKEN, "heartbeat_s": 600, "slot": {"unused": True}}
    cloud.client("s3").put_object(Bucket=cloud.bucket, Key=key, Body=json.dumps(doc).encode())
    sfn = _Recorder()
    clients = {"s3": cloud.client("s3"), "stepfunctions": sfn, "dynamodb": None, "ec2": None}
    argv = ["--region", REGION, "--bucket", cloud.bucket, "--key", key, "--heartbeat"]
    assert main(argv, clients=clients) == 0
    assert sfn.calls == [("send_task_heartbeat", {"taskToken": TOKEN})]
