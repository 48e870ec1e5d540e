"""An instance's S3 objects are its own (issue 11, part 5), on moto server.

- raw objects are written once: the agent's PutObject carries `If-None-Match: *`, so S3
  refuses to replace an object; a retry of the same upload is fine, other content is not;
- ingest takes a slot's raw objects only from the instance launched for that slot;
- the instance names its payload with its own role session id (STS GetCallerIdentity)
  and waits for the launcher to write it.

IAM itself is not evaluated here (moto does not): tests/infra/test_instance_s3.py
evaluates the instance role's policy with an IAM policy evaluator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from iofleet.aws import keys
from iofleet.aws.curate import ingest_object
from iofleet.aws.instance import main, read_payload, whoami
from iofleet.aws.store import RawObjectExists, S3ResultsStore
from iofleet.results import schema
from tests.unit.lambdas.conftest import REGION, Cloud

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUN = "demo-20261121t051200z"
CELL = "c000-gp3-m6i.large-x2-r1"
SLOT0 = f"{RUN}/{CELL}/slot-0000"
I_A, I_B = "i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"
TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAf-test-token"


def _versions(cloud: Cloud, key: str) -> list[dict[str, Any]]:
    out = cloud.client("s3").list_object_versions(Bucket=cloud.bucket, Prefix=key)
    return [v for v in out.get("Versions", []) if v["Key"] == key]


@pytest.fixture
def versioned(cloud: Cloud) -> Cloud:
    cloud.client("s3").put_bucket_versioning(
        Bucket=cloud.bucket, VersioningConfiguration={"Status": "Enabled"}
    )
    return cloud


def _tree(root: Path, text: str) -> Path:
    slot = root / SLOT0
    slot.mkdir(parents=True)
    (slot / "manifest.json").write_text('{"m": 1}\n')
    (slot / "w00-fio-x.json").write_text(text)
    (slot / "slot.json").write_text('{"s": 1}\n')
    return root


# --- raw objects are written once ----------------------------------------------------------


def test_upload_goes_under_the_owner_and_a_retry_replaces_nothing(
    versioned: Cloud, tmp_path: Path
) -> None:
    cloud = versioned
    owner = keys.owner_of("AROAEXAMPLEROLE00001", I_A)
    store = S3ResultsStore(cloud.client("s3"), cloud.bucket, owner)
    tree = _tree(tmp_path / "a", '{"fio": 1}\n')
    first = store.upload_tree(tree)
    assert first == [
        f"raw/{owner}/{SLOT0}/manifest.json",
        f"raw/{owner}/{SLOT0}/w00-fio-x.json",
        f"raw/{owner}/{SLOT0}/slot.json",
    ]
    # when: the same upload runs again (a lost answer, a second pass)
    assert store.upload_tree(tree) == first
    # then: S3 refused every second PutObject (If-None-Match): one version of each object
    assert [len(_versions(cloud, k)) for k in first] == [1, 1, 1]


def test_other_content_under_an_existing_key_is_refused_and_the_object_kept(
    versioned: Cloud, tmp_path: Path
) -> None:
    cloud = versioned
    owner = keys.owner_of("AROAEXAMPLEROLE00001", I_A)
    store = S3ResultsStore(cloud.client("s3"), cloud.bucket, owner)
    key = store.put(f"{SLOT0}/w00-fio-x.json", b'{"fio": "measured"}\n')
    with pytest.raises(RawObjectExists, match="already exists with other content"):
        store.put(f"{SLOT0}/w00-fio-x.json", b'{"fio": "forged"}\n')
    assert cloud.text(key) == '{"fio": "measured"}\n'
    assert len(_versions(cloud, key)) == 1


# --- ingest takes a slot's objects from its own instance only ------------------------------


def _launched(cloud: Cloud, slot_index: int, instance_id: str) -> None:
    key = keys.slot_item_key(RUN, CELL, slot_index)
    cloud.client("dynamodb").put_item(
        TableName=cloud.table,
        Item={**{k: {"S": v} for k, v in key.items()}, "instance_id": {"S": instance_id}},
    )


def _ingest(cloud: Cloud, key: str, body: bytes) -> dict[str, int]:
    cloud.client("s3").put_object(Bucket=cloud.bucket, Key=key, Body=body)
    return ingest_object(
        key,
        s3=cloud.client("s3"),
        ddb=cloud.client("dynamodb"),
        bucket=cloud.bucket,
        table=cloud.table,
    )


def test_ingest_takes_a_slots_objects_from_its_instance_and_refuses_another_instances(
    cloud: Cloud,
) -> None:
    _launched(cloud, 0, I_A)
    _launched(cloud, 1, I_B)
    fio = (FIXTURES / "fio" / "jsonplus-two-jobs.json").read_bytes()
    a, b = keys.owner_of("AROAEXAMPLEROLE00001", I_A), keys.owner_of("AROAEXAMPLEROLE00001", I_B)
    # the slot's own instance: rows
    own = _ingest(cloud, keys.raw_key(f"{SLOT0}/w00-fio-randread.json", a), fio)
    assert own[schema.FIO_RESULTS.name] > 0
    curated = keys.curated_key(schema.FIO_RESULTS.name, RUN, f"{SLOT0}/w00-fio-randread.json")
    mine = cloud.text(curated)
    # instance B writes into slot 0 (under its own prefix, as IAM lets it): refused
    forged = keys.raw_key(f"{SLOT0}/w00-fio-randread.json", b)
    assert _ingest(cloud, forged, fio) == {schema.INGEST_ERRORS.name: 1}
    assert cloud.text(curated) == mine  # slot 0's rows are untouched
    (error,) = [
        json.loads(cloud.text(k))
        for k in cloud.keys(f"{keys.CURATED_PREFIX}{schema.INGEST_ERRORS.name}/")
    ]
    assert error["object_key"] == forged
    assert (
        f"written by instance {I_B}" in error["reason"] and f"launched as {I_A}" in error["reason"]
    )
    # and outside any slot folder (the run's manifest is the plan Lambda's): refused
    run_json = keys.raw_key(f"{RUN}/run.json", b)
    assert _ingest(cloud, run_json, b'{"run_id": "x"}') == {schema.INGEST_ERRORS.name: 1}
    # a slot nobody launched: refused
    ghost = keys.raw_key(f"{RUN}/{CELL}/slot-0007/w00-fio-randread.json", a)
    assert _ingest(cloud, ghost, fio) == {schema.INGEST_ERRORS.name: 1}


# --- the instance's payload is its own -----------------------------------------------------


def _instance_session(cloud: Cloud, instance_id: str) -> tuple[dict[str, Any], str]:
    """Clients signed as an instance role's session named by the instance id (as EC2 does)."""
    iam = cloud.client("iam")
    name = f"instance-{cloud.table}"
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]
    creds = cloud.client("sts").assume_role(RoleArn=role["Arn"], RoleSessionName=instance_id)[
        "Credentials"
    ]
    session = boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=REGION,
    )
    clients = {n: session.client(n, endpoint_url=cloud.endpoint) for n in ("s3", "sts")}
    return clients, role["RoleId"]


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda **kw: self.calls.append((name, kw))


