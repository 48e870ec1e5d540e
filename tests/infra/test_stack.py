"""Fine-grained template assertions (no snapshots): what the issue's Fleet, Ingest,
Catalog, Orchestration and QuickSight sections promise."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

from iofleet.results import schema
from tests.infra.conftest import Synth, all_states, dump

# --- fleet ------------------------------------------------------------------------


def test_launch_template_requires_imdsv2_with_hop_limit_1(template: Any) -> None:
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {"MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1}}
            )
        },
    )


def test_launch_template_terminates_on_shutdown_without_key_pair(synth: Synth) -> None:
    (lt,) = synth.resources("AWS::EC2::LaunchTemplate").values()
    data = lt["Properties"]["LaunchTemplateData"]
    assert data["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert "KeyName" not in data


def test_launch_template_root_volume_is_encrypted(synth: Synth) -> None:
    (lt,) = synth.resources("AWS::EC2::LaunchTemplate").values()
    mappings = lt["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]
    assert all(m["Ebs"]["Encrypted"] is True for m in mappings)


def test_instance_security_group_has_no_ingress(synth: Synth) -> None:
    groups = synth.resources("AWS::EC2::SecurityGroup")
    instance_sg = next(v for k, v in groups.items() if "InstanceSg" in k)
    assert "SecurityGroupIngress" not in instance_sg["Properties"]
    ingress = synth.resources("AWS::EC2::SecurityGroupIngress").values()
    sg_id = next(k for k in groups if "InstanceSg" in k)
    assert all(i["Properties"]["GroupId"] != {"Fn::GetAtt": [sg_id, "GroupId"]} for i in ingress)


def test_shared_storage_accepts_only_nfs_and_lustre_from_the_fleet(synth: Synth) -> None:
    rules = [r["Properties"] for r in synth.resources("AWS::EC2::SecurityGroupIngress").values()]
    from_fleet = sorted(
        (p["IpProtocol"], p["FromPort"], p["ToPort"])
        for p in rules
        if "InstanceSg" in dump(p["SourceSecurityGroupId"])
    )
    # NFS v4.1 (EFS, FSx for OpenZFS) and Lustre's LNet ports (FSx for Lustre)
    assert from_fleet == [("tcp", 988, 988), ("tcp", 1018, 1023), ("tcp", 2049, 2049)]
    between_servers = sorted(
        (p["IpProtocol"], p["FromPort"], p["ToPort"])
        for p in rules
        if "SharedStorageSg" in dump(p["SourceSecurityGroupId"])
    )
    assert between_servers == [("tcp", 988, 988), ("tcp", 1018, 1023)]
    assert all("SharedStorageSg" in dump(p["GroupId"]) for p in rules)


def test_instances_reach_ssm_and_nothing_else_managed(synth: Synth) -> None:
    roles = synth.resources("AWS::IAM::Role")
    instance_role = next(v for k, v in roles.items() if "InstanceRole" in k)
    assert "AmazonSSMManagedInstanceCore" in dump(instance_role["Properties"]["ManagedPolicyArns"])
    assert len(instance_role["Properties"]["ManagedPolicyArns"]) == 1


def _policy_statements(synth: Synth, role_fragment: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role_fragment in dump(policy["Properties"]["Roles"]):
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def test_instance_role_writes_only_raw_and_touches_only_barrier_items(synth: Synth) -> None:
    statements = _policy_statements(synth, "InstanceRole")
    puts = [
        s
        for s in statements
        if "s3:PutObject" in dump(s["Action"]) and "MountCellBucket" not in s.get("Sid", "")
    ]
    assert len(puts) == 1
    assert "/raw/${aws:userid}/*" in dump(puts[0]["Resource"])  # tests/infra/test_instance_s3.py
    ddb = next(s for s in statements if "dynamodb:UpdateItem" in dump(s["Action"]))
    assert ddb["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["barrier#*"]
    # the attributes the agent's barrier reads and writes (iofleet/aws/barrier.py), no others
    assert ddb["Condition"]["ForAllValues:StringLike"]["dynamodb:Attributes"] == [
        "pk",
        "sk",
        "arrived",
        "parties",
        "release_us",
    ]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not any(a.endswith("*") for a in actions)
    assert {
        "states:SendTaskSuccess",
        "states:SendTaskFailure",
        "states:SendTaskHeartbeat",
    } <= actions


# --- storage ----------------------------------------------------------------------


def test_buckets_block_public_access_and_are_encrypted(synth: Synth) -> None:
    buckets = synth.resources("AWS::S3::Bucket")
    assert len(buckets) == 2
    for bucket in buckets.values():
        props = bucket["Properties"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]


def test_every_bucket_policy_denies_insecure_transport(synth: Synth) -> None:
    policies = synth.resources("AWS::S3::BucketPolicy").values()
    assert len(policies) == 2
    for policy in policies:
        denies = [
            s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"
        ]
        assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


def test_raw_results_expire_after_the_retention(template: Any) -> None:
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [
                        Match.object_like(
                            {"Prefix": "raw/", "ExpirationInDays": 90, "Status": "Enabled"}
                        )
                    ]
                )
            }
        },
    )


def test_state_table_is_on_demand_with_pitr(template: Any) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::GlobalTable",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "Replicas": [
                Match.object_like(
                    {"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}}
                )
            ],
        },
    )


# --- ingest -----------------------------------------------------------------------


def test_raw_queue_has_a_dead_letter_queue(synth: Synth) -> None:
    queues = synth.resources("AWS::SQS::Queue")
    raw = next(v for k, v in queues.items() if "RawObjects" in k)
    dlq_id = next(k for k in queues if "DeadLetters" in k)
    policy = raw["Properties"]["RedrivePolicy"]
    assert policy == {"deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]}, "maxReceiveCount": 5}


def test_queues_are_encrypted(synth: Synth) -> None:
    for queue in synth.resources("AWS::SQS::Queue").values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True


def test_raw_objects_notify_the_queue(template: Any) -> None:
    template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "NotificationConfiguration": {
                "QueueConfigurations": [
                    Match.object_like(
                        {
                            "Events": ["s3:ObjectCreated:*"],
                            "Filter": {
                                "Key": {
                                    "FilterRules": Match.array_with(
                                        [{"Name": "prefix", "Value": "raw/"}]
                                    )
                                }
                            },
                        }
                    )
                ]
            }
        },
    )


def test_ingest_reports_partial_batch_failures(template: Any) -> None:
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"FunctionResponseTypes": ["ReportBatchItemFailures"], "BatchSize": 10},
    )


def test_every_function_has_its_own_role_and_log_group(synth: Synth) -> None:
    functions = {
        k: v
        for k, v in synth.resources("AWS::Lambda::Function").items()
        if "BucketNotificationsHandler" not in k
    }
    assert len(functions) == 8
    roles = [dump(f["Properties"]["Role"]) for f in functions.values()]
    groups = [dump(f["Properties"]["LoggingConfig"]["LogGroup"]) for f in functions.values()]
    assert len(set(roles)) == len(roles) and len(set(groups)) == len(groups)
    assert {f["Properties"]["TracingConfig"]["Mode"] for f in functions.values()} == {"Active"}


def test_summarize_may_read_cloudwatch_burst_metrics_and_write_only_their_object(
    synth: Synth,
) -> None:
    statements = _policy_statements(synth, "SummarizeFn")
    (cloudwatch,) = [s for s in statements if "cloudwatch:" in dump(s["Action"])]
    assert (cloudwatch["Action"], cloudwatch["Resource"]) == ("cloudwatch:GetMetricData", "*")
    puts = dump([s["Resource"] for s in statements if "s3:PutObject" in dump(s["Action"])])
    assert "/curated/burst_metrics/*" in puts and "/curated/*" not in puts


# --- catalog ----------------------------------------------------------------------


def _glue_tables(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        t["Properties"]["TableInput"]["Name"]: t["Properties"]["TableInput"]
        for t in synth.resources("AWS::Glue::Table").values()
    }


def test_glue_columns_equal_the_shared_schema(synth: Synth) -> None:
    # every schema table is a landing (JSON) and a Parquet table with its columns;
    # run_id is their partition key (the view `t` puts it back in schema order)
    tables = _glue_tables(synth)
    stored = (*schema.TABLES, *schema.LEGACY_TABLES)
    assert set(tables) == {f"{t.name}{s}" for t in stored for s in ("_landing", "_parquet")}
    for table in stored:
        for suffix in ("_landing", "_parquet"):
            got = tables[table.name + suffix]
            columns = [(c["Name"], c["Type"]) for c in got["StorageDescriptor"]["Columns"]]
            partitions = [(k["Name"], k["Type"]) for k in got["PartitionKeys"]]
            assert columns == [(c.name, c.type) for c in table.columns if c.name != "run_id"]
            assert partitions == [("run_id", "string")]


def test_the_per_bin_tables_of_before_decision_46_stay_as_they_were(synth: Synth) -> None:
    # runs ingested before decision 46 have their bins there (registered partitions):
    # the same logical ids (a new id would replace the table and lose its partitions),
    # names and description as the stack had them then
    resources = synth.resources("AWS::Glue::Table")
    for kind, suffix in (("Landing", "_landing"), ("Parquet", "_parquet")):
        (found,) = [
            (logical, r["Properties"]["TableInput"])
            for logical, r in resources.items()
            if f"TableFioLatencyBins{kind}" in logical
        ]
        logical, table = found
        assert table["Name"] == "fio_latency_bins" + suffix
        assert table["Description"].startswith(
            "fio json+ completion-latency histogram bins, one row per non-empty bin ("
        )
    # and the view that reads them: fio_latency_histograms (iofleet/aws/compact.py)
    from iofleet.aws import compact

    view = compact.table_views()["fio_latency_histograms"]
    assert "FROM fio_latency_bins_parquet" in view and "FROM fio_latency_bins_landing" in view


def test_landing_tables_read_json_and_parquet_tables_parquet_per_run(synth: Synth) -> None:
    tables = _glue_tables(synth)
    for table in (*schema.TABLES, *schema.LEGACY_TABLES):
        landing = tables[f"{table.name}_landing"]["StorageDescriptor"]
        parquet = tables[f"{table.name}_parquet"]["StorageDescriptor"]
        assert landing["SerdeInfo"]["SerializationLibrary"].endswith("JsonSerDe")
        assert parquet["SerdeInfo"]["SerializationLibrary"].endswith("ParquetHiveSerDe")
        assert parquet["InputFormat"].endswith("MapredParquetInputFormat")
        assert f"/curated/{table.name}/" in dump(landing["Location"])
        assert f"/curated/parquet/{table.name}/" in dump(parquet["Location"])
        # partitions are registered as they are written (ingest, INSERT INTO): no
        # projection, no crawler, no MSCK REPAIR
        for t in (f"{table.name}_landing", f"{table.name}_parquet"):
            assert "projection" not in dump(tables[t]["Parameters"])
    assert not synth.resources("AWS::Glue::Crawler")


def test_ingest_registers_only_landing_partitions(synth: Synth) -> None:
    (ingest,) = [
        f
        for f in synth.resources("AWS::Lambda::Function").values()
        if f["Properties"].get("Description", "").startswith("iofleet: raw artifacts")
    ]
    assert ingest["Properties"]["Environment"]["Variables"]["GLUE_DATABASE"] == "iofleet"
    statements = _policy_statements(synth, "IngestRole")
    glue = {s["Action"]: dump(s["Resource"]) for s in statements if "glue:" in dump(s["Action"])}
    assert set(glue) == {"glue:CreatePartition", "glue:GetPartition"}
    assert "table/iofleet/*_landing" in glue["glue:CreatePartition"]
    assert "table/iofleet/*_parquet" in glue["glue:GetPartition"]
    assert "_parquet" not in glue["glue:CreatePartition"]


def test_summarize_compacts_into_the_parquet_prefix_only(synth: Synth) -> None:
    statements = _policy_statements(synth, "SummarizeFn")
    deletes = [s for s in statements if "s3:DeleteObject" in dump(s["Action"])]
    assert len(deletes) == 1 and "/curated/parquet/*" in dump(deletes[0]["Resource"])
    glue = " ".join(dump(s["Action"]) for s in statements if "glue:" in dump(s["Action"]))
    for action in ("glue:CreatePartition", "glue:DeletePartition", "glue:GetPartitions"):
        assert action in glue
    assert "glue:DeleteTable" not in glue and "glue:CreateTable" not in glue


def test_athena_workgroup_engine_v3_encrypted_enforced_with_cutoff(template: Any) -> None:
    template.has_resource_properties(
        "AWS::Athena::WorkGroup",
        {
            "WorkGroupConfiguration": Match.object_like(
                {
                    "EnforceWorkGroupConfiguration": True,
                    "BytesScannedCutoffPerQuery": Match.any_value(),
                    "EngineVersion": {"SelectedEngineVersion": "Athena engine version 3"},
                    "ResultConfiguration": Match.object_like(
                        {"EncryptionConfiguration": {"EncryptionOption": "SSE_S3"}}
                    ),
                }
            )
        },
    )


def test_views_are_created_at_deploy_by_a_custom_resource(synth: Synth) -> None:
    (views,) = synth.resources("Custom::IofleetViews").values()
    assert views["Properties"]["Database"] == "iofleet"
    assert len(views["Properties"]["SqlFingerprint"]) == 16


def test_named_queries_for_seeds_000_and_004(synth: Synth) -> None:
    names = {q["Properties"]["Name"] for q in synth.resources("AWS::Athena::NamedQuery").values()}
    assert names == {"seed-000-iops-vs-promised", "seed-004-build-time-percentiles"}


# --- orchestration ----------------------------------------------------------------


def test_state_machine_is_standard_and_logged(template: Any) -> None:
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineType": "STANDARD",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL"}),
        },
    )


def test_definition_is_jsonpath(asl: dict[str, Any]) -> None:
    assert asl.get("QueryLanguage", "JSONPath") == "JSONPath"
    assert "{%" not in dump(asl)


def test_fleet_is_a_distributed_map_of_task_token_slots(asl: dict[str, Any]) -> None:
    states = all_states(asl)
    fleet = states["Fleet"]
    assert fleet["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED",
        "ExecutionType": "STANDARD",
    }
    slot = fleet["ItemProcessor"]["States"]["RunSlot"]
    assert slot["Resource"].endswith(":states:::lambda:invoke.waitForTaskToken")
    assert slot["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    assert slot["HeartbeatSecondsPath"] == "$.heartbeat_s"
    assert slot["TimeoutSecondsPath"] == "$.timeout_s"
    # the instance beats every third of the heartbeat it is handed
    assert slot["Parameters"]["Payload"]["heartbeat_s.$"] == "$.heartbeat_s"
    populate = all_states(asl)["PopulateOnce"]
    assert populate["HeartbeatSecondsPath"] == "$.cell.heartbeat_s"
    assert populate["Parameters"]["Payload"]["heartbeat_s.$"] == "$.cell.heartbeat_s"


def test_a_new_file_system_is_checked_every_15_s_until_available(asl: dict[str, Any]) -> None:
    # the default of the `storage_poll_s` context key (the local-cloud tests set 1)
    states = all_states(asl)
    assert states["WaitForStorage"]["Type"] == "Wait"
    assert states["WaitForStorage"]["Seconds"] == 15
    assert states["WaitForStorage"]["Next"] == "CheckStorage"


def test_failed_slot_records_its_reason_then_fails_with_its_own_error(
    asl: dict[str, Any],
) -> None:
    processor = all_states(asl)["Fleet"]["ItemProcessor"]
    states = processor["States"]
    (catch,) = states["RunSlot"]["Catch"]
    assert catch == {
        "ErrorEquals": ["States.ALL"],
        "ResultPath": "$.error",
        "Next": "RecordSlotFailure",
    }
    record = states["RecordSlotFailure"]
    assert record["Parameters"]["Payload"]["scope"] == "slot"
    assert record["Parameters"]["Payload"]["error.$"] == "$.error"
    assert states[record["Next"]] == {
        "Type": "Fail",
        "ErrorPath": "$.recorded.result.Error",
        "CausePath": "$.recorded.result.Cause",
    }
    (unrecorded,) = record["Catch"]
    assert states[unrecorded["Next"]]["Type"] == "Fail"


def test_cells_run_one_at_a_time_unless_the_matrix_says_otherwise(asl: dict[str, Any]) -> None:
    assert asl["States"]["Cells"]["MaxConcurrencyPath"] == "$.cell_concurrency"


def test_every_fleet_path_catches_into_cleanup(asl: dict[str, Any]) -> None:
    states = all_states(asl)
    cell = asl["States"]["Cells"]["ItemProcessor"]["States"]
    guarded = [
        n for n, s in cell.items() if s["Type"] in ("Task", "Map") and not n.startswith("Cleanup")
    ]
    assert {"PrepareCell", "CheckStorage", "PopulateOnce", "Fleet"} <= set(guarded)
    for name in guarded:
        (catch,) = states[name]["Catch"]
        assert catch["ErrorEquals"] == ["States.ALL"] and catch["ResultPath"] == "$.error"
        nxt = catch["Next"]
        while not nxt.startswith("Cleanup"):
            nxt = states[nxt]["Next"]
        assert nxt == "CleanupFailedCell"


def test_failed_cell_continues_unless_stop_on_failure(asl: dict[str, Any]) -> None:
    cell = asl["States"]["Cells"]["ItemProcessor"]["States"]
    assert cell["CleanupFailedCell"]["Next"] == "StopOnFailure?"
    choice = cell["StopOnFailure?"]
    assert choice["Choices"][0]["Variable"] == "$.stop_on_failure"
    assert cell[choice["Choices"][0]["Next"]]["Type"] == "Fail"
    assert cell[choice["Default"]]["Type"] == "Succeed"


def test_run_level_failures_clean_up_before_failing(asl: dict[str, Any]) -> None:
    states = asl["States"]
    for name in ("Cells", "Summarize"):
        assert states[name]["Catch"][0]["Next"] == "CleanupFailedRun"
    assert states["CleanupFailedRun"]["Next"] == "RunFailed"
    assert states["Summarize"]["Next"] == "CleanupRun"


def test_bad_matrix_fails_with_the_error_lines_as_cause(asl: dict[str, Any]) -> None:
    states = asl["States"]
    choice = states["Valid?"]
    invalid = states[choice["Choices"][0]["Next"]]
    fail = states[invalid["Next"]]
    assert fail == {"Type": "Fail", "Error": "MatrixInvalid", "CausePath": "$.error_text"}


def test_abort_rule_sends_failed_executions_to_cleanup(synth: Synth) -> None:
    rules = synth.resources("AWS::Events::Rule")
    abort = next(v for k, v in rules.items() if "AbortRule" in k)["Properties"]
    assert abort["EventPattern"]["detail"]["status"] == ["ABORTED", "TIMED_OUT", "FAILED"]
    assert "CleanupFn" in dump(abort["Targets"])


def test_janitor_runs_on_a_schedule(synth: Synth) -> None:
    rules = synth.resources("AWS::Events::Rule")
    janitor = next(v for k, v in rules.items() if "Janitor" in k)["Properties"]
    assert janitor["ScheduleExpression"] == "rate(1 hour)"
    assert "JanitorFn" in dump(janitor["Targets"])


def test_outputs(synth: Synth) -> None:
    assert {
        "StateMachineArn",
        "StateMachineConsoleUrl",
        "ResultsBucket",
        "AthenaWorkGroup",
        "AthenaDatabase",
    } <= set(synth.template["Outputs"])


# --- QuickSight (opt-in) ------------------------------------------------------------


def test_no_quicksight_by_default(synth: Synth) -> None:
    assert not [
        r for r in synth.template["Resources"].values() if r["Type"].startswith("AWS::QuickSight::")
    ]


def test_quicksight_when_a_principal_is_given(synth_quicksight: Synth) -> None:
    kinds = sorted(
        r["Type"]
        for r in synth_quicksight.template["Resources"].values()
        if r["Type"].startswith("AWS::QuickSight::")
    )
    assert kinds == [
        "AWS::QuickSight::Dashboard",
        *["AWS::QuickSight::DataSet"] * 3,
        "AWS::QuickSight::DataSource",
    ]
    by_id = {
        r["Properties"]["DataSetId"]: r
        for r in synth_quicksight.resources("AWS::QuickSight::DataSet").values()
    }
    cells = next(v for k, v in by_id.items() if k.endswith("-cell-percentiles"))
    table = next(iter(cells["Properties"]["PhysicalTableMap"].values()))["RelationalTable"]
    assert (table["Schema"], table["Name"]) == ("iofleet", "cell_percentiles")


def _dashboard(synth_quicksight: Synth) -> dict[str, Any]:
    (dash,) = synth_quicksight.resources("AWS::QuickSight::Dashboard").values()
    return dict(dash["Properties"]["Definition"])


def _data_sets(synth_quicksight: Synth) -> dict[str, dict[str, Any]]:
    """Data set logical id -> its PhysicalTableMap entry."""
    return {
        logical: next(iter(r["Properties"]["PhysicalTableMap"].values()))
        for logical, r in synth_quicksight.resources("AWS::QuickSight::DataSet").items()
    }


def test_quicksight_dashboard_has_the_decision_table_and_a_percentile_chart_per_metric(
    synth_quicksight: Synth,
) -> None:
    from iofleet.report.model import METRIC_TITLES
    from iofleet.results.sql import query_sql

    definition = _dashboard(synth_quicksight)
    (sheet,) = definition["Sheets"]
    kinds = [next(iter(v)) for v in sheet["Visuals"]]
    # then: the decision table, one bar chart per metric, and the per-cell table
    assert kinds == ["TableVisual", *["BarChartVisual"] * len(METRIC_TITLES), "TableVisual"]
    data_sets = _data_sets(synth_quicksight)
    declared = {
        d["Identifier"]: d["DataSetArn"]["Fn::GetAtt"][0]
        for d in definition["DataSetIdentifierDeclarations"]
    }
    decision_sql = data_sets[declared["decision"]]["CustomSql"]["SqlQuery"]
    ladder_sql = data_sets[declared["ladders"]]["CustomSql"]["SqlQuery"]
    cells = data_sets[declared["cellpercentiles"]]["RelationalTable"]
    # and: the decision table reads all of queries/decision.sql's rows (every statistic),
    # the charts its P50 rows, the per-cell table the cell_percentiles view
    body = "\n".join(
        ln for ln in query_sql("decision").splitlines() if not ln.lstrip().startswith("--")
    )
    assert decision_sql == body
    assert ladder_sql == f"SELECT * FROM (\n{body}\n) d WHERE stat = 'p50'"
    assert cells["Name"] == "cell_percentiles"
    decision = sheet["Visuals"][0]["TableVisual"]
    wells = decision["ChartConfiguration"]["FieldWells"]["TableUnaggregatedFieldWells"]
    columns = [f["Column"] for f in wells["Values"]]
    assert {c["DataSetIdentifier"] for c in columns} == {"decision"}
    # the CLI decision table's columns: rank, cost per run, slot, instance-hour, 1k IOPS and
    # build, the target (meets / CHEAPEST) and the Pareto front
    assert [c["ColumnName"] for c in columns] == [
        "workload_index", "workload", "job", "direction", "metric", "stat", "rank",
        "configuration", "repeats", "slots", "unit", "value", "p0", "p50", "p100",
        "usd_per_run", "usd_per_slot", "usd_per_instance_hour", "usd_per_1k_iops",
        "usd_per_build", "cost_complete", "meets_target", "pareto_front",
    ]  # fmt: skip
    # and: each chart shows P0/P50/P75/P90/P98/P100 of the ladders set, filtered to its metric
    filters = {g["FilterGroupId"]: g for g in definition["FilterGroups"]}
    charted = []
    for v in sheet["Visuals"][1:-1]:
        chart = v["BarChartVisual"]
        agg = chart["ChartConfiguration"]["FieldWells"]["BarChartAggregatedFieldWells"]
        columns = [m["NumericalMeasureField"]["Column"] for m in agg["Values"]]
        assert [c["ColumnName"] for c in columns] == ["p0", "p50", "p75", "p90", "p98", "p100"]
        assert {c["DataSetIdentifier"] for c in columns} == {"ladders"}
        metric = chart["VisualId"].removeprefix("ladder-")
        group = filters[f"metric-{metric}"]
        scope = group["ScopeConfiguration"]["SelectedSheets"]["SheetVisualScopingConfigurations"]
        assert scope[0]["VisualIds"] == [chart["VisualId"]]
        custom = group["Filters"][0]["CategoryFilter"]["Configuration"]["CustomFilterConfiguration"]
        assert (custom["MatchOperator"], custom["CategoryValue"]) == ("EQUALS", metric)
        charted.append(metric)
    assert charted == list(METRIC_TITLES)
    # and: one run at a time, picked in a dropdown, on every visual
    run = filters["run"]
    assert run["CrossDataset"] == "ALL_DATASETS"
    assert (
        run["ScopeConfiguration"]["SelectedSheets"]["SheetVisualScopingConfigurations"][0]["Scope"]
        == "ALL_VISUALS"
    )
    (control,) = sheet["FilterControls"]
    assert control["Dropdown"]["SourceFilterId"] == "run"


def test_quicksight_custom_sql_columns_are_the_querys_columns(synth_quicksight: Synth) -> None:
    # the columns declared on the custom-SQL data sets are the ones the query returns
    from iofleet.results.sql import query_sql
    from iofleet.results.warehouse import Warehouse, transpile_view

    with Warehouse(":memory:") as wh:
        cur = wh.con.execute(f"SELECT * FROM ({transpile_view(query_sql('decision'))}) LIMIT 0")
        columns = [d[0] for d in cur.description]
    custom = [t["CustomSql"] for t in _data_sets(synth_quicksight).values() if "CustomSql" in t]
    assert len(custom) == 2
    for table in custom:
        assert [c["Name"] for c in table["Columns"]] == columns


# --- least privilege (issue 11, part 5) --------------------------------------------


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_run_instances_only_through_the_launch_template_with_this_stacks_tag(
    synth: Synth,
) -> None:
    statements = _policy_statements(synth, "LaunchFnRole")
    runs = [s for s in statements if "ec2:RunInstances" in _actions(s)]
    assert runs, "the launch role must be able to run instances"
    for s in runs:
        # never on `*`, always tied to this stack's launch template
        assert s["Resource"] != "*" and "*" not in (
            s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        )
        assert "ec2:LaunchTemplate" in dump(s["Condition"]), s
        assert "LaunchTemplate" in dump(s["Condition"]["ArnEquals"])
    created = next(s for s in runs if ":instance/*" in dump(s["Resource"]))
    assert ":volume/*" in dump(created["Resource"])
    assert created["Condition"]["StringEquals"] == {
        "aws:RequestTag/iofleet:stack": synth.stack.stack_name
    }
    assert "iofleet:run-id" in created["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"]
    network = next(s for s in runs if ":subnet/" in dump(s["Resource"]))
    assert ":security-group/" in dump(network["Resource"])
    assert ":subnet/*" not in dump(network["Resource"])


def test_create_tags_only_inside_run_instances(synth: Synth) -> None:
    statements = _policy_statements(synth, "LaunchFnRole")
    tags = [s for s in statements if "ec2:CreateTags" in _actions(s)]
    assert tags
    for s in tags:
        assert _actions(s) == ["ec2:CreateTags"]
        assert s["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}


def test_cleanup_and_janitor_delete_only_this_stacks_resources(synth: Synth) -> None:
    for fn in ("Cleanup", "Janitor"):
        statements = _policy_statements(synth, f"{fn}FnRole")
        destructive = [
            s
            for s in statements
            if {"ec2:TerminateInstances", "elasticfilesystem:DeleteFileSystem"} & set(_actions(s))
        ]
        assert len(destructive) == 2, fn
        for s in destructive:
            assert s["Condition"] == {
                "StringEquals": {"aws:ResourceTag/iofleet:stack": synth.stack.stack_name}
            }


def test_functions_know_their_stack_for_the_tag(template: Any) -> None:
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Description": "iofleet: terminate anything tagged iofleet:* past its expiry",
            "Environment": {"Variables": Match.object_like({"IOFLEET_STACK": "IofleetStack"})},
        },
    )


def test_state_machine_logs_carry_no_execution_data(template: Any) -> None:
    # inputs, outputs and task parameters hold task tokens and matrices
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {"LoggingConfiguration": Match.object_like({"IncludeExecutionData": False})},
    )


def test_ingest_has_reserved_concurrency_and_a_matching_sqs_cap(synth: Synth) -> None:
    ingest = [
        r
        for r in synth.resources("AWS::Lambda::Function").values()
        if "raw artifacts" in r["Properties"].get("Description", "")
    ]
    assert len(ingest) == 1
    reserved = ingest[0]["Properties"]["ReservedConcurrentExecutions"]
    assert reserved == 10
    (mapping,) = synth.resources("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": reserved}


def test_results_bucket_keeps_replaced_objects(synth: Synth) -> None:
    results = [
        r
        for r in synth.resources("AWS::S3::Bucket").values()
        if "LoggingConfiguration" in r["Properties"]
    ]
    assert len(results) == 1
    props = results[0]["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = props["LifecycleConfiguration"]["Rules"]
    assert any("NoncurrentVersionExpiration" in r for r in rules)


# --- the EC2 API at fleet scale (issue 11, part 4) ------------------------------------


def test_fleet_launches_in_waves_before_each_slot_task(asl: dict[str, Any]) -> None:
    fleet = all_states(asl)["Fleet"]
    processor = fleet["ItemProcessor"]
    wave = processor["States"][processor["StartAt"]]
    # each slot first waits for its wave (launch.launch_schedule), then launches
    assert wave["Type"] == "Wait" and wave["SecondsPath"] == "$.launch_after_s"
    assert wave["Next"] == "RunSlot"
    assert fleet["ItemSelector"]["slot_index.$"] == "$$.Map.Item.Value.slot_index"
    assert fleet["ItemSelector"]["launch_after_s.$"] == "$$.Map.Item.Value.launch_after_s"
    # no cap below the fleet: every slot's child lives until its slot is done, and the
    # slots wait for each other at the barrier; the rate is the waves, not MaxConcurrency
    assert fleet["MaxConcurrency"] >= 1000
    assert "ItemBatcher" not in fleet


def test_throttled_launch_is_retried_with_full_jitter_and_capacity_is_not(
    asl: dict[str, Any],
) -> None:
    slot = all_states(asl)["Fleet"]["ItemProcessor"]["States"]["RunSlot"]
    (throttled,) = [r for r in slot["Retry"] if "LaunchThrottled" in r["ErrorEquals"]]
    assert throttled == {
        "ErrorEquals": ["LaunchThrottled", "LaunchUnavailable"],
        "IntervalSeconds": 5,
        "MaxAttempts": 4,
        "BackoffRate": 2,
        "MaxDelaySeconds": 60,
        "JitterStrategy": "FULL",
    }
    retried = {e for r in slot["Retry"] for e in r["ErrorEquals"]}
    assert "InsufficientCapacity" not in retried and "States.ALL" not in retried


def test_launch_knows_each_subnets_zone_and_may_update_the_slot_item(synth: Synth) -> None:
    (launch,) = [
        r
        for r in synth.resources("AWS::Lambda::Function").values()
        if r["Properties"].get("Description", "").startswith("iofleet: launch one instance")
    ]
    variables = launch["Properties"]["Environment"]["Variables"]
    assert "SUBNET_IDS" in variables and "Fn::GetAZs" in dump(variables["SUBNET_ZONES"])
    statements = _policy_statements(synth, "LaunchFnRole")
    ddb = {a for s in statements for a in _actions(s) if a.startswith("dynamodb:")}
    assert ddb == {"dynamodb:UpdateItem", "dynamodb:GetItem"}  # no PutItem over the retries
    # no Describe call was needed for the fallback: EC2 stays limited to RunInstances/CreateTags
    ec2 = {a for s in statements for a in _actions(s) if a.startswith("ec2:")}
    assert ec2 == {"ec2:RunInstances", "ec2:CreateTags"}


def test_launch_reads_exactly_the_ubuntu_ami_parameters_of_the_releases_it_can_launch(
    synth: Synth,
) -> None:
    from iofleet.aws import ec2
    from iofleet.plan.hosts import UBUNTU_RELEASES

    statements = [
        s for s in _policy_statements(synth, "LaunchFnRole") if "ssm:GetParameter" in _actions(s)
    ]
    assert len(statements) == 1 and _actions(statements[0]) == ["ssm:GetParameter"]
    resources = statements[0]["Resource"]
    assert isinstance(resources, list) and "*" not in dump(resources)
    # every resource is arn:<partition>:ssm:<region>::parameter<name>, the name spelled out
    names = sorted(r["Fn::Join"][1][-1].split("::parameter", 1)[1] for r in resources)
    assert names == sorted(ec2.ami_parameter_names())
    assert len(names) == 2 * len(UBUNTU_RELEASES)  # amd64 and arm64 per release
    assert any("/22.04/" in n for n in names) and any("/24.04/" in n for n in names)


def test_fsx_is_created_only_with_this_stacks_tag(synth: Synth) -> None:
    statements = _policy_statements(synth, "PrepareCellFnRole")
    creates = [s for s in statements if "fsx:CreateFileSystem" in _actions(s)]
    assert len(creates) == 1
    (create,) = creates
    assert sorted(_actions(create)) == ["fsx:CreateFileSystem", "fsx:TagResource"]
    assert ":fsx:" in dump(create["Resource"]) and ":file-system/*" in dump(create["Resource"])
    assert create["Condition"] == {
        "StringEquals": {"aws:RequestTag/iofleet:stack": synth.stack.stack_name}
    }
    slr = [s for s in statements if "iam:CreateServiceLinkedRole" in _actions(s)]
    assert len(slr) == 1
    assert slr[0]["Condition"] == {"StringEquals": {"iam:AWSServiceName": "fsx.amazonaws.com"}}
    assert "aws-service-role/fsx.amazonaws.com/" in dump(slr[0]["Resource"])


def test_cleanup_and_janitor_delete_only_this_stacks_fsx(synth: Synth) -> None:
    for fn in ("Cleanup", "Janitor"):
        statements = _policy_statements(synth, f"{fn}FnRole")
        deletes = [s for s in statements if "fsx:DeleteFileSystem" in _actions(s)]
        assert len(deletes) == 1, fn
        assert deletes[0]["Condition"] == {
            "StringEquals": {"aws:ResourceTag/iofleet:stack": synth.stack.stack_name}
        }
        finds = [s for s in statements if "fsx:DescribeFileSystems" in _actions(s)]
        assert finds, fn


# --- Mountpoint for S3 buckets (infra/mountpoint_grants.py) ------------------------


def _resources(statement: dict[str, Any]) -> list[str]:
    res = statement["Resource"]
    return [dump(r) for r in (res if isinstance(res, list) else [res])]


def test_mountpoint_buckets_are_created_deleted_and_mounted_only_under_this_stacks_prefix(
    synth: Synth,
) -> None:
    from iofleet.aws import s3mount

    prefix = s3mount.name_prefix(synth.stack.stack_name)
    bucket_actions = {
        "s3:CreateBucket",
        "s3:PutBucketTagging",
        "s3express:CreateBucket",
        "s3:DeleteBucket",
        "s3:DeleteObject",
        "s3express:DeleteBucket",
        "s3express:CreateSession",
        "s3:GetObject",
        "s3:PutObject",
    }
    found: dict[str, set[str]] = {}
    for role in ("PrepareCellFnRole", "CleanupFnRole", "JanitorFnRole", "InstanceRole"):
        for st in _policy_statements(synth, role):
            if not st.get("Sid", "").startswith(("CreateCell", "EmptyAndDelete", "MountCell")):
                continue
            found.setdefault(role, set()).update(_actions(st))
            # every grant names this stack's bucket prefix: no other bucket, no results bucket
            assert all(f"{prefix}*" in r for r in _resources(st)), (role, st)
            assert not any(a.endswith("*") for a in _actions(st))
    assert {"s3:CreateBucket", "s3express:CreateBucket"} <= found["PrepareCellFnRole"]
    for role in ("CleanupFnRole", "JanitorFnRole"):
        assert {"s3:DeleteBucket", "s3:DeleteObject", "s3express:DeleteBucket"} <= found[role]
        assert not {"s3:CreateBucket", "s3:PutObject"} & found[role]
    assert {"s3:PutObject", "s3:GetObject", "s3express:CreateSession"} <= found["InstanceRole"]
    assert not {"s3:CreateBucket", "s3:DeleteBucket"} & found["InstanceRole"]
    # and nothing else in the template may create or delete buckets
    for policy in synth.resources("AWS::IAM::Policy").values():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            if {"s3:CreateBucket", "s3:DeleteBucket", "s3express:CreateBucket"} & set(_actions(st)):
                assert all(f"{prefix}*" in r for r in _resources(st)), st
    assert bucket_actions  # the actions this test is about
