"""Results bucket (raw, curated, control, reports, Athena results) and the state table."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import ack
from iofleet.aws import keys


class Storage(Construct):
    def __init__(self, scope: Construct, id: str, *, retention_days: int) -> None:
        super().__init__(scope, id)
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
        )
        ack(
            self.access_logs,
            "AwsSolutions-S1",
            "This is the server access log bucket itself; logging it into itself would loop",
        )
        self.bucket = s3.Bucket(
            self,
            "Results",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            # an overwritten or deleted raw object keeps its earlier version: nothing a
            # retried or misbehaving writer does replaces a result silently
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="results/",
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="raw-retention",
                    prefix=keys.RAW_PREFIX,
                    expiration=Duration.days(retention_days),
                ),
                s3.LifecycleRule(
                    id="curated-retention",
                    prefix=keys.CURATED_PREFIX,
                    expiration=Duration.days(retention_days),
                ),
                s3.LifecycleRule(
                    id="control-retention",
                    prefix=keys.CONTROL_PREFIX,
                    expiration=Duration.days(retention_days),
                ),
                s3.LifecycleRule(
                    id="athena-results",
                    prefix=keys.ATHENA_PREFIX,
                    expiration=Duration.days(7),
                ),
                s3.LifecycleRule(
                    id="abort-multipart", abort_incomplete_multipart_upload_after=Duration.days(1)
                ),
                s3.LifecycleRule(
                    id="noncurrent-versions",
                    noncurrent_version_expiration=Duration.days(retention_days),
                ),
            ],
        )
        self.table = dynamodb.TableV2(
            self,
            "State",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute="expires_at",
            removal_policy=RemovalPolicy.RETAIN,
        )
