"""Raw object created -> SQS (+DLQ) -> ingest Lambda -> curated S3 objects + DynamoDB."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.catalog import DATABASE, grant_landing_partitions
from infra.constructs.functions import IofleetFunction
from infra.grants import allow_objects
from infra.nag import ack
from iofleet.aws import compact, keys


class Ingest(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.Bucket,
        table: dynamodb.ITableV2,
        staging_root: Path,
        layer_version: int,
        concurrency: int,
    ) -> None:
        super().__init__(scope, id)
        self.dlq = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.queue = sqs.Queue(
            self,
            "RawObjects",
            visibility_timeout=Duration.minutes(6),  # 6 x the Lambda timeout
            retention_period=Duration.days(4),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=5),
        )
        bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            s3n.SqsDestination(self.queue),
            s3.NotificationKeyFilter(prefix=keys.RAW_PREFIX, suffix=".json"),
        )
        handler = Stack.of(self).node.try_find_child(
            "BucketNotificationsHandler050a0587b7544547bf325f094a3db834"
        )
        if handler is not None:
            ack(
                handler,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                "CDK's own bucket-notification custom resource; it only writes its logs and configures this bucket's notifications",
            )
        self.function = IofleetFunction(
            self,
            "Ingest",
            name="ingest",
            staging_root=staging_root,
            layer_version=layer_version,
            environment={
                "RESULTS_BUCKET": bucket.bucket_name,
                "STATE_TABLE": table.table_name,
                compact.DATABASE_ENV: DATABASE,
            },
            timeout=Duration.minutes(1),
            memory_size=1024,
            description="iofleet: raw artifacts -> curated JSON lines + slot summaries",
            # a burst of thousands of raw objects must not take the account's Lambda concurrency
            reserved_concurrency=concurrency,
        )
        self.function.fn.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=10,
                max_batching_window=Duration.seconds(5),
                report_batch_item_failures=True,
                max_concurrency=concurrency,  # no more pollers than reserved instances
            )
        )
        role = self.function.role
        allow_objects(
            role, bucket, keys.RAW_PREFIX, ["s3:GetObject"], "ingest reads every raw artifact"
        )
        allow_objects(
            role, bucket, keys.CURATED_PREFIX, ["s3:PutObject"], "ingest writes curated rows"
        )
        # GetItem: which instance a slot was launched as (a raw object's writer must be it)
        table.grant(role, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem")
        grant_landing_partitions(role, Stack.of(self))
