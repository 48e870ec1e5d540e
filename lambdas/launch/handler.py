"""Launch: one instance for a slot (or a cell's populate phase); it will signal the task token."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws.launch import LaunchEnv, launch

logger = Logger(service="iofleet")
tracer = Tracer()
metrics = Metrics(namespace="iofleet")


@cache
def _clients() -> dict[str, Any]:
    return {
        n: boto3.client(c)
        for n, c in (("s3", "s3"), ("ec2", "ec2"), ("ssm", "ssm"), ("ddb", "dynamodb"))
    }


def _env() -> LaunchEnv:
    return LaunchEnv(
        bucket=os.environ["RESULTS_BUCKET"],
        table=os.environ["STATE_TABLE"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        launch_template_id=os.environ["LAUNCH_TEMPLATE_ID"],
        subnet_ids=tuple(s for s in os.environ["SUBNET_IDS"].split(",") if s),
        agent_bucket=os.environ["AGENT_BUCKET"],
        agent_key=os.environ["AGENT_KEY"],
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = launch(event, **_clients(), env=_env())
    metrics.add_metric(name="InstancesLaunched", unit=MetricUnit.Count, value=1)
    logger.info(
        "launched",
        extra={**{k: event.get(k) for k in ("run_id", "cell_id", "slot_index", "mode")}, **out},
    )
    return out
