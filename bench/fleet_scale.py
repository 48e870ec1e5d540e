"""Figure 8, fleet scale: a cell of 200 and of 1,000 slots through the real definition.

For each fleet size N, one execution of the real state machine (the synthesized
definition, in moto's Step Functions interpreter, as figures 6 and 7:
`bench.orchestration.run_execution`, Lambda invokes answered by in-process
stubs) with lightweight simulated agents (no fio, no instance):

- launch: from the `Fleet` Map state entered to the N-th Launch invoke answered
  (every slot's launch request in flight, each holding its task token), with the
  bench process's garbage collector paused (`_execution`: moto's heap, not the
  state machine, made full collections grow faster than the fleet), and the
  per-slot cost: launch / N and the gaps between consecutive launch requests
  (min / median / p90 / max). One more execution per size with the collector on
  tallies its pauses inside the launch window, so the figure keeps the cause;
- start barrier: once every launch is in flight, N agents (`bench.fleet_agents`:
  threads of several worker processes), each arriving after the same delay from
  the first as its launch request had (the launch spacing replayed), run the
  agent's real DynamoDB barrier (`iofleet.aws.barrier.DynamoBarrier.wait`) on
  DynamoDB Local, every poll timed; then the slots' task tokens are answered.
  Release skew = latest minus earliest instant at which an agent passed the
  barrier (its wall clock right after `sleep_until` returned); `late` counts
  agents that first saw the release record after its instant, and the on-time
  skew is the same spread over the agents that were not late; the reads per
  second the harness served before the release, against the rate the barrier
  designs for (N / poll interval), say whether lateness is the harness'; and a
  control: the same worker processes and threads each sleeping (`sleep_until`)
  until one instant, no barrier, no reads (`wake_floor`): the spread this
  machine puts on N wake-ups, the floor under the barrier's skew here;
- ingest: every slot's artifacts (slot.json, manifest.json and one fio JSON+
  result per slot, copied from one real `iofleet local` slot) put in S3 (moto, in
  process) and curated by the ingest Lambda's own code (`iofleet.aws.curate.
  ingest_object`, what each SQS record runs), one artifact after another: the
  cost of a fleet's results, not the Lambda's concurrency. Once per size (n = 1):
  it is the slowest part and the bench must stay under 15 minutes.

What in the harness limits it, on this 2-core machine: the same 2 cores run every
agent's boto3 client (about 1.3 ms of CPU per GetItem) and DynamoDB Local, which
together serve fewer strongly consistent reads a second than 1,000 parties polling
once a second ask for, so polls queue and some parties read the release late; N
agents wake at one instant on 2 cores (on AWS, one per instance); moto's
interpreter runs the Distributed Map's child executions in the bench process. On
AWS each agent has its own instance and clock (clock offsets between instances,
not measured here, add to the skew there).
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from bench.common import MEASURED, ROOT, Context, Timer, stat

SKEW_TARGET_MS = 50.0
RUN_ID = "bench-fleet-20261123t000000z-0001"
FIO_FIXTURE = "latency-4k-qd1-randread"


def _state_table(ddb: Any, name: str) -> None:
    ddb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def sample_slot(ctx: Context) -> dict[str, str]:
    """slot.json, manifest.json and the fio JSON+ result of one real `iofleet local` slot
    (1 s fio job): the artifacts every simulated slot uploads, renamed per slot."""
    from bench.fidelity import JOB, run_local_slot

    work = ctx.scratch("fleet-sample")
    target = work / "target"
    target.mkdir()
    out = work / "out"
    run_local_slot(JOB, {"RUNTIME": "1", "SIZE": "8m"}, target, out, sample_rss=False)
    slot_dir = next((out / "raw").rglob("slot.json")).parent
    return {
        "slot.json": (slot_dir / "slot.json").read_text(),
        "manifest.json": (slot_dir / "manifest.json").read_text(),
        "fio": next(slot_dir.glob("w00-fio-*.json")).read_text(),
    }


def _artifacts(sample: dict[str, str], slots: int, cell_id: str) -> dict[str, str]:
    """Raw keys -> text: each slot's slot.json, manifest.json and fio result."""
    from iofleet.aws import keys

    fio_name = f"w00-fio-{FIO_FIXTURE}.json"
    out: dict[str, str] = {}
    for i in range(slots):
        rel = f"{RUN_ID}/{cell_id}/slot-{i:04d}/"
        slot = json.loads(sample["slot.json"])
        slot.update(run_id=RUN_ID, cell_id=cell_id, slot_index=i)
        for w in slot.get("workloads", []):
            w["artifact"] = rel + fio_name
        manifest = json.loads(sample["manifest.json"])
        manifest.update(run_id=RUN_ID, slot_index=i)
        manifest["cell"].update(cell_id=cell_id, fleet_size=slots)
        owner = _owner(i)  # written by the slot's own instance, as on AWS
        out[keys.raw_key(rel + "slot.json", owner)] = json.dumps(slot)
        out[keys.raw_key(rel + "manifest.json", owner)] = json.dumps(manifest)
        out[keys.raw_key(rel + fio_name, owner)] = sample["fio"]
    return out


