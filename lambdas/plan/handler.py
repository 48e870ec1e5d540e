"""Plan: validate the matrix (the execution input), write the plan and the run item."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws.lambda_env import TRACED_MODULES
from iofleet.aws.plan import plan_run

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)
metrics = Metrics(namespace="iofleet")


@cache
def _clients() -> dict[str, Any]:
    return {"s3": boto3.client("s3"), "ddb": boto3.client("dynamodb")}


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = plan_run(
        event,
        **_clients(),
        bucket=os.environ["RESULTS_BUCKET"],
        table=os.environ["STATE_TABLE"],
        max_instances=int(os.environ.get("MAX_INSTANCES", "200")),
        heartbeat_s=int(os.environ.get("HEARTBEAT_S", "600")),
    )
    if out["valid"]:
        metrics.add_metric(name="RunsPlanned", unit=MetricUnit.Count, value=1)
        logger.info("planned", extra={"run_id": out["run_id"], "instances": out["total_instances"]})
    else:
        metrics.add_metric(name="MatricesRejected", unit=MetricUnit.Count, value=1)
        logger.info("matrix rejected", extra={"errors": out["errors"]})
    return out
