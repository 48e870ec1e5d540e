"""Plan handler against moto server: valid matrices are recorded, bad ones create nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from iofleet.aws import keys
from lambdas.plan import handler as plan
from tests.unit.lambdas.conftest import Cloud, FakeLambdaContext, example

STARTED = "2026-11-21T05:12:00.000Z"
ARN = "arn:aws:states:us-east-1:123456789012:execution:sm:abc"
ARN_HASH = hashlib.sha256(ARN.encode()).hexdigest()[:8]


def _event(matrix: object) -> dict[str, object]:
    return {
        "matrix": matrix,
        "execution_arn": ARN,
        "execution_name": "abc",
        "started_at": STARTED,
    }


def test_valid_matrix_writes_plan_run_json_and_run_item(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    # given the seed 000 matrix (4 instance types, 1 storage, fleet size 1)
    out = plan.handler(_event(example("seed000-ebs-optimized-ceiling.json")), context)
    # then
    run_id = "seed000-ebs-optimized-ceiling-20261121t051200z-" + ARN_HASH
    assert out["valid"] is True and out["run_id"] == run_id
    assert [c["fleet_size"] for c in out["cells"]] == [1, 1, 1, 1]
    assert cloud.keys() == [f"control/{run_id}/plan.json", f"raw/{run_id}/run.json"]
    manifest = json.loads(cloud.text(f"raw/{run_id}/run.json"))
    assert manifest["run_id"] == run_id and len(manifest["plan"]["cells"]) == 4
    item = cloud.item(f"run#{run_id}", "run")
    assert item is not None and item["status"]["S"] == "RUNNING"
    assert (
        cloud.item("exec#arn:aws:states:us-east-1:123456789012:execution:sm:abc", "exec")
        is not None
    )


def test_app_with_populate_is_flagged_on_its_cell(
    cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_INSTANCES", "2000")  # seed 004 needs 1,805 instances in all
    out = plan.handler(_event(example("seed004-yocto-fleet.json")), context)
    assert out["valid"] is True
    assert all(c["has_populate"] for c in out["cells"])


def test_bad_matrix_returns_error_lines_and_writes_nothing(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    matrix = example("seed000-ebs-optimized-ceiling.json")
    matrix["storage"][0]["iops"] = "lots"
    matrix["bogus"] = 1
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is False
    assert out["error_text"] == "\n".join(out["errors"])
    assert any(line.startswith("storage[0].iops:") for line in out["errors"])
    assert any(line.startswith("bogus:") for line in out["errors"])
    assert cloud.keys() == []
    assert cloud.client("dynamodb").scan(TableName=cloud.table)["Count"] == 0


def test_deployment_instance_cap_rejects_big_plans(
    cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_INSTANCES", "3")
    out = plan.handler(_event(example("seed000-ebs-optimized-ceiling.json")), context)
    assert out["valid"] is False
    assert out["errors"][0].startswith("limits.max_instances: plan needs 4 instances")


def test_executions_started_in_the_same_second_get_different_run_ids(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    # given two executions of one matrix that Step Functions started in the same second
    matrix = example("seed000-ebs-optimized-ceiling.json")
    first = plan.handler(_event(matrix), context)
    other = dict(_event(matrix), execution_arn=ARN[:-3] + "def", execution_name="def")
    second = plan.handler(other, context)
    # then: two runs, each with its own raw run.json and plan, both in the same dt partition
    assert first["run_id"] != second["run_id"]
    for out in (first, second):
        assert json.loads(cloud.text(f"raw/{out['run_id']}/run.json"))["run_id"] == out["run_id"]
        assert keys.run_date(out["run_id"]) == "2026-11-21"
    # and a retry of the first execution's Plan step lands on the same run id
    assert plan.handler(_event(matrix), context)["run_id"] == first["run_id"]
