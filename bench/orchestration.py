"""Figures 6 and 7: Step Functions transitions and the fleet step, in the local cloud.

The real state machine (the synthesized template's definition, intrinsics
resolved by `infra.asl` to Lambda functions created in moto) is executed by
moto's Step Functions interpreter, in process (`mock_aws` with
`execute_state_machine`). moto runs no Lambda code without Docker, so every
Lambda invoke is routed to a stub in this process that answers with the
shape the definition reads (`$.result.valid`, `$.cells`, `$.prepared.result
.storage.ready`, `$.prepared.result.slots`, ...): one valid cell of N slots,
storage ready, no populate step; the happy path. The Launch stub records
each slot's task token; once all N launch requests are in flight the
simulated agents answer them all with `SendTaskSuccess` (the start barrier:
nobody finishes before everybody started).

Transitions: Step Functions Standard bills one transition per state entered
(plus retries). The parent execution's states are counted from moto's
`GetExecutionHistory` (events `*StateEntered`). The Distributed Map's child
executions (one per slot) are not listable through moto's API
(`ListExecutions(mapRunArn=...)` fails in moto 5.2), so their events are
read where moto records them: a hook on its `EventManager.add_event`
tallies every history event of every execution, parent and children.

Fleet step: from the `Fleet` Map state being entered to the N-th Launch
invoke arriving (N launch requests in flight), timed in this process.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench.common import MEASURED, ROOT, Context, stat

PRICE_PER_1000_TRANSITIONS_USD = 0.025  # Standard workflows, us-east-1 list price
TARGET_TRANSITIONS_PER_SLOT = 12.0
FLEET_MAP_STATE = "Fleet"
SLOT_STATE = "RunSlot"


class _Recorder:
    """Every history event moto's interpreter emits, tagged by its EventManager."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[int, str, str | None, float]] = []  # manager, type, state, t
        self.launches: list[tuple[float, str]] = []  # (t, task token)

    def add(self, manager: object, event_type: str, details: Any) -> None:
        name = None
        if isinstance(details, dict):
            entered = details.get("stateEnteredEventDetails")
            if isinstance(entered, dict):
                name = entered.get("name")
        with self.lock:
            kind = str(getattr(event_type, "value", event_type))
            self.events.append((id(manager), kind, name, time.monotonic()))


def _stub_response(function: str, payload: dict[str, Any], slots: int, rec: _Recorder) -> Any:
    if "PlanFn" in function:
        return {
            "valid": True,
            "run_id": "bench-orchestration",
            "stop_on_failure": False,
            "cell_concurrency": 1,
            "cells": [
                {
                    "cell_id": f"c000-bench-x{slots}-r1",
                    "has_populate": False,
                    "heartbeat_s": 900,
                    "timeout_s": 7200,
                }
            ],
        }
    if "PrepareCell" in function:
        # the Fleet map's items as PrepareCell hands them over, every slot in wave 0: this
        # figure is the orchestration's own cost; the launch waves (launch.launch_schedule,
        # 20 slots every 10 s on AWS) add their Wait on top by design
        items = [{"slot_index": i, "launch_after_s": 0} for i in range(slots)]
        return {"storage": {"ready": True, "kind": "ebs"}, "slots": items}
    if "LaunchFn" in function:
        token = payload.get("task_token")
        if not token:
            raise RuntimeError("a Launch invoke without task_token")
        with rec.lock:
            rec.launches.append((time.monotonic(), token))
        return {"instance_id": "i-bench", "slot_index": payload.get("slot_index")}
    if "SummarizeFn" in function:
        return {"status": "SUCCEEDED"}
    return {"status": "SUCCEEDED"}


