"""Plan handler against moto server: valid matrices are recorded, bad ones create nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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


# --- the matrix probe set through the Plan Lambda (tests/data/probes/matrices) -------------

PROBES = Path(__file__).resolve().parents[2] / "data" / "probes" / "matrices"
EXPECTED: dict[str, dict] = json.loads((PROBES / "expected.json").read_text())
# what reaches the handler: the Lambda runtime parses the event with Python's json, which
# takes NaN and Infinity; probes it cannot parse never reach the handler (lambda: false)
LAMBDA_PROBES = sorted(n for n, e in EXPECTED.items() if e.get("lambda", True))


def _paths(lines: list[str]) -> list[str]:
    return [line.split(": ", 1)[0] for line in lines]


@pytest.mark.parametrize("name", LAMBDA_PROBES)
def test_bad_matrix_probe_fails_the_plan_lambda_at_the_same_paths(
    name: str, cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_INSTANCES", "100000")  # only the matrix's own limits apply
    # given the probe as the Lambda runtime would hand it over
    matrix = json.loads((PROBES / f"{name}.json").read_bytes())
    # when the Plan Lambda validates it
    out = plan.handler(_event(matrix), context)
    # then the matrix fails at the same paths as `iofleet plan --target aws`, nothing is written
    assert out["valid"] is False
    expected = EXPECTED[name]["stderr"]
    if EXPECTED[name]["target"] == "aws":
        assert _paths(out["errors"]) == _paths(expected)
    assert all("\n" not in line for line in out["errors"])
    assert cloud.keys() == []
    assert cloud.client("dynamodb").scan(TableName=cloud.table)["Count"] == 0


def test_plan_lambda_refuses_an_oversized_matrix_without_expanding_it(
    cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iofleet.plan.matrix

    def no_cells(*args: object, **kwargs: object) -> None:
        raise AssertionError("the plan was expanded")

    monkeypatch.setattr(iofleet.plan.matrix, "Cell", no_cells)
    matrix = example("seed000-ebs-optimized-ceiling.json")
    # 4 instance types x 100 fleet sizes x 1000 repeats = 400,000 cells
    matrix.update(parallelism=list(range(1, 101)), repeats=1000)
    matrix["limits"] = {"max_instances": 100_000}
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is False
    assert out["errors"] == [
        "limits.max_instances: plan needs 20200000 instances, over the limit of 100000",
        "plan has 400000 cells (instance types x storage x parallelism x repeats), "
        "over the limit of 500 cells per run",
    ]
    assert cloud.keys() == []


def test_longest_slot_timeout_fits_step_functions_and_the_launch(
    cloud: Cloud, context: FakeLambdaContext
) -> None:
    from iofleet.agent.payload import MAX_SLOT_TIMEOUT_S
    from iofleet.aws.launch import expires_at
    from iofleet.aws.userdata import UserDataParams, render_user_data

    matrix = example("seed000-ebs-optimized-ceiling.json")
    matrix["slot_timeout_s"] = MAX_SLOT_TIMEOUT_S
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is True
    for cell in out["cells"]:
        # Step Functions: HeartbeatSeconds < TimeoutSeconds, a standard execution <= 1 year
        assert 0 < cell["heartbeat_s"] < cell["timeout_s"] <= 365 * 24 * 3600
    assert expires_at(MAX_SLOT_TIMEOUT_S).endswith("Z")
    script = render_user_data(
        UserDataParams(
            region="us-east-1",
            bucket="b",
            payload_key="k",
            agent_bucket="b",
            agent_key="a",
            time_limit_s=MAX_SLOT_TIMEOUT_S,
        )
    )
    assert f" {MAX_SLOT_TIMEOUT_S} " in script


@pytest.mark.parametrize("value", [10**12, 0, -1, 1.5, "7200", None])
def test_launch_refuses_a_manifest_slot_timeout_it_cannot_express(value: object) -> None:
    from iofleet.aws.launch import slot_time_limit

    with pytest.raises(ValueError, match="slot_timeout_s must be an integer from 1 to 604800"):
        slot_time_limit({"run_id": "r", "slot_timeout_s": value})


def test_the_largest_plan_fits_one_step_functions_state(
    cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iofleet.plan.matrix import MAX_CELLS

    monkeypatch.setenv("MAX_INSTANCES", "100000")
    # the longest names the rules allow, as many cells as a run may have
    matrix = example("seed000-ebs-optimized-ceiling.json")
    matrix["name"] = "n" * 48
    matrix["instance_types"] = [("m7" + "a" * 40)[:29] + ".48xlarge"]
    matrix["storage"][0]["label"] = "l" * 32
    matrix["parallelism"] = [100 - i for i in range(MAX_CELLS // 10)]
    matrix["repeats"] = 10
    matrix["limits"] = {"max_instances": 100_000}
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is True and len(out["cells"]) == MAX_CELLS
    # the Plan task's result is the state the Cells Map iterates: 256 KiB at most
    assert len(json.dumps(out).encode()) < 256 * 1024


def test_heartbeat_stays_below_the_task_timeout(
    cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a deployment's heartbeat longer than the shortest slot's task timeout
    monkeypatch.setenv("HEARTBEAT_S", "100000")
    matrix = example("seed000-ebs-optimized-ceiling.json")
    matrix["slot_timeout_s"] = 3600
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is True
    assert all(0 < c["heartbeat_s"] < c["timeout_s"] for c in out["cells"])


def test_matrix_prices_reach_the_run_json_in_s3_and_its_cost_rows(
    cloud: Cloud, context: FakeLambdaContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Plan step prices the run from the matrix alone: FSx rates given in the matrix
    (round TEST RATES, not AWS prices) price seed 004's OpenZFS cells in run.json."""
    from iofleet.results.ingest import rows_for_artifact

    monkeypatch.setenv("MAX_INSTANCES", "2000")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    matrix = example("seed004-yocto-fleet.json")
    matrix["prices"] = {
        "as_of": "2026-11-20",
        "source": "test rates, not AWS prices",
        "regions": {
            "us-east-1": {
                "fsx-openzfs": {
                    "deployment_types": {
                        "SINGLE_AZ_1": {
                            "ssd_gib_month": 0.1,
                            "throughput_mbps_month": 0.2,
                            "iops_month": 0.01,
                        }
                    }
                }
            }
        },
    }
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is True
    run_id = out["run_id"]
    text = cloud.text(f"raw/{run_id}/run.json")
    manifest = json.loads(text)
    assert manifest["matrix"]["prices"] == matrix["prices"]
    assert manifest["plan"]["matrix_prices"]["sections"] == ["fsx-openzfs"]
    fsx_cells = [c for c in manifest["plan"]["cells"] if c["storage_type"] == "fsx-openzfs"]
    assert len(fsx_cells) == 5
    for cell in fsx_cells:
        items = {i["item"] for i in cell["cost"]["items"]}
        assert "fsx-openzfs SINGLE_AZ_1 throughput capacity" in items
        assert not [u for u in cell["cost"]["unknown"] if u.startswith("fsx-")]
    rows = rows_for_artifact(f"{run_id}/run.json", text)["cell_costs"]
    by_cell = {r["cell_id"]: r for r in rows}
    for cell in fsx_cells:
        assert by_cell[cell["cell_id"]]["estimated_cost_usd"] == cell["estimated_cost_usd"]


