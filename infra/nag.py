"""cdk-nag v3 acknowledgements: one finding at a time, each with a specific reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def ack(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one finding id (e.g. `AwsSolutions-IAM5[Resource::*]`) on a construct."""
    if len(reason) < 20:
        raise ValueError(f"acknowledgement of {finding} needs a specific reason")
    Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


def logical_id(construct: IConstruct) -> str:
    """Resolved logical id of an L2 construct's CFN resource (as cdk-nag prints it)."""
    from aws_cdk import CfnElement, Stack

    child = construct.node.default_child
    assert isinstance(child, CfnElement), construct.node.path
    return str(Stack.of(construct).resolve(child.logical_id))


def ack_prefix(scope: IConstruct, bucket: IConstruct, prefix: str, reason: str) -> None:
    """Acknowledge the IAM5 wildcard of `bucket/prefix*` (an object key prefix grant)."""
    ack(scope, f"AwsSolutions-IAM5[Resource::<{logical_id(bucket)}.Arn>/{prefix}*]", reason)
