"""Handler tests against a real moto server on loopback (no moto decorators, no mocks).

The handlers build their boto3 clients from the environment, so pointing
AWS_ENDPOINT_URL at the server is all it takes.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
REGION = "us-east-1"


@dataclass
class FakeLambdaContext:
    function_name: str = "test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test"
    aws_request_id: str = "52fdfc07-2182-154f-163f-5f0f9a621d72"
    log_stream_name: str = "2026/11/21/[$LATEST]test"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ.update({**_ENV, "AWS_ENDPOINT_URL": endpoint})
    try:
        yield endpoint
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_SERVICE_NAME": "iofleet-test",
    "POWERTOOLS_METRICS_NAMESPACE": "iofleet-test",
    "POWERTOOLS_DEV": "false",
    "AWS_ENDPOINT_URL": "",
}


@dataclass
class Cloud:
    """Fresh bucket + table per test (unique names), clients on the moto server."""

    endpoint: str
    bucket: str
    table: str

    def client(self, name: str) -> Any:
        return boto3.client(name, endpoint_url=self.endpoint, region_name=REGION)

    def keys(self, prefix: str = "") -> list[str]:
        out: list[str] = []
        for page in (
            self.client("s3")
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.bucket, Prefix=prefix)
        ):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def text(self, key: str) -> str:
        return str(
            self.client("s3").get_object(Bucket=self.bucket, Key=key)["Body"].read().decode()
        )

    def item(self, pk: str, sk: str) -> dict[str, Any] | None:
        got = self.client("dynamodb").get_item(
            TableName=self.table, Key={"pk": {"S": pk}, "sk": {"S": sk}}
        )
        return got.get("Item")


@pytest.fixture(scope="session")
def moto_images(moto_endpoint: str) -> list[str]:
    """The ids of moto's built-in images, in DescribeImages order. Describing every image
    takes seconds (moto holds thousands) and no test adds or removes one, so the
    session asks once."""
    ec2 = boto3.client("ec2", endpoint_url=moto_endpoint, region_name=REGION)
    return [i["ImageId"] for i in ec2.describe_images()["Images"]]


@pytest.fixture
def cloud(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    suffix = uuid.uuid4().hex[:10]
    c = Cloud(moto_endpoint, f"results-{suffix}", f"state-{suffix}")
    c.client("s3").create_bucket(Bucket=c.bucket)
    c.client("dynamodb").create_table(
        TableName=c.table,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setenv("RESULTS_BUCKET", c.bucket)
    monkeypatch.setenv("STATE_TABLE", c.table)
    return c


@pytest.fixture
def workgroup(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> str:
    """An Athena workgroup writing results to the test bucket; the Lambdas' env points at it."""
    name = f"wg-{cloud.table}"
    cloud.client("athena").create_work_group(
        Name=name,
        Configuration={
            "ResultConfiguration": {"OutputLocation": f"s3://{cloud.bucket}/athena-results/"}
        },
    )
    monkeypatch.setenv("ATHENA_WORKGROUP", name)
    monkeypatch.setenv("ATHENA_DATABASE", "iofleet")
    return name


@pytest.fixture
def context() -> FakeLambdaContext:
    return FakeLambdaContext()


def example(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return doc
