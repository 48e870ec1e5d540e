"""Least-privilege S3 grants on one key prefix, with the matching cdk-nag acknowledgement."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from infra.nag import ack, ack_prefix, logical_id


def allow_objects(
    role: iam.IRole, bucket: s3.IBucket, prefix: str, actions: list[str], why: str
) -> None:
    """`actions` (exact, no wildcards) on objects under `prefix` only."""
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(f"{prefix}*")])
    )
    ack_prefix(
        role,
        bucket,
        prefix,
        f"object keys under {prefix} are per run/cell/slot and unknown at deploy: {why}",
    )


def allow_list(role: iam.IRole, bucket: s3.IBucket) -> None:
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket", "s3:GetBucketLocation"], resources=[bucket.bucket_arn]
        )
    )


# The instance role's session is `<role id>:<instance id>`, and IAM substitutes that for
# `${aws:userid}` (docs/decisions.md, "An instance reads its own payload ..."). Not a CDK token:
# CDK passes `${aws:userid}` through to the template as it is.
USERID = "${aws:userid}"


def own_objects(role: iam.IRole, bucket: s3.IBucket) -> None:
    """An instance's objects, and no other instance's: its payload
    (`control/<run>/<cell>/<slot>/<aws:userid>.json`, written by the launcher) and its own
    raw prefix (`raw/<aws:userid>/`), each raw object written once (`If-None-Match: *`)."""
    from iofleet.aws import keys

    payload = bucket.arn_for_objects(f"{keys.CONTROL_PREFIX}*/{USERID}.json")
    raw = bucket.arn_for_objects(f"{keys.RAW_PREFIX}{USERID}/*")
    role.add_to_principal_policy(
        iam.PolicyStatement(sid="ReadOwnPayload", actions=["s3:GetObject"], resources=[payload])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="CreateOwnRawObjects",
            actions=["s3:PutObject"],
            resources=[raw],
            # a PutObject without `If-None-Match` matches no Allow: it could replace an object
            conditions={"Null": {"s3:if-none-match": "false"}},
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="CheckOwnRawObjects",
            actions=["s3:GetObject"],  # HeadObject: is a retried upload's object the same?
            resources=[raw],
        )
    )
    # cdk-nag prints the policy variable as <aws:userid>
    arn = f"<{logical_id(bucket)}.Arn>"
    for resource, why in (
        (f"{keys.CONTROL_PREFIX}*/<aws:userid>.json", "an instance reads its own payload only"),
        (f"{keys.RAW_PREFIX}<aws:userid>/*", "an instance writes under its own session id only"),
    ):
        ack(
            role,
            f"AwsSolutions-IAM5[Resource::{arn}/{resource}]",
            f"keys per run/cell/slot, bound to the caller by IAM's aws:userid: {why}",
        )
