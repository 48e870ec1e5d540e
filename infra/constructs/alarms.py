"""Alarms on the things a user should hear about: dead letters and failed executions."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct


class Alarms(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        email: str | None,
        dlq: sqs.IQueue,
        state_machine: sfn.StateMachine,
    ) -> None:
        super().__init__(scope, id)
        self.dead_letters = cw.Alarm(
            self,
            "DeadLetters",
            alarm_description="iofleet: raw objects that ingest could not process (see the DLQ)",
            metric=dlq.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.failed_runs = cw.Alarm(
            self,
            "FailedRuns",
            alarm_description="iofleet: an execution failed, timed out or was aborted",
            metric=state_machine.metric_failed(period=Duration.minutes(5)),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.topic: sns.Topic | None = None
        if email:
            key = kms.Key(
                self, "TopicKey", enable_key_rotation=True, description="iofleet alarm topic"
            )
            key.grant_encrypt_decrypt(iam.ServicePrincipal("cloudwatch.amazonaws.com"))
            self.topic = sns.Topic(
                self, "Topic", display_name="iofleet alarms", master_key=key, enforce_ssl=True
            )
            self.topic.add_subscription(subs.EmailSubscription(email))
            for alarm in (self.dead_letters, self.failed_runs):
                alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
