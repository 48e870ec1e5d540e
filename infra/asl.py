"""The state-machine definition out of a synthesized template, with its intrinsics resolved.

Used by the gate tests (npm asl-validator) and by anything that must run exactly
what deploys (the local-cloud suite resolves references to the ARNs it created).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "IofleetStack",
}


def placeholder_arn(logical_id: str, resource: Mapping[str, Any]) -> str:
    """A syntactically valid ARN for a resource, by type (for validation only)."""
    kind = resource.get("Type", "")
    if kind == "AWS::Lambda::Function":
        return f"arn:aws:lambda:us-east-1:123456789012:function:{logical_id}"
    if kind == "AWS::StepFunctions::StateMachine":
        return f"arn:aws:states:us-east-1:123456789012:stateMachine:{logical_id}"
    if kind == "AWS::DynamoDB::GlobalTable" or kind == "AWS::DynamoDB::Table":
        return logical_id.lower()
    return logical_id


def resolve(value: Any, ref: Callable[[str, str | None], str]) -> Any:
    """Resolve Fn::Join / Ref / Fn::GetAtt / Fn::Select / Fn::Split / Fn::Sub (no vars)."""
    if isinstance(value, list):
        return [resolve(v, ref) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((k, v),) = value.items()
        if k == "Ref":
            return PSEUDO[v] if v in PSEUDO else ref(v, None)
        if k == "Fn::GetAtt":
            logical, attr = v.split(".", 1) if isinstance(v, str) else v
            return ref(logical, attr)
        if k == "Fn::Join":
            sep, parts = v
            return sep.join(str(resolve(p, ref)) for p in parts)
        if k == "Fn::Select":
            idx, items = v
            return resolve(items, ref)[int(idx)]
        if k == "Fn::Split":
            sep, s = v
            return str(resolve(s, ref)).split(sep)
    return {k: resolve(v, ref) for k, v in value.items()}


def state_machine_definitions(
    template: Mapping[str, Any], arns: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """logical id -> parsed ASL of every state machine in the template.

    `arns` maps logical ids to real ARNs/names (e.g. created in moto); anything
    missing gets a placeholder ARN.
    """
    resources = template["Resources"]
    arns = dict(arns or {})

    def ref(logical: str, attr: str | None) -> str:
        if logical in arns:
            return arns[logical]
        res = resources.get(logical, {})
        return placeholder_arn(logical, res)

    out: dict[str, dict[str, Any]] = {}
    for logical, res in resources.items():
        if res.get("Type") != "AWS::StepFunctions::StateMachine":
            continue
        props = res["Properties"]
        text = resolve(props["DefinitionString"], ref)
        out[logical] = json.loads(text)
    return out
