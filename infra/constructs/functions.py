"""A Python Lambda the iofleet way: staged code, own role, own log group, Powertools layer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import Duration, Fn, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.nag import ack
from infra.staging import stage_lambda

RUNTIME = lambda_.Runtime.PYTHON_3_14
POWERTOOLS_LAYER = "arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:017000801446:layer:AWSLambdaPowertoolsPythonV3-python314-x86_64:{version}"


class IofleetFunction(Construct):
    """`self.fn` runs `handler.handler` from lambdas/<name>/ with its own role and log group."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        staging_root: Path,
        layer_version: int,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_size: int = 512,
        description: str = "",
        reserved_concurrency: int | None = None,
        layers: Sequence[lambda_.ILayerVersion] = (),
    ) -> None:
        """`layers`: more layers after Powertools (Summarize's stats layer, infra.stats_layer)."""
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"iofleet {name} Lambda",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "Powertools",
            Fn.sub(POWERTOOLS_LAYER.format(version=layer_version)),
        )
        env = {
            "POWERTOOLS_SERVICE_NAME": "iofleet",
            "POWERTOOLS_METRICS_NAMESPACE": "iofleet",
            "LOG_LEVEL": "INFO",
            **(environment or {}),
        }
        self.fn = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(stage_lambda(name, staging_root))),
            role=self.role,
            log_group=self.log_group,
            layers=[layer, *layers],
            environment=env,
            timeout=timeout or Duration.seconds(60),
            memory_size=memory_size,
            reserved_concurrent_executions=reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            description=description or f"iofleet {name}",
        )
        ack(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions",
        )
