"""The instance role's S3 statements, as a security reviewer reads them, and what they mean.

Issue 11, part 5: an instance reads only its own payload, writes only under its own prefix,
and cannot replace a raw object. The first tests assert the synthesized statements; the
last ones evaluate them for concrete requests with a real IAM policy evaluator
(@cloud-copilot/iam-simulate, pinned in package.json, run by node): moto does not evaluate
IAM policies, let alone policy variables such as `${aws:userid}`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import ROOT, Synth, dump

ACCOUNT = "123456789012"
BUCKET = "results-bucket"
ROLE_ID = "AROAEXAMPLEINSTROLE1"
A = f"{ROLE_ID}:i-0aaaaaaaaaaaaaaa1"  # the aws:userid of instance A's role session
B = f"{ROLE_ID}:i-0bbbbbbbbbbbbbbb2"
RUN_A, RUN_B = "seed000-20261121t051200z-0a1b", "seed004-20261122t101500z-9f8e"
CELL = "c000-gp3-m6i.large-x3-r1"


def _statements(synth: Synth) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if "InstanceRole" in dump(policy["Properties"]["Roles"]):
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def _s3_statements(synth: Synth) -> list[dict[str, Any]]:
    return [s for s in _statements(synth) if '"s3:' in json.dumps(s["Action"])]


def _results_statements(synth: Synth) -> list[dict[str, Any]]:
    """The instance role's S3 statements on the results bucket (the Mountpoint grants on
    this stack's storage buckets, `ifl-<hash>-*`, are tests/infra/test_stack.py's)."""
    bucket = f"arn:aws:s3:::{BUCKET}"
    out = []
    for s in _s3_statements(synth):
        res = _resolve(s["Resource"], synth)
        if any(str(r).startswith(bucket) for r in (res if isinstance(res, list) else [res])):
            out.append(s)
    return out


def _results_bucket(synth: Synth) -> str:
    (logical,) = [k for k in synth.resources("AWS::S3::Bucket") if k.startswith("StorageResults")]
    return logical


def _resolve(value: Any, synth: Synth) -> Any:
    """The template's intrinsics in a policy document, for one concrete account."""
    if isinstance(value, list):
        return [_resolve(v, synth) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Fn::Join"}:
        sep, parts = value["Fn::Join"]
        return sep.join(str(_resolve(p, synth)) for p in parts)
    if set(value) == {"Fn::GetAtt"}:
        logical, attr = value["Fn::GetAtt"]
        if logical == _results_bucket(synth) and attr == "Arn":
            return f"arn:aws:s3:::{BUCKET}"
        return f"arn:aws:unknown:us-east-1:{ACCOUNT}:{logical}/{attr}"
    if set(value) == {"Ref"}:
        return {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": "us-east-1"}.get(
            value["Ref"], value["Ref"]
        )
    if set(value) == {"Fn::Sub"}:
        text = value["Fn::Sub"]
        for k, v in (("AWS::AccountId", ACCOUNT), ("AWS::Region", "us-east-1")):
            text = text.replace("${" + k + "}", v)
        return text
    return {k: _resolve(v, synth) for k, v in value.items()}


# --- the statements -------------------------------------------------------------------


def test_instance_reads_control_objects_only_under_its_own_session_id(synth: Synth) -> None:
    reads = [
        s
        for s in _s3_statements(synth)
        if s["Action"] == "s3:GetObject" and "/control/" in dump(s["Resource"])
    ]
    assert len(reads) == 1
    (resource,) = [_resolve(reads[0]["Resource"], synth)]
    assert resource == f"arn:aws:s3:::{BUCKET}/control/*/${{aws:userid}}.json"


def test_instance_writes_raw_objects_only_under_its_own_session_id_and_only_new_ones(
    synth: Synth,
) -> None:
    puts = [s for s in _results_statements(synth) if "s3:PutObject" in dump(s["Action"])]
    assert len(puts) == 1
    (put,) = puts
    assert put["Action"] == "s3:PutObject" and put["Effect"] == "Allow"
    assert _resolve(put["Resource"], synth) == f"arn:aws:s3:::{BUCKET}/raw/${{aws:userid}}/*"
    # without `If-None-Match` the Allow does not apply: a PutObject could replace an object
    assert put["Condition"] == {"Null": {"s3:if-none-match": "false"}}


def test_no_instance_statement_reaches_another_prefix_of_the_results_bucket(synth: Synth) -> None:
    bucket = f"arn:aws:s3:::{BUCKET}"
    resources = [
        r
        for s in _s3_statements(synth)
        for r in (lambda x: x if isinstance(x, list) else [x])(_resolve(s["Resource"], synth))
        if r.startswith(bucket)
    ]
    assert resources, "no statement on the results bucket"
    for r in resources:
        assert "${aws:userid}" in r, r  # every grant on the bucket is bound to the caller
    actions = {a for s in _results_statements(synth) for a in json.dumps(s["Action"]).split('"')}
    assert not {"s3:DeleteObject", "s3:ListBucket", "s3:PutObjectAcl"} & actions


def test_the_results_bucket_keeps_every_version(synth: Synth) -> None:
    (bucket,) = [
        v for k, v in synth.resources("AWS::S3::Bucket").items() if k == _results_bucket(synth)
    ]
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}


def test_the_launcher_knows_the_role_id_that_keys_the_payloads(synth: Synth) -> None:
    functions = synth.resources("AWS::Lambda::Function")
    (launch,) = [
        f for f in functions.values() if "launch one instance" in f["Properties"]["Description"]
    ]
    env = launch["Properties"]["Environment"]["Variables"]
    role = next(k for k in synth.resources("AWS::IAM::Role") if k.startswith("FleetInstanceRole"))
    assert env["INSTANCE_ROLE_ID"] == {"Fn::GetAtt": [role, "RoleId"]}


