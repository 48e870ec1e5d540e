"""Ingest: SQS batch of S3 raw-object notifications -> curated rows; partial batch failures."""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from iofleet.aws.compact import DATABASE_ENV, LandingPartitions
from iofleet.aws.curate import ingest_object, s3_keys_from_message
from iofleet.aws.lambda_env import TRACED_MODULES

logger = Logger(service="iofleet")
tracer = Tracer(patch_modules=TRACED_MODULES)
metrics = Metrics(namespace="iofleet")

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parser.models import SqsRecordModel


@cache
def _processor() -> BatchProcessor:
    """Powertools' SQS batch processor, each record parsed into the Parser's
    `SqsRecordModel`. Made at the first invoke: importing the Parser's models loads
    every event model Powertools has (about 30 modules of pydantic classes), which
    was a quarter of this handler's import."""
    from aws_lambda_powertools.utilities.parser.models import SqsRecordModel

    return BatchProcessor(event_type=EventType.SQS, model=SqsRecordModel)


@cache
def _clients() -> dict[str, Any]:
    clients: dict[str, Any] = {"s3": boto3.client("s3"), "ddb": boto3.client("dynamodb")}
    database = os.environ.get(DATABASE_ENV)
    if database:  # the deployed stack: register each run's landing partitions in Glue
        clients["partitions"] = LandingPartitions(
            boto3.client("glue"), database, os.environ["RESULTS_BUCKET"]
        )
    return clients


@tracer.capture_method
def record_handler(record: SqsRecordModel) -> None:
    for key in s3_keys_from_message(record.body):
        written = ingest_object(
            key, **_clients(), bucket=os.environ["RESULTS_BUCKET"], table=os.environ["STATE_TABLE"]
        )
        for table, n in written.items():
            metrics.add_metric(name=f"Rows_{table}", unit=MetricUnit.Count, value=n)
        logger.info("ingested", extra={"key": key, "rows": written})


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=_processor(), context=context
    )