def _template(ctx: Context) -> dict[str, Any]:
    path = ctx.work / "cdk.out" / "IofleetStack.template.json"
    if not path.is_file():
        from bench.cold_start import synth

        synth(ctx)
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def run_execution(
    template: dict[str, Any],
    slots: int,
    timeout_s: float = 300,
    agents: Callable[[list[tuple[float, str]]], None] | None = None,
) -> dict[str, Any]:
    """One execution of the real state machine in moto; counts and timings.

    `agents`, if given, is called with every launch (its monotonic arrival time,
    its task token) once every launch request is in flight, before the tokens are
    answered (bench/fleet_scale.py runs the start barrier there, as the instances
    would between launch and their results).
    """
    import boto3
    from moto import mock_aws
    from moto.awslambda_simple import models as lambda_simple
    from moto.stepfunctions.parser.asl.eval.event import event_manager

    from infra.asl import state_machine_definitions

    rec = _Recorder()
    original_invoke = lambda_simple.LambdaSimpleBackend.invoke
    original_add = event_manager.EventManager.add_event

    def invoke(self: Any, function_name: str, qualifier: Any, body: Any, *args: Any) -> str:
        payload = json.loads(body) if body else {}
        return json.dumps(_stub_response(function_name, payload, slots, rec))

    def add_event(
        self: Any,
        context: Any,
        event_type: Any,
        event_details: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> int:
        rec.add(self, event_type, event_details)
        return original_add(self, context, event_type, event_details, *args, **kwargs)

    saved_env = {
        k: os.environ.get(k)
        for k in (
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT_URL",
        )
    }
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    lambda_simple.LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
    event_manager.EventManager.add_event = add_event  # type: ignore[method-assign]
    try:
        config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
        with mock_aws(config=config):  # type: ignore[arg-type]
            iam, lam, sfn = (boto3.client(s) for s in ("iam", "lambda", "stepfunctions"))
            role = iam.create_role(RoleName="bench-sfn", AssumeRolePolicyDocument="{}")
            role_arn = role["Role"]["Arn"]
            code = io.BytesIO()
            with zipfile.ZipFile(code, "w") as z:
                z.writestr("handler.py", "def handler(event, context):\n    return None\n")
            arns = {}
            for logical, res in template["Resources"].items():
                if res.get("Type") == "AWS::Lambda::Function":
                    arns[logical] = lam.create_function(
                        FunctionName=logical,
                        Runtime="python3.12",
                        Role=role_arn,
                        Handler="handler.handler",
                        Code={"ZipFile": code.getvalue()},
                    )["FunctionArn"]
            definitions = state_machine_definitions(template, arns)
            if len(definitions) != 1:
                raise RuntimeError(f"expected one state machine, found {len(definitions)}")
            definition = next(iter(definitions.values()))
            machine = sfn.create_state_machine(
                name="iofleet-bench", definition=json.dumps(definition), roleArn=role_arn
            )["stateMachineArn"]
            started = time.monotonic()
            execution = sfn.start_execution(
                stateMachineArn=machine, name="bench", input=json.dumps({"name": "bench"})
            )["executionArn"]
            deadline = started + timeout_s
            while len(rec.launches) < slots and time.monotonic() < deadline:
                if sfn.describe_execution(executionArn=execution)["status"] != "RUNNING":
                    break
                time.sleep(0.02)  # polling the local engine, not synchronisation
            in_flight = len(rec.launches)
            if agents is not None and in_flight == slots:
                agents(sorted(rec.launches))
            for _, token in list(rec.launches):  # the agents: every slot done
                sfn.send_task_success(taskToken=token, output="{}")
            status = "RUNNING"
            while time.monotonic() < deadline:
                status = sfn.describe_execution(executionArn=execution)["status"]
                if status != "RUNNING":
                    break
                time.sleep(0.02)
            finished = time.monotonic()
            child_executions = sum(
                sfn.describe_map_run(mapRunArn=run["mapRunArn"])["executionCounts"]["total"]
                for run in sfn.list_map_runs(executionArn=execution)["mapRuns"]
            )
            history = sfn.get_execution_history(executionArn=execution, maxResults=1000)
            events = history["events"]
            while history.get("nextToken"):
                history = sfn.get_execution_history(
                    executionArn=execution, maxResults=1000, nextToken=history["nextToken"]
                )
                events += history["events"]
    finally:
        lambda_simple.LambdaSimpleBackend.invoke = original_invoke  # type: ignore[method-assign]
        event_manager.EventManager.add_event = original_add  # type: ignore[method-assign]
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if status != "SUCCEEDED":
        raise RuntimeError(f"the execution ended {status} with {in_flight}/{slots} slots launched")
    parent_entered = [e for e in events if str(e["type"]).endswith("StateEntered")]
    parent_states = Counter(e["stateEnteredEventDetails"]["name"] for e in parent_entered)
    # The parent's event manager is the one that entered the Fleet Map state;
    # moto keeps the Distributed Map's child executions in other managers.
    parents = {m for m, _, name, _ in rec.events if name == FLEET_MAP_STATE}
    child_entered = [
        name
        for m, etype, name, _ in rec.events
        if m not in parents and etype.endswith("StateEntered")
    ]
    fleet_entered = [
        t
        for _, etype, name, t in rec.events
        if etype == "MapStateEntered" and name == FLEET_MAP_STATE
    ]
    if not fleet_entered or in_flight < slots:
        raise RuntimeError(f"only {in_flight}/{slots} launch requests were in flight")
    nth_launch = sorted(t for t, _ in rec.launches)[slots - 1]
    return {
        "parent_transitions": len(parent_entered),
        "parent_states": dict(parent_states),
        "child_executions": child_executions,
        "child_transitions": len(child_entered),
        "child_states": dict(Counter(child_entered)),
        "fleet_step_s": nth_launch - fleet_entered[0],
        "start_to_all_launched_s": nth_launch - started,
        "execution_s": finished - started,
    }


def measure_both(ctx: Context) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both figures from the same executions: (orchestration, fleet_step)."""
    import sys

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # infra.asl
    scale = ctx.scale
    template = _template(ctx)
    slots = scale.orchestration_slots
    repeats = scale.orchestration_repeats
    runs = []
    for i in range(repeats):
        got = run_execution(template, slots)
        runs.append(got)
        ctx.log(
            f"orchestration {i + 1}/{repeats}: {got['parent_transitions']} + "
            f"{got['child_transitions']} transitions, fleet step {got['fleet_step_s']:.2f} s"
        )
    first = runs[0]
    totals = [r["parent_transitions"] + r["child_transitions"] for r in runs]
    per_slot = [t / slots for t in totals]
    price = [t * PRICE_PER_1000_TRANSITIONS_USD / 1000 for t in totals]
    per_slot_stat = stat(per_slot, "transitions/slot", 3)
    method = (
        "real state machine (synthesized definition) executed by moto's Step Functions in "
        "process; Lambda invokes routed to in-process stubs returning the happy-path shapes "
        f"(one cell of {slots} slots, storage ready, no populate, every slot in the first "
        "launch wave: the AWS schedule's waves of 20 slots every 10 s are left out); "
        "parent transitions from "
        "GetExecutionHistory *StateEntered events, child (per-slot) executions from moto's "
        "event manager; simulated agents answer every task token once all are in flight"
    )
    orchestration = {
        "status": MEASURED,
        "method": method,
        "source": "local-cloud execution (moto), Lambda stubs",
        "slots_per_cell": slots,
        "parent_states_entered": first["parent_states"],
        "child_executions": first["child_executions"],
        "child_states_entered": first["child_states"],
        "transitions_per_slot_execution": first["child_transitions"]
        / max(1, first["child_executions"]),
        "transitions_run_and_cell": stat((r["parent_transitions"] for r in runs), "transitions", 0),
        "transitions_per_cell": stat(totals, "transitions", 0),
        "transitions_per_slot": per_slot_stat,
        "price_per_cell_usd": stat(price, "USD", 5),
        "price_per_1000_transitions_usd": PRICE_PER_1000_TRANSITIONS_USD,
        "targets": {"transitions_per_slot": TARGET_TRANSITIONS_PER_SLOT},
        "met": {"transitions_per_slot": per_slot_stat["max"] <= TARGET_TRANSITIONS_PER_SLOT},
        "not_counted": (
            "retries (none on the happy path), StorageReady? polling (3 transitions per 15 s "
            "wait while shared storage is created), PopulateOnce (1 more per cell), the "
            "ingest path (SQS -> Lambda, no Step Functions)"
        ),
    }
    fleet_step = {
        "status": MEASURED,
        "method": (
            f"same executions: time from the {FLEET_MAP_STATE} Map state entered to the "
            f"{slots}-th Launch invoke (task token) arriving; moto's interpreter, in process, "
            "on this 2-core machine (not AWS's Distributed Map start rate)"
        ),
        "slots": slots,
        "fleet_step_s": stat((r["fleet_step_s"] for r in runs), "s", 3),
        "start_to_all_launched_s": stat((r["start_to_all_launched_s"] for r in runs), "s", 3),
        "execution_s": stat((r["execution_s"] for r in runs), "s", 3),
    }
    return orchestration, fleet_step
