"""PrepareCell: record the cell, create its start barrier, create or look up shared storage."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws import cell
from iofleet.aws.lambda_env import TRACED_MODULES
from iofleet.aws.launch import expires_at

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)


@cache
def _clients() -> dict[str, Any]:
    return {
        n: boto3.client(c)
        for n, c in (
            ("s3", "s3"),
            ("ddb", "dynamodb"),
            ("efs", "efs"),
            ("fsx", "fsx"),
            ("ec2", "ec2"),
        )
    }


def _network() -> dict[str, Any]:
    return {
        "subnet_ids": [s for s in os.environ.get("SUBNET_IDS", "").split(",") if s],
        "security_group": os.environ.get("STORAGE_SECURITY_GROUP", ""),
    }


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    c = _clients()
    if event.get("action") == "status":
        net = _network()
        return cell.status(
            event,
            efs=c["efs"],
            fsx=c["fsx"],
            subnet_ids=net["subnet_ids"],
            security_group=net["security_group"],
        )
    return cell.prepare(
        event,
        **c,
        network=_network(),
        subnet_ids=_network()["subnet_ids"],
        bucket=os.environ["RESULTS_BUCKET"],
        table=os.environ["STATE_TABLE"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        expires_at=expires_at(int(os.environ.get("STORAGE_TTL_S", str(7 * 24 * 3600)))),
    )