# --- what they mean: a real evaluator, concrete requests ---------------------------------


def _node_modules() -> Path:
    return ROOT / "node_modules"


def _decide(synth: Synth, requests: list[dict[str, Any]]) -> list[Any]:
    if shutil.which("node") is None:
        pytest.fail("node is not installed (make bootstrap installs it)")
    paths = [str(_node_modules())]
    if os.environ.get("NODE_PATH"):
        paths.append(os.environ["NODE_PATH"])
    doc = {"Version": "2012-10-17", "Statement": _resolve(_statements(synth), synth)}
    proc = subprocess.run(  # noqa: S603 - node and our own script
        ["node", str(Path(__file__).with_name("iam_simulate.cjs"))],
        input=json.dumps({"policies": [doc], "requests": requests}),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": os.pathsep.join(paths)},
        check=False,
    )
    if "Cannot find module '@cloud-copilot/iam-simulate'" in proc.stderr:
        pytest.fail("node_modules lacks @cloud-copilot/iam-simulate: run `npm ci`")
    assert proc.returncode == 0, proc.stderr
    decisions: list[Any] = json.loads(proc.stdout)
    return decisions


def _request(who: str, action: str, key: str, **context: str) -> dict[str, Any]:
    instance = who.split(":", 1)[1]
    return {
        "principal": f"arn:aws:sts::{ACCOUNT}:assumed-role/IofleetInstanceRole/{instance}",
        "action": action,
        "resource": f"arn:aws:s3:::{BUCKET}/{key}",
        "account": ACCOUNT,
        "context": {"aws:userid": who, **context},
    }


NEW = {"s3:if-none-match": "*"}
CASES = [
    # (what, request, decision)
    (
        "A reads its own payload",
        _request(A, "s3:GetObject", f"control/{RUN_A}/{CELL}/slot-0000/{A}.json"),
        "Allowed",
    ),
    (
        "A reads B's payload (B's task token)",
        _request(A, "s3:GetObject", f"control/{RUN_A}/{CELL}/slot-0001/{B}.json"),
        "ImplicitlyDenied",
    ),
    (
        "A reads B's payload of another run",
        _request(A, "s3:GetObject", f"control/{RUN_B}/{CELL}/slot-0000/{B}.json"),
        "ImplicitlyDenied",
    ),
    (
        "A reads a run's plan",
        _request(A, "s3:GetObject", f"control/{RUN_A}/plan.json"),
        "ImplicitlyDenied",
    ),
    (
        "A creates an object under its own prefix",
        _request(A, "s3:PutObject", f"raw/{A}/{RUN_A}/{CELL}/slot-0000/w00-fio-x.json", **NEW),
        "Allowed",
    ),
    (
        "A writes its own prefix without If-None-Match (could replace an object)",
        _request(A, "s3:PutObject", f"raw/{A}/{RUN_A}/{CELL}/slot-0000/w00-fio-x.json"),
        "ImplicitlyDenied",
    ),
    (
        "A writes under B's prefix",
        _request(A, "s3:PutObject", f"raw/{B}/{RUN_A}/{CELL}/slot-0001/slot.json", **NEW),
        "ImplicitlyDenied",
    ),
    (
        "A writes another run's raw key (the old layout)",
        _request(A, "s3:PutObject", f"raw/{RUN_B}/{CELL}/slot-0000/slot.json", **NEW),
        "ImplicitlyDenied",
    ),
    (
        "A writes the run's manifest",
        _request(A, "s3:PutObject", f"raw/{RUN_A}/run.json", **NEW),
        "ImplicitlyDenied",
    ),
    (
        "A deletes its own raw object",
        _request(A, "s3:DeleteObject", f"raw/{A}/{RUN_A}/{CELL}/slot-0000/slot.json"),
        "ImplicitlyDenied",
    ),
    (
        "A reads back its own raw object (a retried upload's check)",
        _request(A, "s3:GetObject", f"raw/{A}/{RUN_A}/{CELL}/slot-0000/slot.json"),
        "Allowed",
    ),
    (
        "A reads B's raw object",
        _request(A, "s3:GetObject", f"raw/{B}/{RUN_A}/{CELL}/slot-0001/slot.json"),
        "ImplicitlyDenied",
    ),
    (
        "A writes a payload",
        _request(A, "s3:PutObject", f"control/{RUN_A}/{CELL}/slot-0001/{A}.json", **NEW),
        "ImplicitlyDenied",
    ),
    (
        "A writes curated rows",
        _request(A, "s3:PutObject", f"curated/fio_results/dt=2026-11-21/{RUN_A}/x.jsonl", **NEW),
        "ImplicitlyDenied",
    ),
]


def test_the_policy_allows_exactly_an_instances_own_objects(synth: Synth) -> None:
    decisions = _decide(synth, [request for _, request, _ in CASES])
    got = {what: decision for (what, _, _), decision in zip(CASES, decisions, strict=True)}
    assert got == {what: decision for what, _, decision in CASES}


def test_the_evaluator_substitutes_the_session_not_a_literal(synth: Synth) -> None:
    # the same own-payload request from B's session: the variable is B's id, so denied
    request = _request(B, "s3:GetObject", f"control/{RUN_A}/{CELL}/slot-0000/{A}.json")
    assert _decide(synth, [request]) == ["ImplicitlyDenied"]
    assert re.fullmatch(r"AROA[A-Z0-9]+:i-[0-9a-f]+", A)
