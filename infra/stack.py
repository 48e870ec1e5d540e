"""The iofleet stack: composes the constructs, tags them, exposes the outputs."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.config import DeployConfig
from infra.constructs.alarms import Alarms
from infra.constructs.catalog import Catalog
from infra.constructs.dashboard import Dashboard
from infra.constructs.fleet import Fleet
from infra.constructs.ingest import Ingest
from infra.constructs.orchestration import Orchestration
from infra.constructs.storage import Storage


class IofleetStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        staging_root: Path,
        **kwargs: object,
    ) -> None:
        super().__init__(
            scope, id, description="iofleet: storage benchmarks at fleet scale", **kwargs
        )  # type: ignore[arg-type]
        self.config = config
        layer = config.powertools_layer_version
        self.storage = Storage(self, "Storage", retention_days=config.results_retention_days)
        self.catalog = Catalog(
            self,
            "Catalog",
            bucket=self.storage.bucket,
            staging_root=staging_root,
            layer_version=layer,
        )
        self.fleet = Fleet(
            self,
            "Fleet",
            vpc_id=config.vpc_id,
            bucket=self.storage.bucket,
            table=self.storage.table,
            staging_root=staging_root,
        )
        self.orchestration = Orchestration(
            self,
            "Orchestration",
            bucket=self.storage.bucket,
            table=self.storage.table,
            fleet=self.fleet,
            database=self.catalog.database_name,
            workgroup=self.catalog.workgroup_name,
            max_instances_per_run=config.max_instances_per_run,
            storage_poll_s=config.storage_poll_s,
            staging_root=staging_root,
            layer_version=layer,
        )
        self.ingest = Ingest(
            self,
            "Ingest",
            bucket=self.storage.bucket,
            table=self.storage.table,
            staging_root=staging_root,
            layer_version=layer,
            concurrency=config.ingest_concurrency,
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            email=config.alarm_email,
            dlq=self.ingest.dlq,
            state_machine=self.orchestration.state_machine,
        )
        self.dashboard: Dashboard | None = None
        if config.quicksight_principal_arn:
            self.dashboard = Dashboard(
                self,
                "Dashboard",
                principal_arn=config.quicksight_principal_arn,
                database=self.catalog.database_name,
                workgroup=self.catalog.workgroup_name,
            )
        Tags.of(self).add("iofleet:stack", id)

        sm = self.orchestration.state_machine
        CfnOutput(self, "StateMachineArn", value=sm.state_machine_arn)
        CfnOutput(
            self,
            "StateMachineConsoleUrl",
            value=f"https://{self.region}.console.aws.amazon.com/states/home?region={self.region}#/statemachines/view/{sm.state_machine_arn}",
        )
        CfnOutput(self, "ResultsBucket", value=self.storage.bucket.bucket_name)
        CfnOutput(self, "AthenaWorkGroup", value=self.catalog.workgroup_name)
        CfnOutput(self, "AthenaDatabase", value=self.catalog.database_name)
