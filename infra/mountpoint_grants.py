"""IAM for Mountpoint for S3 storage (iofleet/aws/s3mount.py): the buckets a cell gets.

Every grant names this stack's bucket-name prefix (`ifl-<hash of the stack name>-`),
never the results bucket and never another stack's buckets: PrepareCell may create
(and tag) them, Cleanup and the janitor may list, empty and delete them, and the
instances may read, write and delete objects in them through Mountpoint (for a
directory bucket, through an S3 Express session on those buckets only). Listing the
account's buckets has no resource-level permission; the code filters by the prefix.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from infra.nag import ack
from iofleet.aws import s3mount

# Object actions Mountpoint needs for reading, writing new files and --allow-delete
# (Mountpoint's docs, "IAM permissions"); no s3:*.
MOUNT_OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
]


def bucket_arns(stack: Stack) -> tuple[str, str, str]:
    """(general purpose bucket ARN pattern, its objects, directory bucket ARN pattern)."""
    prefix = s3mount.name_prefix(stack.stack_name)
    gp = f"arn:{stack.partition}:s3:::{prefix}*"
    directory = f"arn:{stack.partition}:s3express:{stack.region}:{stack.account}:bucket/{prefix}*"
    return gp, f"{gp}/*", directory


def _ack(role: iam.IRole, stack: Stack, why: str) -> None:
    prefix = s3mount.name_prefix(stack.stack_name)
    for resource in (
        f"arn:<AWS::Partition>:s3:::{prefix}*",
        f"arn:<AWS::Partition>:s3:::{prefix}*/*",
        f"arn:<AWS::Partition>:s3express:<AWS::Region>:<AWS::AccountId>:bucket/{prefix}*",
    ):
        ack(role, f"AwsSolutions-IAM5[Resource::{resource}]", why)


def grant_mountpoint(
    stack: Stack, *, prepare: iam.IRole, cleaners: list[iam.IRole], instance: iam.IRole
) -> None:
    gp, objects, directory = bucket_arns(stack)
    why = (
        "a Mountpoint bucket is created per cell with a name unknown at deploy; every grant "
        "is limited to this stack's bucket-name prefix (iofleet/aws/s3mount.py)"
    )
    prepare.add_to_principal_policy(
        iam.PolicyStatement(
            sid="CreateCellBuckets",
            actions=["s3:CreateBucket", "s3:PutBucketTagging"],
            resources=[gp],
        )
    )
    prepare.add_to_principal_policy(
        iam.PolicyStatement(
            sid="CreateCellDirectoryBuckets",
            actions=["s3express:CreateBucket"],
            resources=[directory],
        )
    )
    prepare.add_to_principal_policy(
        iam.PolicyStatement(sid="SubnetZones", actions=["ec2:DescribeSubnets"], resources=["*"])
    )
    _ack(prepare, stack, why)
    for role in cleaners:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="FindCellBuckets",
                actions=["s3:ListAllMyBuckets", "s3express:ListAllMyDirectoryBuckets"],
                resources=["*"],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EmptyAndDeleteCellBuckets",
                actions=[
                    "s3:ListBucket",
                    "s3:ListBucketMultipartUploads",
                    "s3:DeleteBucket",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                ],
                resources=[gp, objects],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EmptyAndDeleteCellDirectoryBuckets",
                # a directory bucket's object calls go through a session (CreateSession)
                actions=["s3express:CreateSession", "s3express:DeleteBucket"],
                resources=[directory],
            )
        )
        _ack(role, stack, why)
    instance.add_to_principal_policy(
        iam.PolicyStatement(sid="MountCellBucket", actions=["s3:ListBucket"], resources=[gp])
    )
    instance.add_to_principal_policy(
        iam.PolicyStatement(
            sid="MountCellBucketObjects", actions=MOUNT_OBJECT_ACTIONS, resources=[objects]
        )
    )
    instance.add_to_principal_policy(
        iam.PolicyStatement(
            sid="MountCellDirectoryBucket",
            actions=["s3express:CreateSession"],
            resources=[directory],
        )
    )
    _ack(instance, stack, why)
