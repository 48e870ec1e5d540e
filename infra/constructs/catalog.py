"""Glue database + tables from `iofleet.results.schema`, the Athena workgroup, views and named queries."""

from __future__ import annotations

import hashlib
from pathlib import Path

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.constructs.functions import IofleetFunction
from infra.grants import allow_list, allow_objects
from infra.nag import ack
from iofleet.aws import compact, keys
from iofleet.results import schema

DATABASE = "iofleet"
BYTES_SCANNED_CUTOFF = 100 * 1024**3  # 100 GiB per query
SQL_DIR = Path(__file__).resolve().parents[2] / "iofleet" / "results" / "sql"

SEED_000_QUERY = """-- seed 000: measured fio IOPS per instance type (compare with its EBS-optimized ceiling)
SELECT run_id, instance_type, storage_label, storage_detail, workload, direction,
       slots, p0 AS iops_min, p50 AS iops_p50, p100 AS iops_max
FROM cell_percentiles
WHERE metric_source = 'fio' AND metric = 'iops'
ORDER BY run_id, instance_type, workload, direction
"""

SEED_004_QUERY = """-- seed 004: P0..P100 of application build time (seconds) per storage and fleet size
SELECT run_id, workload AS app, storage_label, storage_detail, fleet_size, slots AS builds,
       p0, p50, p75, p90, p98, p100
FROM cell_percentiles
WHERE metric_source = 'app'
ORDER BY run_id, app, storage_label, fleet_size
"""


def table_input(
    bucket_name: str, table: schema.Table, *, landing: bool
) -> glue.CfnTable.TableInputProperty:
    """`t_landing` (JSON lines, ingest) or `t_parquet` (Parquet, per-run compaction at
    Summarize), both partitioned by `run_id` with partitions registered in Glue as they
    are written (ingest, INSERT INTO): no crawler, no MSCK REPAIR, and a one-run query
    lists one partition (iofleet/aws/compact.py, docs/decisions.md)."""
    if landing:
        name, fmt = compact.landing_table(table.name), compact.JSON_FORMAT
        location = f"s3://{bucket_name}/{keys.CURATED_PREFIX}{table.name}/"
        params = {"classification": "json"}
        what = "landing JSON lines, one object per raw artifact"
    else:
        name, fmt = compact.parquet_table(table.name), compact.PARQUET_FORMAT
        location = compact.parquet_location(bucket_name, table.name)
        params = {"classification": "parquet", "parquet.compression": "SNAPPY"}
        what = "Parquet, a few objects per run, written at Summarize"
    return glue.CfnTable.TableInputProperty(
        name=name,
        description=f"{table.doc} ({what}; query the view {table.name})"[:2048],
        table_type="EXTERNAL_TABLE",
        parameters=params,
        partition_keys=[
            glue.CfnTable.ColumnProperty(
                name=compact.PARTITION_KEY, type="string", comment="run id"
            )
        ],
        storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
            location=location,
            input_format=fmt["InputFormat"],
            output_format=fmt["OutputFormat"],
            serde_info=glue.CfnTable.SerdeInfoProperty(
                serialization_library=fmt["SerdeInfo"]["SerializationLibrary"]
            ),
            columns=[
                glue.CfnTable.ColumnProperty(name=c.name, type=c.type, comment=c.doc or None)
                for c in compact.data_columns(table)
            ],
        ),
    )


def sql_fingerprint() -> str:
    h = hashlib.sha256()
    for path in sorted(SQL_DIR.glob("*.sql")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    for name, select in compact.table_views().items():  # they follow the schema
        h.update(name.encode())
        h.update(select.encode())
    return h.hexdigest()[:16]


class Catalog(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket,
        staging_root: Path,
        layer_version: int,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.database_name = DATABASE
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=stack.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=DATABASE,
                description="iofleet results (curated from raw/ by the ingest Lambda)",
            ),
        )
        self.tables: dict[str, glue.CfnTable] = {}
        # the legacy tables keep their logical ids and definitions (the per-bin
        # fio_latency_bins pair, decision 46): replacing one would drop its partitions,
        # the runs ingested before the layout change
        for t in (*schema.TABLES, *schema.LEGACY_TABLES):
            title = "".join(p.title() for p in t.name.split("_"))
            for landing, kind in ((True, "Landing"), (False, "Parquet")):
                cfn = glue.CfnTable(
                    self,
                    f"Table{title}{kind}",
                    catalog_id=stack.account,
                    database_name=DATABASE,
                    table_input=table_input(bucket.bucket_name, t, landing=landing),
                )
                cfn.node.add_dependency(self.database)
                self.tables[cfn.table_input.name] = cfn  # type: ignore[union-attr]

        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=f"iofleet-{stack.stack_name}".lower()[:128],
            description="iofleet queries: engine v3, encrypted results, bytes-scanned cutoff",
            state="ENABLED",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=BYTES_SCANNED_CUTOFF,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version="Athena engine version 3"
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{bucket.bucket_name}/{keys.ATHENA_PREFIX}",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )
        self.workgroup_name = self.workgroup.name

        for qid, name, sql in (
            ("Seed000", "seed-000-iops-vs-promised", SEED_000_QUERY),
            ("Seed004", "seed-004-build-time-percentiles", SEED_004_QUERY),
        ):
            q = athena.CfnNamedQuery(
                self,
                qid,
                database=DATABASE,
                query_string=sql,
                name=name,
                work_group=self.workgroup.name,
                description=sql.splitlines()[0].lstrip("- "),
            )
            q.node.add_dependency(self.workgroup)

        # Views from iofleet/results/sql/, created at deploy with Athena DDL.
        self.views_fn = IofleetFunction(
            self,
            "Views",
            name="views",
            staging_root=staging_root,
            layer_version=layer_version,
            timeout=Duration.minutes(10),
            description="iofleet: create the Athena views from iofleet/results/sql at deploy",
        )
        grant_athena(self.views_fn.role, stack, self.workgroup.name, bucket, write_catalog=True)
        self.views = CustomResource(
            self,
            "ViewsResource",
            service_token=self.views_fn.fn.function_arn,
            resource_type="Custom::IofleetViews",
            properties={
                "Database": DATABASE,
                "WorkGroup": self.workgroup.name,
                "SqlFingerprint": sql_fingerprint(),
            },
        )
        self.views.node.add_dependency(self.workgroup)
        for t in self.tables.values():
            self.views.node.add_dependency(t)


