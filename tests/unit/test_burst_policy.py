"""burst_policy from the plan to the slot payload: the computed waits and drains."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from iofleet.agent.payload import PayloadError, parse_payload
from iofleet.agent.slot import drain_argv
from iofleet.plan.expect import CellContext, StorageSpec, burst_actions
from iofleet.plan.matrix import build_plan, validate_matrix_dict


def fio(name: str, **params: str) -> dict:
    return {"kind": "fio", "name": name, "params": params}


QD1_60S = fio("latency-4k-qd1-randread", RUNTIME="60")
GP2_100 = StorageSpec("gp2", size_gib=100)


# -- expect.burst_actions ------------------------------------------------------------


def test_as_is_has_no_actions() -> None:
    assert burst_actions(CellContext("m6i.4xlarge", GP2_100), [QD1_60S]) == []


def test_drain_also_empties_the_instances_ebs_burst() -> None:
    # m6i.4xlarge: 40,000 IOPS for 1,800 s above its 20,000 baseline
    ctx = CellContext("m6i.4xlarge", StorageSpec("io2", 100, 16000), burst_policy="drain")

    [action] = burst_actions(ctx, [QD1_60S])

    assert action["seconds"] == pytest.approx(1800)


def test_drain_empties_the_gp2_bucket_at_burst_minus_baseline() -> None:
    # seed 001: gp2 100 GiB, 5.4M credits drained at 3000 - 300 per second
    ctx = CellContext("m6i.4xlarge", GP2_100, burst_policy="drain")

    [action] = burst_actions(ctx, [QD1_60S])

    assert action["workload_index"] == 0
    assert action["action"] == "drain"
    assert action["seconds"] == pytest.approx(2000)
    assert (action["rw"], action["bs"]) == ("randwrite", "16k")  # an operations bucket


def test_drain_of_a_throughput_bucket_uses_large_sequential_writes() -> None:
    # st1 1 TiB: 1 TiB of credits drained at 250 - 40 MiB/s
    ctx = CellContext("m6i.4xlarge", StorageSpec("st1", size_gib=1024), burst_policy="drain")

    action = burst_actions(ctx, [fio("seq-read-1m-qd32", RUNTIME="60")])[0]

    assert (action["rw"], action["bs"]) == ("write", "1m")
    assert action["seconds"] == pytest.approx(1024 * 1024 / 210, abs=0.1)


def test_refill_waits_only_for_credits_already_spent() -> None:
    # two 1000 s jobs: nothing to wait for before the first, 2.7M / 300 s before the second
    ctx = CellContext("m6i.4xlarge", GP2_100, burst_policy="refill")
    job = fio("latency-4k-qd1-randread", RUNTIME="1000")

    actions = burst_actions(ctx, [job, {"kind": "ioping"}, job])

    assert actions == [{"workload_index": 2, "action": "refill", "seconds": 9000.0}]


def test_no_bucket_anywhere_needs_no_action() -> None:
    # io2 has no bucket; an instance type missing from the snapshot has no figures at all
    ctx = CellContext("x9.large", StorageSpec("io2", 100, 16000), burst_policy="drain")

    assert burst_actions(ctx, [QD1_60S]) == []


# -- the plan carries the payload's "burst" ------------------------------------------


def _matrix(storage: dict, policy: str) -> dict:
    return {
        "name": "burst",
        "instance_types": ["m6i.4xlarge"],
        "storage": [storage],
        "workloads": [{"fio": "latency-4k-qd1-randread", "params": {"RUNTIME": 60}}],
        "parallelism": [1],
        "burst_policy": policy,
    }


def test_aws_plan_cell_carries_the_burst_payload() -> None:
    storage = {"type": "ebs", "label": "gp2", "volume_type": "gp2", "size_gib": 100}
    plan = build_plan(validate_matrix_dict(_matrix(storage, "drain")), "aws")

    burst = plan.to_dict()["cells"][0]["burst"]

    assert burst["policy"] == "drain"
    assert [a["seconds"] for a in burst["actions"]] == [pytest.approx(2000)]


def test_local_plan_has_no_burst_actions_and_one_run_note(tmp_path: Path) -> None:
    storage = {"type": "local", "label": "here", "path": str(tmp_path)}
    plan = build_plan(validate_matrix_dict(_matrix(storage, "refill")), "local")

    doc = plan.to_dict()

    assert doc["cells"][0]["burst"] == {"policy": "refill", "actions": []}
    assert doc["cells"][0]["warnings"] == []
    assert any("no published ceiling" in n for n in doc["notes"])
    assert any("burst_policy refill" in n for n in doc["notes"])


# -- the agent's payload -----------------------------------------------------------------

PAYLOAD: dict = {
    "run_id": "r-1",
    "cell": {"cell_id": "c000"},
    "slot_index": 0,
    "target": {"kind": "directory", "path": "/tmp/t"},
    "workloads": [{"kind": "fio", "name": "latency-4k-qd1-randread"}],
    "results": {"kind": "directory", "root": "/tmp/raw"},
}


def _with_burst(burst: object) -> dict:
    doc = copy.deepcopy(PAYLOAD)
    doc["burst"] = burst
    return doc


def test_payload_without_burst_is_as_is() -> None:
    spec = parse_payload(copy.deepcopy(PAYLOAD))

    assert (spec.burst.policy, spec.burst.actions) == ("as-is", ())


def test_payload_burst_actions_are_parsed_with_defaults() -> None:
    burst = {"policy": "drain", "actions": [{"workload_index": 0, "seconds": 1.5}]}

    spec = parse_payload(_with_burst(burst))

    action = spec.burst.before(0)
    assert action is not None
    assert (action.action, action.seconds, action.rw, action.bs, action.size) == (
        "drain",
        1.5,
        "randwrite",
        "16k",
        "1g",
    )
    assert spec.burst.before(1) is None


@pytest.mark.parametrize(
    ("burst", "message"),
    [
        ({"policy": "wait"}, "burst.policy: must be one of as-is, refill, drain"),
        ({"policy": "drain", "actions": {}}, "burst.actions: must be a list"),
        (
            {"policy": "drain", "actions": [{"workload_index": 0, "seconds": -1}]},
            "burst.actions[0].seconds: must be a number from 0 up to 86400",
        ),
        (
            {"policy": "drain", "actions": [{"workload_index": 0, "rw": "trim"}]},
            "burst.actions[0].rw: must be randwrite, write, randread or read",
        ),
        (
            {"policy": "drain", "actions": [{"workload_index": 0, "bs": "16k; rm"}]},
            "burst.actions[0].bs: a fio size like 16k or 1g",
        ),
    ],
)
def test_bad_burst_is_one_line_error(burst: object, message: str) -> None:
    with pytest.raises(PayloadError) as info:
        parse_payload(_with_burst(burst))

    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_drain_command_runs_time_based_for_the_computed_seconds() -> None:
    action = parse_payload(
        _with_burst({"policy": "drain", "actions": [{"workload_index": 0, "seconds": 2.25}]})
    ).burst.actions[0]

    argv = drain_argv(action, "iofleet-drain.dat", "8m")

    assert argv[0] == "fio"
    assert {"--time_based", "--runtime=2250ms", "--size=8m", "--direct=1"} <= set(argv)
    assert "--filename=iofleet-drain.dat" in argv
    json.dumps(argv)  # plain strings only


def test_local_plan_text_prints_one_note_instead_of_warnings_per_cell(tmp_path: Path) -> None:
    from iofleet.plan.matrix import render_plan_table

    doc = _matrix({"type": "local", "label": "here", "path": str(tmp_path)}, "as-is")
    doc["parallelism"] = [1, 2]
    plan = build_plan(validate_matrix_dict(doc), "local")

    text = render_plan_table(plan)

    assert text.count("no published ceiling") == 1
    assert "limited_by unknown" in text
    assert "no figure for storage" not in text
