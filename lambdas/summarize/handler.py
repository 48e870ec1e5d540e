"""Summarize: the run's percentiles from Athena, burst metrics from CloudWatch, a CSV + JSON report, report.html, the run status."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws.lambda_env import TRACED_MODULES
from iofleet.aws.summarize import summarize

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)


@cache
def _clients() -> dict[str, Any]:
    return {
        n: boto3.client(c)
        for n, c in (
            ("athena", "athena"),
            ("s3", "s3"),
            ("ddb", "dynamodb"),
            ("cloudwatch", "cloudwatch"),
            ("glue", "glue"),
        )
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return summarize(
        event,
        **_clients(),
        bucket=os.environ["RESULTS_BUCKET"],
        table=os.environ["STATE_TABLE"],
        workgroup=os.environ["ATHENA_WORKGROUP"],
        database=os.environ["ATHENA_DATABASE"],
    )
