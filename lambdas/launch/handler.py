"""Launch: one instance for a slot (or a cell's populate phase); it will signal the task token."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from iofleet.aws.lambda_env import TRACED_MODULES
from iofleet.aws.launch import LaunchEnv, launch

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)
metrics = Metrics(namespace="iofleet")


# Which layer retries what (docs/internals.md, "Launching a fleet"): botocore's standard
# mode retries S3, SSM and DynamoDB; EC2 gets no botocore retries, so every RunInstances
# retry goes through iofleet.aws.launch (backoff with full jitter) and is recorded on the slot.
NO_SDK_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})
SDK_RETRIES = Config(retries={"mode": "standard"})


@cache
def _clients() -> dict[str, Any]:
    return {
        "s3": boto3.client("s3", config=SDK_RETRIES),
        "ec2": boto3.client("ec2", config=NO_SDK_RETRIES),
        "ssm": boto3.client("ssm", config=SDK_RETRIES),
        "ddb": boto3.client("dynamodb", config=SDK_RETRIES),
    }


def _env() -> LaunchEnv:
    return LaunchEnv(
        bucket=os.environ["RESULTS_BUCKET"],
        table=os.environ["STATE_TABLE"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        launch_template_id=os.environ["LAUNCH_TEMPLATE_ID"],
        subnet_ids=tuple(s for s in os.environ["SUBNET_IDS"].split(",") if s),
        subnet_zones=tuple(z for z in os.environ.get("SUBNET_ZONES", "").split(",") if z),
        agent_bucket=os.environ["AGENT_BUCKET"],
        agent_key=os.environ["AGENT_KEY"],
        instance_role_id=os.environ["INSTANCE_ROLE_ID"],
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = launch(event, **_clients(), env=_env())
    metrics.add_metric(name="InstancesLaunched", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="LaunchRetries", unit=MetricUnit.Count, value=out["launch_retries"])
    logger.info(
        "launched",
        extra={**{k: event.get(k) for k in ("run_id", "cell_id", "slot_index", "mode")}, **out},
    )
    return out
