"""Least-privilege S3 grants on one key prefix, with the matching cdk-nag acknowledgement."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from infra.nag import ack_prefix


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