def grant_athena(
    role: iam.IRole,
    stack: Stack,
    workgroup: str,
    bucket: s3.IBucket,
    *,
    write_catalog: bool = False,
) -> None:
    """Run Athena queries in the workgroup over the iofleet database."""
    wg_arn = stack.format_arn(service="athena", resource="workgroup", resource_name=workgroup)
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "athena:StartQueryExecution",
                "athena:GetQueryExecution",
                "athena:GetQueryResults",
                "athena:StopQueryExecution",
            ],
            resources=[wg_arn],
        )
    )
    glue_actions = [
        "glue:GetDatabase",
        "glue:GetTable",
        "glue:GetTables",
        "glue:GetPartition",
        "glue:GetPartitions",
        "glue:BatchGetPartition",
    ]
    if write_catalog:
        glue_actions += ["glue:CreateTable", "glue:UpdateTable", "glue:DeleteTable"]
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=glue_actions,
            resources=[
                stack.format_arn(service="glue", resource="catalog"),
                stack.format_arn(service="glue", resource="database", resource_name=DATABASE),
                stack.format_arn(service="glue", resource="table", resource_name=f"{DATABASE}/*"),
            ],
        )
    )
    allow_list(role, bucket)
    allow_objects(
        role, bucket, keys.CURATED_PREFIX, ["s3:GetObject"], "Athena reads curated results"
    )
    allow_objects(
        role,
        bucket,
        keys.ATHENA_PREFIX,
        ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
        "Athena writes query results",
    )
    ack(
        role,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{DATABASE}/*]",
        "Athena reads every table and view of the iofleet database; views are created at deploy",
    )


def _glue_tables(stack: Stack, pattern: str) -> list[str]:
    return [
        stack.format_arn(service="glue", resource="catalog"),
        stack.format_arn(service="glue", resource="database", resource_name=DATABASE),
        stack.format_arn(service="glue", resource="table", resource_name=f"{DATABASE}/{pattern}"),
    ]


def grant_landing_partitions(role: iam.IRole, stack: Stack) -> None:
    """Ingest registers each run's partition of the landing tables (iofleet/aws/compact.py)."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["glue:CreatePartition"],
            resources=_glue_tables(stack, f"*{compact.LANDING_SUFFIX}"),
        )
    )
    role.add_to_principal_policy(  # a compacted run's landing partition stays deregistered
        iam.PolicyStatement(
            actions=["glue:GetPartition"],
            resources=_glue_tables(stack, f"*{compact.PARQUET_SUFFIX}"),
        )
    )
    ack(
        role,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{DATABASE}/*{compact.LANDING_SUFFIX}]",
        "ingest registers a run's partition in every landing table it writes; runs are unknown at deploy",
    )
    ack(
        role,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{DATABASE}/*{compact.PARQUET_SUFFIX}]",
        "ingest checks whether a run is compacted already (its Parquet partition); runs are unknown at deploy",
    )


def grant_compaction(role: iam.IRole, stack: Stack, bucket: s3.IBucket) -> None:
    """Summarize's compaction: Athena INSERT INTO the Parquet tables (it writes the objects
    and registers the partition with the caller's rights), old objects of a retried run
    deleted, landing partitions (de)registered. Reads: `grant_athena`."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "glue:CreatePartition",
                "glue:BatchCreatePartition",
                "glue:UpdatePartition",
                "glue:DeletePartition",
            ],
            resources=_glue_tables(stack, "*"),
        )
    )
    allow_objects(
        role,
        bucket,
        compact.PARQUET_PREFIX,
        [
            "s3:PutObject",
            "s3:DeleteObject",
            "s3:AbortMultipartUpload",
            "s3:ListMultipartUploadParts",
        ],
        "compaction writes (and on a retry replaces) each run's Parquet objects",
    )