def _owner(slot: int) -> str:
    """The `<role id>:<instance id>` an instance's raw keys carry (keys.owner_instance)."""
    return f"AROABENCHINSTANCEROLE:i-{slot:017x}"


def _launched(ddb: Any, table: str, slots: int, cell_id: str) -> None:
    """The slot items the launch Lambda writes: ingest takes a slot's objects only from
    the instance named there (curate._not_the_slots_instance, one GetItem per object)."""
    from iofleet.aws import keys

    for i in range(slots):
        item = keys.slot_item_key(RUN_ID, cell_id, i)
        ddb.put_item(
            TableName=table,
            Item={
                **{k: {"S": v} for k, v in item.items()},
                "instance_id": {"S": f"i-{i:017x}"},
            },
        )


def ingest_all(sample: dict[str, str], slots: int, cell_id: str) -> dict[str, Any]:
    """Every slot's artifacts into moto S3 and through the ingest Lambda's curate code."""
    import boto3
    from moto import mock_aws

    from iofleet.aws.curate import ingest_object

    artifacts = _artifacts(sample, slots, cell_id)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        bucket, table = "iofleet-bench-fleet", "iofleet-bench-state"
        s3.create_bucket(Bucket=bucket)
        _state_table(ddb, table)
        _launched(ddb, table, slots, cell_id)
        for key, text in artifacts.items():
            s3.put_object(Bucket=bucket, Key=key, Body=text.encode())
        rows: dict[str, int] = {}
        # moto's S3 keeps every object in this process's heap, which no Lambda has: move
        # what exists now out of the garbage collector's reach, so collections during
        # the timed ingest do not scan the harness' store (gc.freeze, Python >= 3.7)
        gc.collect()
        gc.freeze()
        try:
            with Timer() as t:
                for key in artifacts:
                    for name, n in ingest_object(
                        key, s3=s3, ddb=ddb, bucket=bucket, table=table
                    ).items():
                        rows[name] = rows.get(name, 0) + n
        finally:
            gc.unfreeze()
        curated = sum(
            page.get("KeyCount", 0)
            for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix="curated/"
            )
        )
    if rows.get("slots", 0) < slots or rows.get("fio_results", 0) < slots:
        raise RuntimeError(f"ingest of {slots} slots wrote {rows}")
    return {
        "ingest_s": t.seconds,
        "artifacts": len(artifacts),
        "curated_objects": curated,
        "rows": rows,
    }


