"""Cleanup: end of a cell or a run, and the EventBridge rule for aborted/timed-out/failed executions."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws.cleanup import handle
from iofleet.aws.lambda_env import TRACED_MODULES

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)


@cache
def _clients() -> dict[str, Any]:
    return {
        n: boto3.client(c)
        for n, c in (
            ("ec2", "ec2"),
            ("efs", "efs"),
            ("ddb", "dynamodb"),
            ("fsx", "fsx"),
            ("s3", "s3"),
        )
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = handle(event, **_clients(), table=os.environ["STATE_TABLE"])
    logger.info("cleaned up", extra=out)
    return out
