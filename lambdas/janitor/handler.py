"""Janitor (hourly): terminate or delete anything tagged iofleet:* past its iofleet:expires-at."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws.janitor import sweep
from iofleet.aws.lambda_env import TRACED_MODULES

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)


@cache
def _clients() -> dict[str, Any]:
    return {
        "ec2": boto3.client("ec2"),
        "efs": boto3.client("efs"),
        "fsx": boto3.client("fsx"),
        "s3": boto3.client("s3"),
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = sweep(**_clients())
    logger.info("swept", extra=out)
    return out
