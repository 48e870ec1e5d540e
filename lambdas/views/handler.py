"""Views custom resource: create (or drop) the Athena views from iofleet/results/sql/ at deploy."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws.lambda_env import TRACED_MODULES
from iofleet.aws.views import handle

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)


@cache
def _athena() -> Any:
    return boto3.client("athena")


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    out = handle(event, _athena(), context.log_stream_name)
    logger.info("views", extra={"status": out["Status"], "reason": out.get("Reason")})
    return out