def _execution(template: dict[str, Any], n: int, agents: Any, collector: bool) -> dict[str, Any]:
    """One execution of the real definition (bench.orchestration.run_execution).

    `collector=False`: Python's cyclic garbage collector is paused for the execution
    (collected before and after). moto's interpreter keeps every waiting child
    execution, its frames and events in this process's heap, which grows with the
    fleet; each full collection scans all of it, so their pauses grow faster than
    the fleet (measured: 3 full collections, 0.38 s, in a 200-slot launch; 16, 3.1 s,
    in a 1,000-slot one). Step Functions has no such heap. `collector=True`: the
    collector runs as usual and its pauses inside the launch window are tallied.
    """
    from bench.orchestration import run_execution

    pauses: list[tuple[float, float, int]] = []  # (start, seconds, generation)
    began: list[float] = []

    def tally(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began.append(time.monotonic())
        elif began:
            start = began.pop()
            pauses.append((start, time.monotonic() - start, int(info["generation"])))

    launches: list[float] = []

    def record(got: list[tuple[float, str]]) -> None:
        launches.extend(t for t, _ in got)
        if agents is not None:
            agents(got)

    gc.collect()
    if collector:
        gc.callbacks.append(tally)
    else:
        gc.disable()
    try:
        out = run_execution(template, n, timeout_s=900, agents=record)
    finally:
        if collector:
            gc.callbacks.remove(tally)
        else:
            gc.enable()
        gc.collect()
    last = max(launches)
    first = last - out["fleet_step_s"]  # the Fleet map entered
    inside = [(d, g) for t, d, g in pauses if first <= t <= last]
    return {
        **out,
        "gc_pause_s": sum(d for d, _ in inside),
        "gc_full_collections": sum(1 for _, g in inside if g == 2),
    }


def measure(ctx: Context) -> dict[str, Any]:
    import sys

    import boto3

    from bench import fleet_agents
    from bench.orchestration import _template

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    engines_dir = str(ROOT / "scripts" / "engines")
    if engines_dir not in sys.path:
        sys.path.insert(0, engines_dir)
    import engines

    scale = ctx.scale
    template = _template(ctx)
    sample = sample_slot(ctx)
    sizes = list(scale.fleet_sizes)
    per_size: dict[str, Any] = {}
    ddb_engine = engines.start_dynamodb_local()
    try:
        ddb = boto3.client(
            "dynamodb",
            endpoint_url=ddb_engine.endpoint,
            region_name=engines.AWS_REGION,
            aws_access_key_id=engines.AWS_ACCESS_KEY,
            aws_secret_access_key=engines.AWS_SECRET_KEY,
        )
        table = "iofleet-bench-fleet-state"
        _state_table(ddb, table)
        engine = {
            "endpoint": ddb_engine.endpoint,
            "region": engines.AWS_REGION,
            "key": engines.AWS_ACCESS_KEY,
            "secret": engines.AWS_SECRET_KEY,
        }
        all_runs: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
        floors: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
        # the sizes interleaved within each repeat: the machine's load drifts over both
        for r in range(scale.fleet_repeats):
            for n in sizes:
                cell_id = f"c000-bench-x{n}-r{r + 1}"
                got_barrier: dict[str, Any] = {}

                def agents(
                    launches: list[tuple[float, str]],
                    n: int = n,
                    cell_id: str = cell_id,
                    into: dict[str, Any] = got_barrier,
                ) -> None:
                    first = launches[0][0]
                    arrivals = [t - first for t, _ in launches]
                    into["launch_gaps_s"] = [
                        b - a for a, b in zip(arrivals, arrivals[1:], strict=False)
                    ]
                    into.update(
                        fleet_agents.barrier_wait(engine, table, RUN_ID, cell_id, n, arrivals)
                    )

                launched = _execution(template, n, agents, collector=False)
                all_runs[n].append({**launched, **got_barrier})
                # the control: the same processes and threads woken at one instant
                floor_now = fleet_agents.wake_floor(engine, table, n, got_barrier["margin_s"])
                floors[n].append(floor_now)
                ctx.log(
                    f"fleet {n} slots, repeat {r + 1}/{scale.fleet_repeats}: launch "
                    f"{launched['fleet_step_s']:.2f} s, barrier skew "
                    f"{got_barrier['skew_ms']:.1f} ms ({got_barrier['late_agents']} late, "
                    f"reads {got_barrier['reads_per_s_before_release']}/s of "
                    f"{got_barrier['designed_reads_per_s']}/s); wake-up control (no "
                    f"barrier) {floor_now['skew_ms']:.1f} ms"
                )
        for n in sizes:
            runs, floor = all_runs[n], floors[n]
            # once more with the collector on, its pauses in the launch window tallied:
            # what the bench process's own heap (moto's) adds, not the state machine
            with_gc = _execution(template, n, None, collector=True)
            ctx.log(
                f"fleet {n} slots, collector on: launch {with_gc['fleet_step_s']:.2f} s, "
                f"{with_gc['gc_full_collections']} full collections "
                f"{with_gc['gc_pause_s']:.2f} s in it"
            )
            ingested = ingest_all(sample, n, f"c000-bench-x{n}-r1")
            ctx.log(
                f"fleet {n} slots: ingest of {ingested['artifacts']} artifacts "
                f"{ingested['ingest_s']:.1f} s"
            )
            gaps_ms = [g * 1000 for x in runs for g in x["launch_gaps_s"]]
            per_size[str(n)] = {
                "slots": n,
                "launch_s": stat((x["fleet_step_s"] for x in runs), "s", 3),
                "launch_per_slot_ms": stat((x["fleet_step_s"] / n * 1000 for x in runs), "ms", 2),
                "launch_gap_ms": {
                    **stat(gaps_ms, "ms", 2),
                    "p90": round(sorted(gaps_ms)[int(0.9 * (len(gaps_ms) - 1))], 2),
                },
                "launch_collector_on": {
                    "launch_s": round(with_gc["fleet_step_s"], 3),
                    "gc_pause_s": round(with_gc["gc_pause_s"], 3),
                    "gc_full_collections": with_gc["gc_full_collections"],
                },
                "execution_s": stat((x["execution_s"] for x in runs), "s", 3),
                "barrier_skew_ms": stat((x["skew_ms"] for x in runs), "ms", 2),
                "barrier_on_time_skew_ms": stat(
                    (x["on_time_skew_ms"] for x in runs if x["on_time_skew_ms"] is not None),
                    "ms",
                    2,
                )
                if any(x["on_time_skew_ms"] is not None for x in runs)
                else None,
                "barrier_wake_floor_ms": stat((f["skew_ms"] for f in floor), "ms", 2),
                "barrier_last_after_release_ms": stat(
                    (x["last_after_release_ms"] for x in runs), "ms", 2
                ),
                "barrier_late_agents": stat((x["late_agents"] for x in runs), "agents", 0),
                "barrier_poll_interval_s": runs[0]["poll_interval_s"],
                "barrier_margin_s": runs[0]["margin_s"],
                "barrier_agent_processes": runs[0]["processes"],
                "barrier_reads_per_s": stat(
                    (x["reads_per_s_before_release"] for x in runs), "reads/s", 1
                ),
                "barrier_designed_reads_per_s": runs[0]["designed_reads_per_s"],
                "barrier_read_ms": [x["read_ms"] for x in runs],
                "barrier_read_gap_s": [x["read_gap_s"] for x in runs],
                "ingest_s": stat([ingested["ingest_s"]], "s", 3),
                "ingest_artifacts": ingested["artifacts"],
                "ingest_curated_objects": ingested["curated_objects"],
                "ingest_rows": ingested["rows"],
                "child_transitions": runs[0]["child_transitions"],
            }
    finally:
        ddb_engine.stop()
    small, big = str(min(sizes)), str(max(sizes))
    size_ratio = int(big) / int(small)

    def grows(lo: float, hi: float) -> dict[str, Any]:
        return {
            "cost_ratio": round(hi / lo, 2) if lo else None,
            "size_ratio": size_ratio,
            # linear or better: cost grows no faster than the fleet (10 % allowance)
            "linear_or_better": bool(lo) and hi / lo <= 1.1 * size_ratio,
        }

    growth = {
        key: grows(per_size[small][key]["median"], per_size[big][key]["median"])
        for key in ("launch_s", "ingest_s")
    }
    growth["launch_s_collector_on"] = grows(
        per_size[small]["launch_collector_on"]["launch_s"],
        per_size[big]["launch_collector_on"]["launch_s"],
    )
    met = {
        f"barrier_skew_{n}": per_size[str(n)]["barrier_skew_ms"]["max"] < SKEW_TARGET_MS
        for n in sizes
    }
    met["launch_linear_or_better"] = growth["launch_s"]["linear_or_better"]
    # the target stated per slot: the median gap between consecutive launch requests (one
    # slot's cost, robust to the other work on a shared machine, which lands in the tail)
    lo_gap = per_size[small]["launch_gap_ms"]["median"]
    hi_gap = per_size[big]["launch_gap_ms"]["median"]
    growth["launch_gap_median_ms"] = {
        "cost_ratio": round(hi_gap / lo_gap, 2) if lo_gap else None,
        "flat_or_better": bool(lo_gap) and hi_gap / lo_gap <= 1.1,
    }
    met["launch_per_slot_flat"] = growth["launch_gap_median_ms"]["flat_or_better"]
    return {
        "status": MEASURED,
        "method": (
            "real state machine (synthesized definition) in moto's Step Functions "
            "interpreter, in process, Lambda stubs, the bench process's garbage collector "
            "paused during the execution (one more execution with it on, its pauses "
            "tallied); simulated agents are threads of several processes running the "
            "agent's DynamoDB barrier on DynamoDB Local, every poll timed; artifacts "
            "curated by iofleet.aws.curate.ingest_object against moto S3, one after another"
        ),
        "sizes": per_size,
        "growth": growth,
        "targets": {
            "barrier_skew_ms": SKEW_TARGET_MS,
            "launch": "linear or better",
            "launch_per_slot": "median gap at 1,000 slots <= 1.1 x the one at 200",
        },
        "met": met,
        "limits": (
            "2 cores serve every agent's polls (their boto3 clients and DynamoDB Local): "
            "barrier_reads_per_s against barrier_designed_reads_per_s says whether the "
            "parties polled at the agent's interval; N agents wake on those 2 cores at "
            "the one instant (on AWS one per instance); moto's interpreter runs in the "
            "bench process; no clock offsets between instances (one clock)"
        ),
    }