def test_the_instance_reads_the_payload_keyed_by_its_own_session(cloud: Cloud) -> None:
    clients, role_id = _instance_session(cloud, I_A)
    owner = whoami(clients["sts"])
    assert owner == f"{role_id}:{I_A}"
    folder = keys.payload_dir(RUN, CELL, "slot-0000")
    s3 = cloud.client("s3")
    # B's payload sits in the same kind of folder; A must not pick it up
    other = {"task_token": "B's token", "heartbeat_s": 600, "slot": {}}
    s3.put_object(Bucket=cloud.bucket, Key=f"{folder}{role_id}:{I_B}.json", Body=json.dumps(other))
    mine = {"task_token": TOKEN, "heartbeat_s": 600, "slot": {}}
    s3.put_object(
        Bucket=cloud.bucket,
        Key=keys.payload_key(RUN, CELL, "slot-0000", owner),
        Body=json.dumps(mine),
    )
    sfn = _Recorder()
    argv = ["--region", REGION, "--bucket", cloud.bucket, "--key", folder, "--heartbeat"]
    assert main(argv, clients={**clients, "stepfunctions": sfn, "dynamodb": None, "ec2": None}) == 0
    assert sfn.calls == [("send_task_heartbeat", {"taskToken": TOKEN})]


def test_the_instance_waits_for_a_payload_the_launcher_has_not_written_yet(cloud: Cloud) -> None:
    s3 = cloud.client("s3")
    key = f"{keys.payload_dir(RUN, CELL, 'slot-0000')}AROAEXAMPLEROLE00001:{I_A}.json"
    now = [0.0]
    naps: list[float] = []

    def launcher_writes_it_during_the_second_nap(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds
        if len(naps) == 2:
            s3.put_object(Bucket=cloud.bucket, Key=key, Body=b'{"task_token": "t"}')

    doc = read_payload(
        s3,
        cloud.bucket,
        key,
        wait_s=60,
        poll_s=2,
        clock=lambda: now[0],
        sleep=launcher_writes_it_during_the_second_nap,
    )
    assert doc == {"task_token": "t"} and naps == [2, 2]


def test_the_instance_gives_up_on_a_payload_that_never_comes(cloud: Cloud) -> None:
    now = [0.0]

    def nap(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(Exception, match="NoSuchKey"):
        read_payload(
            cloud.client("s3"),
            cloud.bucket,
            "control/never.json",
            wait_s=10,
            poll_s=2,
            clock=lambda: now[0],
            sleep=nap,
        )
    assert now[0] == 10


def test_a_payload_folder_without_an_instance_session_is_refused(
    cloud: Cloud, capsys: pytest.CaptureFixture[str]
) -> None:
    clients = {"s3": cloud.client("s3"), "sts": cloud.client("sts"), "stepfunctions": _Recorder()}
    folder = keys.payload_dir(RUN, CELL, "slot-0000")
    argv = ["--region", REGION, "--bucket", cloud.bucket, "--key", folder, "--heartbeat"]
    assert main(argv, clients=clients) == 1
    assert "no instance-role session here" in capsys.readouterr().err