def test_a_fio_option_typo_fails_the_plan_lambda_without_fio_and_writes_nothing(
    cloud: Cloud,
    context: FakeLambdaContext,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # the Lambda has no fio binary: the option table of the hosts' fio (24.04: 3.36) decides
    monkeypatch.setenv("PATH", str(tmp_path))
    library = tmp_path / "jobs"
    library.mkdir()
    (library / "typo.fio").write_text(
        "; typo\n; @param TARGET=.  where\n[x]\ndirectory=${TARGET}\nsize=1m\niodepht=32\n"
    )
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(library))
    matrix = example("seed000-ebs-optimized-ceiling.json")
    matrix["workloads"] = [{"fio": "typo"}]
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is False
    assert out["errors"] == [
        "workloads[0].fio: job 'typo' for fio 3.36: typo.fio:6: [x] unknown fio option "
        "'iodepht' (did you mean 'iodepth'?)"
    ]
    assert cloud.keys() == []
    assert cloud.client("dynamodb").scan(TableName=cloud.table)["Count"] == 0


def test_a_matrix_pinning_another_job_text_than_the_deployed_one_writes_nothing(
    cloud: Cloud, context: FakeLambdaContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a matrix pinning the shipped seed 002 job (what `iofleet plan` checked here) ...
    matrix = example("seed002-io2-vs-gp2-logging.json")
    name = matrix["workloads"][0]["fio"]
    shipped = (Path(__file__).resolve().parents[3] / "fio-jobs" / f"{name}.fio").read_bytes()
    matrix["workloads"][0]["job_sha256"] = hashlib.sha256(shipped).hexdigest()
    # ... and a deployment whose library holds another text of that job
    deployed = tmp_path / "deployed"
    deployed.mkdir()
    (deployed / f"{name}.fio").write_bytes(shipped.replace(b"bs=64k", b"bs=32k", 1))
    assert (deployed / f"{name}.fio").read_bytes() != shipped
    monkeypatch.setenv("IOFLEET_FIO_JOBS", str(deployed))
    out = plan.handler(_event(matrix), context)
    # then the execution fails at its first step, naming the pin, and nothing is written
    assert out["valid"] is False
    assert [line.split(":")[0] for line in out["errors"]] == ["workloads[0].job_sha256"]
    assert cloud.keys() == []
    assert cloud.client("dynamodb").scan(TableName=cloud.table)["Count"] == 0
    # with the library it was pinned from, the plan records the pin on every cell
    monkeypatch.delenv("IOFLEET_FIO_JOBS")
    out = plan.handler(_event(matrix), context)
    assert out["valid"] is True
    manifest = json.loads(cloud.text(f"raw/{out['run_id']}/run.json"))
    pins = {w["job_sha256"] for c in manifest["plan"]["cells"] for w in c["workloads"]}
    assert pins == {matrix["workloads"][0]["job_sha256"]}
