"""The Standard (JSONPath) state machine, its Lambdas, the abort rule and the janitor.

Shape (see docs/internals.md for the payloads):

    Plan -> Valid? -> Cells (Map over cells, sequential by default)
                         each cell: CellFlow fragment
                           PrepareCell -> StorageReady? (poll) -> Populate? -> Fleet
                           (Distributed Map over the slots, each waits for its launch wave,
                            then one task token per slot;
                            a failed slot: RecordSlotFailure -> SlotFailed)
                           -> CleanupCell; any failure -> CleanupFailedCell -> StopOnFailure?
                   -> Summarize -> CleanupRun -> Done
    Plan invalid  -> Fail(MatrixInvalid, cause = the error lines)
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.constructs.catalog import grant_athena, grant_compaction
from infra.constructs.fleet import Fleet
from infra.constructs.functions import RUNTIME, IofleetFunction
from infra.grants import allow_objects
from infra.mountpoint_grants import grant_mountpoint
from infra.nag import ack, logical_id
from infra.stats_layer import layer_zip
from iofleet.aws import ec2 as ec2_spec
from iofleet.aws import keys
from iofleet.results.schema import BURST_METRICS

LAMBDA_ERRORS = ["States.ALL"]
# iofleet.aws.launch's errors (the Lambda's errorType) when its own retry budget runs out
LAUNCH_RETRYABLE = ["LaunchThrottled", "LaunchUnavailable"]


def _invoke(
    scope: Construct,
    id: str,
    fn: IofleetFunction,
    payload: dict[str, object],
    *,
    result_path: str | None = None,
    comment: str = "",
) -> tasks.LambdaInvoke:
    return tasks.LambdaInvoke(
        scope,
        id,
        lambda_function=fn.fn,
        payload=sfn.TaskInput.from_object(payload),
        result_selector={"result.$": "$.Payload"},
        result_path=result_path,
        output_path=None,
        retry_on_service_exceptions=True,
        comment=comment or None,
    )


def _instance_task(
    scope: Construct,
    id: str,
    launch: IofleetFunction,
    payload: dict[str, object],
    *,
    timeouts_at: str,
    comment: str,
) -> tasks.LambdaInvoke:
    """Launch an instance and wait for it to signal the task token it is given.

    `heartbeat_s` and `timeout_s` are read from the object at `timeouts_at`; the
    instance is handed `heartbeat_s` too, so it beats often enough (every third of it).
    """
    return tasks.LambdaInvoke(
        scope,
        id,
        lambda_function=launch.fn,
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        payload=sfn.TaskInput.from_object(
            {
                **payload,
                "heartbeat_s.$": f"{timeouts_at}.heartbeat_s",
                "task_token": sfn.JsonPath.task_token,
            }
        ),
        heartbeat_timeout=sfn.Timeout.at(f"{timeouts_at}.heartbeat_s"),
        task_timeout=sfn.Timeout.at(f"{timeouts_at}.timeout_s"),
        result_path=sfn.JsonPath.DISCARD,
        comment=comment,
    )


class CellFlow(sfn.StateMachineFragment):
    """One cell: storage, populate once, the fleet, cleanup on every path.

    Input: {run_id, stop_on_failure, cell: {cell_id, fleet_size, has_populate, heartbeat_s, timeout_s, ...}}
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prepare: IofleetFunction,
        launch: IofleetFunction,
        cleanup: IofleetFunction,
        storage_poll_s: int = 15,
    ) -> None:
        super().__init__(scope, id)
        cleanup_failed = _invoke(
            self,
            "CleanupFailedCell",
            cleanup,
            {
                "scope": "cell",
                "outcome": "FAILED",
                "run_id.$": "$.run_id",
                "cell.$": "$.cell",
                "prepared.$": "$.prepared",
                "error.$": "$.error",
            },
            result_path="$.cleanup",
            comment="terminate the cell's instances, delete its ephemeral storage, record the reason",
        ).add_retry(
            errors=LAMBDA_ERRORS, max_attempts=3, backoff_rate=2, interval=Duration.seconds(5)
        )
        stop = (
            sfn.Choice(self, "StopOnFailure?")
            .when(
                sfn.Condition.boolean_equals("$.stop_on_failure", True),
                sfn.Fail(
                    self,
                    "CellFailed",
                    error="CellFailed",
                    cause="a cell failed and the matrix asks to stop at the first failure",
                ),
            )
            .otherwise(
                sfn.Succeed(self, "CellFailedContinue", comment="partial results kept; next cell")
            )
        )
        cleanup_failed.next(stop)

        def guarded(state: tasks.LambdaInvoke | sfn.DistributedMap) -> None:
            state.add_catch(cleanup_failed, errors=LAMBDA_ERRORS, result_path="$.error")

        # PrepareCell runs before `$.prepared` exists: give the failure path an empty one.
        prepare_task = _invoke(
            self,
            "PrepareCell",
            prepare,
            {"action": "prepare", "run_id.$": "$.run_id", "cell.$": "$.cell"},
            result_path="$.prepared",
            comment="record the cell, create the start barrier, create or look up shared storage",
        )
        prepare_failed = sfn.Pass(
            self, "NothingPrepared", result=sfn.Result.from_object({}), result_path="$.prepared"
        )
        prepare_failed.next(cleanup_failed)
        prepare_task.add_catch(prepare_failed, errors=LAMBDA_ERRORS, result_path="$.error")

        check = _invoke(
            self,
            "CheckStorage",
            prepare,
            {
                "action": "status",
                "run_id.$": "$.run_id",
                "cell.$": "$.cell",
                "prepared.$": "$.prepared.result",
            },
            result_path="$.prepared",
            comment="is the ephemeral file system and its mount targets available yet?",
        )
        guarded(check)
        wait = sfn.Wait(
            self, "WaitForStorage", time=sfn.WaitTime.duration(Duration.seconds(storage_poll_s))
        )

        populate = _instance_task(
            self,
            "PopulateOnce",
            launch,
            {
                "mode": "populate",
                "run_id.$": "$.run_id",
                "cell_id.$": "$.cell.cell_id",
                "storage.$": "$.prepared.result.storage",
            },
            timeouts_at="$.cell",
            comment="one instance runs the apps' populate phase once, before the fleet",
        )
        guarded(populate)

        launch_slot = _instance_task(
            self,
            "RunSlot",
            launch,
            {
                "mode": "slot",
                "run_id.$": "$.run_id",
                "cell_id.$": "$.cell_id",
                "slot_index.$": "$.slot_index",
                "storage.$": "$.storage",
            },
            timeouts_at="$",
            comment="launch one instance; it signals this task token when its slot is done",
        )
        # RunInstances throttling (and EC2's 5xx) is retried in the launch Lambda first
        # (backoff with full jitter, each retry recorded on the slot); when its budget runs
        # out it raises LaunchThrottled (LaunchUnavailable) and the task is retried here, later, with a new task token (the
        # ClientToken keeps it to one instance). Capacity errors are not retried here: the
        # Lambda already tried every subnet, and the fleet is waiting at its barrier.
        launch_slot.add_retry(
            errors=LAUNCH_RETRYABLE,
            interval=Duration.seconds(5),
            backoff_rate=2,
            max_attempts=4,
            max_delay=Duration.seconds(60),
            jitter_strategy=sfn.JitterType.FULL,
        )
        # The launch rate: slot i waits for its wave (iofleet.aws.launch.launch_schedule)
        launch_wave = sfn.Wait(
            self,
            "LaunchWave",
            time=sfn.WaitTime.seconds_path("$.launch_after_s"),
            comment="launch in waves (20 slots every 10 s) to stay inside EC2's RunInstances token buckets",
        )
        # A failed slot task keeps its reason on the slot item (the Map itself only says
        # that its failure threshold was exceeded), then fails the slot with that error.
        record_slot = _invoke(
            self,
            "RecordSlotFailure",
            cleanup,
            {
                "scope": "slot",
                "run_id.$": "$.run_id",
                "cell_id.$": "$.cell_id",
                "slot_index.$": "$.slot_index",
                "error.$": "$.error",
            },
            result_path="$.recorded",
            comment="keep the slot's failure reason on its slot item for the cell's cleanup",
        ).add_retry(
            errors=LAMBDA_ERRORS, max_attempts=3, backoff_rate=2, interval=Duration.seconds(2)
        )
        record_slot.add_catch(
            sfn.Fail(
                self,
                "SlotFailedUnrecorded",
                error="SlotFailed",
                cause="the slot's task failed and its reason could not be recorded",
            ),
            errors=LAMBDA_ERRORS,
            result_path="$.record_error",
        )
        record_slot.next(
            sfn.Fail(
                self,
                "SlotFailed",
                error_path="$.recorded.result.Error",
                cause_path="$.recorded.result.Cause",
            )
        )
        launch_slot.add_catch(record_slot, errors=LAMBDA_ERRORS, result_path="$.error")
        fleet = sfn.DistributedMap(
            self,
            "Fleet",
            items_path="$.prepared.result.slots",
            item_selector={
                "run_id.$": "$.run_id",
                "cell_id.$": "$.cell.cell_id",
                "slot_index.$": "$$.Map.Item.Value.slot_index",
                "launch_after_s.$": "$$.Map.Item.Value.launch_after_s",
                "storage.$": "$.prepared.result.storage",
                "heartbeat_s.$": "$.cell.heartbeat_s",
                "timeout_s.$": "$.cell.timeout_s",
            },
            map_execution_type=sfn.StateMachineType.STANDARD,
            # every slot's child runs for the slot's whole life and the slots meet at the
            # barrier, so this must not be below the fleet size (a lower cap would hold later
            # slots back until the barrier times out): the launch rate is the LaunchWave
            max_concurrency=1000,
            label="slots",
            result_path=sfn.JsonPath.DISCARD,
            comment="every slot of the cell, launched in waves; they meet at the start barrier",
        )
        fleet.item_processor(launch_wave.next(launch_slot))
        guarded(fleet)

        cleanup_ok = _invoke(
            self,
            "CleanupCell",
            cleanup,
            {
                "scope": "cell",
                "outcome": "SUCCEEDED",
                "run_id.$": "$.run_id",
                "cell.$": "$.cell",
                "prepared.$": "$.prepared",
            },
            result_path="$.cleanup",
            comment="delete the cell's ephemeral storage and record it as done",
        ).add_retry(
            errors=LAMBDA_ERRORS, max_attempts=3, backoff_rate=2, interval=Duration.seconds(5)
        )
        guarded(cleanup_ok)
        fleet.next(cleanup_ok).next(sfn.Succeed(self, "CellDone"))

        has_populate = (
            sfn.Choice(self, "Populate?")
            .when(sfn.Condition.boolean_equals("$.cell.has_populate", True), populate.next(fleet))
            .otherwise(fleet)
        )
        storage_ready = (
            sfn.Choice(self, "StorageReady?")
            .when(
                sfn.Condition.boolean_equals("$.prepared.result.storage.ready", False),
                wait.next(check),
            )
            .otherwise(has_populate)
        )
        check.next(storage_ready)
        prepare_task.next(storage_ready)

        self._start = prepare_task
        self._ends = [stop]

    @property
    def start_state(self) -> sfn.State:
        return self._start

    @property
    def end_states(self) -> list[sfn.INextable]:
        return []


class Orchestration(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket,
        table: dynamodb.ITableV2,
        fleet: Fleet,
        database: str,
        workgroup: str,
        max_instances_per_run: int,
        staging_root: Path,
        layer_version: int,
        storage_poll_s: int = 15,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        common_env = {
            "RESULTS_BUCKET": bucket.bucket_name,
            "STATE_TABLE": table.table_name,
            keys.STACK_ENV: stack.stack_name,  # the iofleet:stack tag on what this stack creates
        }

        def fn(
            name: str,
            description: str,
            timeout: Duration | None = None,
            layers: tuple[lambda_.ILayerVersion, ...] = (),
            **env: str,
        ) -> IofleetFunction:
            return IofleetFunction(
                self,
                name.title().replace("_", "") + "Fn",
                name=name,
                staging_root=staging_root,
                layer_version=layer_version,
                environment={**common_env, **env},
                timeout=timeout,
                description=description,
                layers=layers,
            )

        subnet_ids = ",".join(s.subnet_id for s in fleet.subnets.subnets)
        self.plan = fn(
            "plan",
            "iofleet: validate the matrix and write the plan",
            MAX_INSTANCES=str(max_instances_per_run),
        )
        self.prepare = fn(
            "prepare_cell",
            "iofleet: record a cell, create its barrier and shared storage",
            SUBNET_IDS=subnet_ids,
            STORAGE_SECURITY_GROUP=fleet.storage_security_group.security_group_id,
        )
        self.launch = fn(
            "launch",
            "iofleet: launch one instance for a slot or a populate phase",
            LAUNCH_TEMPLATE_ID=fleet.launch_template.launch_template_id or "",
            SUBNET_IDS=subnet_ids,
            SUBNET_ZONES=",".join(s.availability_zone for s in fleet.subnets.subnets),
            AGENT_BUCKET=fleet.agent_asset.s3_bucket_name,
            AGENT_KEY=fleet.agent_asset.s3_object_key,
            INSTANCE_ROLE_ID=fleet.role.role_id,  # payload keys: <role id>:<instance id>
        )
        self.cleanup = fn(
            "cleanup", "iofleet: clean up a cell or a run (also on abort)", Duration.minutes(5)
        )
        # numpy + scipy for report.html's repeat noise, on Summarize only (infra/stats_layer.py)
        self.stats_layer = lambda_.LayerVersion(
            self,
            "StatsLayer",
            code=lambda_.Code.from_asset(str(layer_zip())),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="iofleet: numpy + scipy (the report's repeat-noise test)",
        )
        self.summarize = fn(
            "summarize",
            "iofleet: Athena summary of a run, report to S3",
            Duration.minutes(10),
            layers=(self.stats_layer,),
            ATHENA_DATABASE=database,
            ATHENA_WORKGROUP=workgroup,
        )
        self.janitor = fn(
            "janitor",
            "iofleet: terminate anything tagged iofleet:* past its expiry",
            Duration.minutes(5),
        )

        self._grant(stack, bucket, table, fleet, workgroup)

        # --- state machine -----------------------------------------------------------
        plan = _invoke(
            self,
            "Plan",
            self.plan,
            {
                "matrix.$": "$",
                "execution_arn.$": "$$.Execution.Id",
                "execution_name.$": "$$.Execution.Name",
                "started_at.$": "$$.Execution.StartTime",
            },
            result_path="$",
            comment="the same iofleet validation as `iofleet plan`; nothing is created on bad input",
        )
        plan_output = sfn.Pass(self, "PlanOutput", input_path="$.result")
        invalid = sfn.Fail(self, "MatrixInvalid", error="MatrixInvalid", cause_path="$.error_text")
        cell_flow = CellFlow(
            self,
            "CellFlow",
            prepare=self.prepare,
            launch=self.launch,
            cleanup=self.cleanup,
            storage_poll_s=storage_poll_s,
        )
        cells = sfn.Map(
            self,
            "Cells",
            items_path="$.cells",
            item_selector={
                "run_id.$": "$.run_id",
                "stop_on_failure.$": "$.stop_on_failure",
                "cell.$": "$$.Map.Item.Value",
            },
            max_concurrency_path="$.cell_concurrency",
            result_path=sfn.JsonPath.DISCARD,
            comment="cells one after another by default, so they don't disturb each other",
        )
        cells.item_processor(cell_flow)

        def run_cleanup(id: str, outcome: str | None) -> tasks.LambdaInvoke:
            payload: dict[str, object] = {"scope": "run", "run_id.$": "$.run_id"}
            if outcome:
                payload["outcome"] = outcome
                payload["error.$"] = "$.error"
            else:
                payload["outcome.$"] = "$.summary.result.status"
            return _invoke(
                self,
                id,
                self.cleanup,
                payload,
                result_path="$.cleanup",
                comment="terminate anything left, record the run status",
            ).add_retry(
                errors=LAMBDA_ERRORS, max_attempts=3, backoff_rate=2, interval=Duration.seconds(5)
            )

        run_failed = run_cleanup("CleanupFailedRun", "FAILED").next(
            sfn.Fail(
                self,
                "RunFailed",
                error="RunFailed",
                cause="the run stopped; see the run item and the cleanup output",
            )
        )
        cells.add_catch(run_failed, errors=LAMBDA_ERRORS, result_path="$.error")
        summarize = _invoke(
            self,
            "Summarize",
            self.summarize,
            {"run_id.$": "$.run_id"},
            result_path="$.summary",
            comment="Athena over the views for this run; CSV + JSON report to S3",
        )
        summarize.add_catch(run_failed, errors=LAMBDA_ERRORS, result_path="$.error")
        done = run_cleanup("CleanupRun", None).next(sfn.Succeed(self, "Done"))

        definition = plan.next(
            sfn.Choice(self, "Valid?")
            .when(
                sfn.Condition.boolean_equals("$.result.valid", False),
                sfn.Pass(self, "InvalidOutput", input_path="$.result").next(invalid),
            )
            .otherwise(plan_output.next(cells).next(summarize).next(done))
        )
        plan.add_catch(
            sfn.Fail(
                self,
                "PlanError",
                error="PlanError",
                cause="the Plan step failed before any resource was created",
            ),
            errors=LAMBDA_ERRORS,
            result_path="$.error",
        )

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            tracing_enabled=True,
            # every event, without execution data: state inputs, outputs and task parameters
            # carry task tokens and whole matrices, which do not belong in CloudWatch Logs
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False
            ),
            timeout=Duration.days(7),
            comment="iofleet: a benchmark matrix over an EC2 fleet",
        )

        self._ack_state_machine()

        # --- abort rule and janitor ----------------------------------------------------
        self.abort_rule = events.Rule(
            self,
            "AbortRule",
            description="iofleet: clean up after an aborted, timed-out or failed execution",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "status": ["ABORTED", "TIMED_OUT", "FAILED"],
                    "stateMachineArn": [self.state_machine.state_machine_arn],
                },
            ),
            targets=[targets.LambdaFunction(self.cleanup.fn, retry_attempts=4)],
        )
        self.janitor_rule = events.Rule(
            self,
            "JanitorSchedule",
            description="iofleet: hourly sweep of expired iofleet:* resources",
            schedule=events.Schedule.rate(Duration.hours(1)),
            targets=[targets.LambdaFunction(self.janitor.fn, retry_attempts=2)],
        )

    def _grant_shared_storage(self, stack: Stack, fleet: Fleet) -> None:
        """EFS file systems created only with this stack's tag, mount targets only on them,
        their network interfaces only in this stack's subnets and storage security group."""
        role = self.prepare.role
        file_systems = stack.format_arn(
            service="elasticfilesystem", resource="file-system", resource_name="*"
        )
        own = {"StringEquals": {f"aws:ResourceTag/{keys.TAG_STACK}": stack.stack_name}}
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeSharedStorage",
                actions=[
                    "elasticfilesystem:DescribeFileSystems",
                    "elasticfilesystem:DescribeMountTargets",
                    "fsx:DescribeFileSystems",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeNetworkInterfaces",
                ],
                resources=["*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="CreateFileSystemTaggedForThisStack",
                actions=["elasticfilesystem:CreateFileSystem", "elasticfilesystem:TagResource"],
                resources=[file_systems],
                conditions={"StringEquals": {f"aws:RequestTag/{keys.TAG_STACK}": stack.stack_name}},
            )
        )
        self._grant_fsx_create(stack, role)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="MountTargetsOnThisStacksFileSystems",
                actions=["elasticfilesystem:CreateMountTarget"],
                resources=[file_systems],
                conditions=own,
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="MountTargetNetworkInterfaces",
                actions=["ec2:CreateNetworkInterface"],
                resources=[
                    *(
                        stack.format_arn(
                            service="ec2", resource="subnet", resource_name=s.subnet_id
                        )
                        for s in fleet.subnets.subnets
                    ),
                    stack.format_arn(
                        service="ec2",
                        resource="security-group",
                        resource_name=fleet.storage_security_group.security_group_id,
                    ),
                    stack.format_arn(
                        service="ec2", resource="network-interface", resource_name="*"
                    ),
                ],
            )
        )
        ack(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "EFS, FSx and EC2 Describe calls support no resource-level permissions",
        )
        ack(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:elasticfilesystem:<AWS::Region>:<AWS::AccountId>:file-system/*]",
            "file system ids exist only after CreateFileSystem; creation requires this stack's iofleet:stack request tag and mount targets its resource tag",
        )
        ack(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:network-interface/*]",
            "a mount target's network interface is created by CreateMountTarget, only in this stack's subnets and storage security group",
        )

    def _grant_fsx_create(self, stack: Stack, role: iam.IRole) -> None:
        """FSx for OpenZFS / Lustre file systems (iofleet/aws/fsx.py) created only with this
        stack's iofleet:stack request tag; FSx makes their network interfaces through its
        service-linked role, which the first creation in an account may have to create."""
        fsx_arn = stack.format_arn(service="fsx", resource="file-system", resource_name="*")
        role.add_to_policy(
            iam.PolicyStatement(
                sid="CreateFsxTaggedForThisStack",
                actions=["fsx:CreateFileSystem", "fsx:TagResource"],
                resources=[fsx_arn],
                conditions={"StringEquals": {f"aws:RequestTag/{keys.TAG_STACK}": stack.stack_name}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="FsxServiceLinkedRole",
                actions=["iam:CreateServiceLinkedRole"],
                resources=[
                    f"arn:{stack.partition}:iam::{stack.account}:role/aws-service-role/fsx.amazonaws.com/*"
                ],
                conditions={"StringEquals": {"iam:AWSServiceName": "fsx.amazonaws.com"}},
            )
        )
        ack(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:fsx:<AWS::Region>:<AWS::AccountId>:file-system/*]",
            "FSx file system ids exist only after CreateFileSystem; creation requires this stack's iofleet:stack request tag",
        )
        ack(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/aws-service-role/fsx.amazonaws.com/*]",
            "FSx's own service-linked role (it creates the file system's network interfaces), only for fsx.amazonaws.com",
        )

    def _grant_run_instances(self, stack: Stack, fleet: Fleet) -> None:
        """RunInstances only through this stack's launch template, into its subnets and
        security group, for instances and volumes tagged with this stack; CreateTags only
        as part of that RunInstances call."""
        role = self.launch.role

        def arn(resource: str, name: str, account: bool = True) -> str:
            return stack.format_arn(
                service="ec2",
                resource=resource,
                resource_name=name,
                account=None if account else "",
            )

        template_arn = arn("launch-template", fleet.launch_template.launch_template_id or "")
        from_template = {"ec2:LaunchTemplate": template_arn}
        tag_keys = [
            "Name",
            keys.TAG_RUN,
            keys.TAG_CELL,
            keys.TAG_SLOT,
            keys.TAG_EXPIRES,
            keys.TAG_STACK,
        ]
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RunInstancesTaggedForThisStack",
                actions=["ec2:RunInstances"],
                resources=[arn("instance", "*"), arn("volume", "*")],
                conditions={
                    "ArnEquals": from_template,
                    "StringEquals": {f"aws:RequestTag/{keys.TAG_STACK}": stack.stack_name},
                    "ForAllValues:StringEquals": {"aws:TagKeys": tag_keys},
                },
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RunInstancesWithThisStacksNetwork",
                actions=["ec2:RunInstances"],
                resources=[
                    template_arn,
                    arn("security-group", fleet.security_group.security_group_id),
                    *(arn("subnet", s.subnet_id) for s in fleet.subnets.subnets),
                    arn("network-interface", "*"),
                    arn("image", "*", account=False),
                ],
                conditions={"ArnEquals": from_template},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="TagOnlyAtLaunch",
                actions=["ec2:CreateTags"],
                resources=[arn("instance", "*"), arn("volume", "*")],
                conditions={"StringEquals": {"ec2:CreateAction": "RunInstances"}},
            )
        )
        for kind, why in (
            (
                "instance",
                "instance ids exist only after RunInstances; the statement requires this stack's launch template and iofleet:stack request tag",
            ),
            (
                "volume",
                "volume ids exist only after RunInstances; the statement requires this stack's launch template and iofleet:stack request tag",
            ),
            (
                "network-interface",
                "the instance's network interface is created by RunInstances in this stack's subnets, through its launch template",
            ),
        ):
            ack(
                role,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:{kind}/*]",
                why,
            )
        ack(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>::image/*]",
            "the Ubuntu AMI id comes from Canonical's SSM parameter at launch time and changes with every release; launches are limited to this stack's launch template",
        )

    def _ack_state_machine(self) -> None:
        sm = self.state_machine
        policy = sm.role.node.try_find_child("DefaultPolicy")
        assert policy is not None
        for f in (self.plan, self.prepare, self.launch, self.cleanup, self.summarize):
            ack(
                policy,
                f"AwsSolutions-IAM5[Resource::<{logical_id(f.fn)}.Arn>:*]",
                "CDK's LambdaInvoke grant covers the function's versions and aliases (ARN:*) of this one function",
            )
        ack(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray tracing of the state machine: PutTraceSegments has no resource-level permissions",
        )
        dmap = sm.node.try_find_child("DistributedMapPolicy")
        assert dmap is not None
        sm_name = '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"' + logical_id(sm) + '"}]}]}'
        for suffix in (":*", "/slots:*"):
            ack(
                dmap,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{sm_name}{suffix}]",
                "Distributed Map child executions of this state machine only; their names are generated at run time",
            )

    def _grant(
        self,
        stack: Stack,
        bucket: s3.IBucket,
        table: dynamodb.ITableV2,
        fleet: Fleet,
        workgroup: str,
    ) -> None:
        table.grant(self.plan.role, "dynamodb:PutItem")
        allow_objects(
            self.plan.role,
            bucket,
            keys.CONTROL_PREFIX,
            ["s3:PutObject"],
            "the plan manifest of a run",
        )
        allow_objects(
            self.plan.role, bucket, keys.RAW_PREFIX, ["s3:PutObject"], "raw/{run}/run.json"
        )

        table.grant(self.prepare.role, "dynamodb:PutItem", "dynamodb:UpdateItem")
        allow_objects(
            self.prepare.role,
            bucket,
            keys.CONTROL_PREFIX,
            ["s3:GetObject"],
            "reads the plan manifest",
        )
        self._grant_shared_storage(stack, fleet)
        grant_mountpoint(  # Mountpoint buckets per cell (infra/mountpoint_grants.py)
            stack,
            prepare=self.prepare.role,
            cleaners=[self.cleanup.role, self.janitor.role],
            instance=fleet.role,
        )
        # the slot item: launch retries as they happen, then where it launched; a retried
        # invocation reads which subnets had no capacity (iofleet.aws.launch.subnet_order)
        table.grant(self.launch.role, "dynamodb:UpdateItem", "dynamodb:GetItem")
        allow_objects(
            self.launch.role,
            bucket,
            keys.CONTROL_PREFIX,
            ["s3:GetObject", "s3:PutObject"],
            "plan in, instance payloads out",
        )
        self._grant_run_instances(stack, fleet)
        self.launch.role.add_to_policy(
            iam.PolicyStatement(
                sid="PassInstanceRole", actions=["iam:PassRole"], resources=[fleet.role.role_arn]
            )
        )
        self.launch.role.add_to_policy(
            iam.PolicyStatement(
                sid="UbuntuAmiParameter",
                actions=["ssm:GetParameter"],
                # exactly the public parameters the launcher can name: one per Ubuntu
                # release the plan may choose (iofleet/plan/hosts.py) and architecture
                resources=[
                    f"arn:{stack.partition}:ssm:{stack.region}::parameter{name}"
                    for name in ec2_spec.ami_parameter_names()
                ],
            )
        )
        table.grant(self.cleanup.role, "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:Query")
        own_tag = f"aws:ResourceTag/{keys.TAG_STACK}"
        for role in (self.cleanup.role, self.janitor.role):
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="FindIofleetResources",
                    actions=[
                        "ec2:DescribeInstances",
                        "elasticfilesystem:DescribeFileSystems",
                        "elasticfilesystem:DescribeMountTargets",
                        "fsx:DescribeFileSystems",
                    ],
                    resources=["*"],
                )
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="TerminateIofleetInstances",
                    actions=["ec2:TerminateInstances"],
                    resources=["*"],
                    conditions={"StringEquals": {own_tag: stack.stack_name}},
                )
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="DeleteIofleetFileSystems",
                    actions=[
                        "elasticfilesystem:DeleteFileSystem",
                        "elasticfilesystem:DeleteMountTarget",
                        "fsx:DeleteFileSystem",
                    ],
                    resources=["*"],
                    conditions={"StringEquals": {own_tag: stack.stack_name}},
                )
            )

        for role in (self.cleanup.role, self.janitor.role):
            ack(
                role,
                "AwsSolutions-IAM5[Resource::*]",
                "Describe calls support no resource-level permissions; Terminate/Delete are limited to resources tagged with this stack's iofleet:stack",
            )
        table.grant(self.summarize.role, "dynamodb:UpdateItem", "dynamodb:Query")
        allow_objects(
            self.summarize.role, bucket, keys.REPORTS_PREFIX, ["s3:PutObject"], "the run report"
        )
        grant_athena(self.summarize.role, stack, workgroup, bucket)
        grant_compaction(self.summarize.role, stack, bucket)
        # burst metrics (iofleet/aws/burst.py): plan in, one curated object out, CloudWatch read
        allow_objects(
            self.summarize.role,
            bucket,
            keys.CONTROL_PREFIX,
            ["s3:GetObject"],
            "reads the plan manifest",
        )
        allow_objects(
            self.summarize.role,
            bucket,
            f"{keys.CURATED_PREFIX}{BURST_METRICS.name}/",
            ["s3:PutObject"],
            "the run's burst_metrics object",
        )
        burst = iam.Policy(
            self,
            "SummarizeBurstMetrics",
            statements=[
                iam.PolicyStatement(
                    sid="BurstMetrics", actions=["cloudwatch:GetMetricData"], resources=["*"]
                )
            ],
            roles=[self.summarize.role],
        )
        ack(
            burst,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:GetMetricData supports no resource-level permissions; it reads the burst/credit balances of the run's volumes, file systems and instances",
        )
