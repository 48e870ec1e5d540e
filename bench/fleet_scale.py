"""Figure 8, fleet scale: a cell of 200 and of 1,000 slots through the real definition.

For each fleet size N, one execution of the real state machine (the synthesized
definition, in moto's Step Functions interpreter, as figures 6 and 7:
`bench.orchestration.run_execution`, Lambda invokes answered by in-process
stubs) with lightweight simulated agents (no fio, no instance):

- launch: from the `Fleet` Map state entered to the N-th Launch invoke answered
  (every slot's launch request in flight, each holding its task token);
- start barrier: once every launch is in flight, N agents (threads of this
  process), each arriving after the same delay from the first as its launch
  request had (the launch spacing replayed), run the agent's real DynamoDB barrier
  (`iofleet.aws.barrier.DynamoBarrier.wait`: announce, poll at the interval the
  agent uses for N parties, adopt the one release instant, sleep until it) on
  DynamoDB Local, then the slots' task tokens are answered. Release skew =
  latest minus earliest instant at which an agent passed the barrier (its wall
  clock right after `sleep_until` returned); `late` counts agents that first saw
  the release record after its instant;
- ingest: every slot's artifacts (slot.json, manifest.json and one fio JSON+
  result per slot, copied from one real `iofleet local` slot) put in S3 (moto, in
  process) and curated by the ingest Lambda's own code (`iofleet.aws.curate.
  ingest_object`, what each SQS record runs), one artifact after another: the
  cost of a fleet's results, not the Lambda's concurrency. Once per size (n = 1):
  it is the slowest part and the bench must stay under 15 minutes.

DynamoDB Local cannot take hundreds of simultaneous requests on one item (it
answers InternalServerError, "too long waiting for a lock"), so the agents'
writes go through a semaphore of 8 in-flight calls and their reads through one
of 32 (`_Queued`), as DynamoDB's own queueing would order them; the barrier's
code is unchanged.

What in the harness limits it, on this 2-core machine: the N agents are threads
of one Python process (the GIL serialises their wake-ups at the release
instant), DynamoDB Local serves every agent's strongly consistent reads on the
same two cores, and moto's interpreter starts the Distributed Map's child
executions in one process. On AWS each agent has its own instance and clock
(clock offsets between instances, not measured here, add to the skew there).
"""

from __future__ import annotations

import gc
import json
import threading
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


class _Queued:
    """A boto3 client whose writes (`update_item`, `put_item`) go through a semaphore of
    `writes` slots and whose other calls through one of `reads` slots.

    DynamoDB Local serialises writes to an item on a lock and answers
    `InternalServerError` ("too long waiting for a lock ... will succeed in actual
    DynamoDB") when hundreds of requests contend for it at once; DynamoDB queues
    them. Bounding the in-flight requests here plays that queue; the barrier's
    code and requests are unchanged.
    """

    WRITES = ("update_item", "put_item")

    def __init__(self, client: Any, writes: int, reads: int) -> None:
        self._client = client
        self._writes = threading.BoundedSemaphore(writes)
        self._reads = threading.BoundedSemaphore(reads)

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._client, name)
        if not callable(fn):
            return fn
        slots = self._writes if name in self.WRITES else self._reads

        def call(*args: Any, **kwargs: Any) -> Any:
            with slots:
                return fn(*args, **kwargs)

        return call


def barrier_wait(
    ddb: Any,
    table: str,
    cell_id: str,
    parties: int,
    arrivals_s: list[float] | None = None,
    writes: int = 8,
    reads: int = 32,
) -> dict[str, Any]:
    """`parties` agent threads through one DynamoDB barrier; skew and lateness.

    `arrivals_s`: when each agent arrives, in seconds after the first (the launch
    requests' own spacing, replayed: an instance's agent starts after its launch).
    """
    from iofleet.aws import barrier

    ddb = _Queued(ddb, writes, reads)
    offsets = arrivals_s or [0.0] * parties

    barrier.create_barrier(ddb, table, RUN_ID, cell_id, parties)
    config = {
        "table": table,
        "run_id": RUN_ID,
        "cell_id": cell_id,
        "parties": parties,
        "timeout_s": 300,
    }
    results: list[Any] = []
    errors: list[str] = []
    lock = threading.Lock()

    def agent(index: int) -> None:
        time.sleep(max(0.0, started + offsets[index] - time.monotonic()))  # its launch
        try:
            got = barrier.DynamoBarrier(ddb, config).wait(index)
        except Exception as exc:  # noqa: BLE001 - counted and reported, never lost
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}")
            return
        with lock:
            results.append(got)

    threads = [threading.Thread(target=agent, args=(i,), daemon=True) for i in range(parties)]
    started = time.monotonic() + 0.5  # every thread started before the first arrival
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, 330 - (time.monotonic() - started)))
    passed = [r for r in results if r.passed and r.passed_us is not None]
    if errors or len(passed) != parties:
        first = errors[0] if errors else "timed out"
        raise RuntimeError(f"{len(passed)}/{parties} agents passed the barrier ({first})")
    released = {r.released_us for r in passed}
    if len(released) != 1:
        raise RuntimeError(f"agents adopted {len(released)} release instants, not one")
    (release_us,) = released
    times = [r.passed_us for r in passed]
    return {
        "skew_ms": (max(times) - min(times)) / 1000,
        "first_after_release_ms": (min(times) - release_us) / 1000,
        "last_after_release_ms": (max(times) - release_us) / 1000,
        "late_agents": sum(1 for r in passed if r.late_us > 0),
        "wait_s": time.monotonic() - started,
        "poll_interval_s": barrier.poll_interval(parties),
    }


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


def measure(ctx: Context) -> dict[str, Any]:
    import sys

    import boto3
    from botocore.config import Config

    from bench.orchestration import _template, run_execution

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
            config=Config(max_pool_connections=64, retries={"max_attempts": 10}),
        )
        table = "iofleet-bench-fleet-state"
        _state_table(ddb, table)
        for n in sizes:
            runs: list[dict[str, Any]] = []
            for r in range(scale.fleet_repeats):
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
                    into.update(barrier_wait(ddb, table, cell_id, n, arrivals))

                launched = run_execution(template, n, timeout_s=600, agents=agents)
                runs.append({**launched, **got_barrier})
                ctx.log(
                    f"fleet {n} slots, repeat {r + 1}/{scale.fleet_repeats}: launch "
                    f"{launched['fleet_step_s']:.2f} s, barrier skew "
                    f"{got_barrier['skew_ms']:.1f} ms ({got_barrier['late_agents']} late)"
                )
            ingested = ingest_all(sample, n, f"c000-bench-x{n}-r1")
            ctx.log(
                f"fleet {n} slots: ingest of {ingested['artifacts']} artifacts "
                f"{ingested['ingest_s']:.1f} s"
            )
            per_size[str(n)] = {
                "slots": n,
                "launch_s": stat((x["fleet_step_s"] for x in runs), "s", 3),
                "execution_s": stat((x["execution_s"] for x in runs), "s", 3),
                "barrier_skew_ms": stat((x["skew_ms"] for x in runs), "ms", 2),
                "barrier_last_after_release_ms": stat(
                    (x["last_after_release_ms"] for x in runs), "ms", 2
                ),
                "barrier_late_agents": stat((x["late_agents"] for x in runs), "agents", 0),
                "barrier_poll_interval_s": runs[0]["poll_interval_s"],
                "ingest_s": stat([ingested["ingest_s"]], "s", 3),
                "ingest_artifacts": ingested["artifacts"],
                "ingest_curated_objects": ingested["curated_objects"],
                "ingest_rows": ingested["rows"],
                "child_transitions": runs[0]["child_transitions"],
            }
    finally:
        ddb_engine.stop()
    small, big = str(min(sizes)), str(max(sizes))
    growth = {}
    for key in ("launch_s", "ingest_s"):
        lo, hi = per_size[small][key]["median"], per_size[big][key]["median"]
        size_ratio = int(big) / int(small)
        growth[key] = {
            "cost_ratio": round(hi / lo, 2) if lo else None,
            "size_ratio": size_ratio,
            # linear or better: cost grows no faster than the fleet (10 % allowance)
            "linear_or_better": bool(lo) and hi / lo <= 1.1 * size_ratio,
        }
    met = {
        f"barrier_skew_{n}": per_size[str(n)]["barrier_skew_ms"]["max"] < SKEW_TARGET_MS
        for n in sizes
    }
    met["launch_linear_or_better"] = growth["launch_s"]["linear_or_better"]
    return {
        "status": MEASURED,
        "method": (
            "real state machine (synthesized definition) in moto's Step Functions "
            "interpreter, in process, Lambda stubs; simulated agents are threads running "
            "the agent's DynamoDB barrier on DynamoDB Local; artifacts curated by "
            "iofleet.aws.curate.ingest_object against moto S3, one after another"
        ),
        "sizes": per_size,
        "growth": growth,
        "targets": {"barrier_skew_ms": SKEW_TARGET_MS, "launch": "linear or better"},
        "met": met,
        "limits": (
            "agents are threads of one Python process on 2 cores (the GIL serialises their "
            "wake-ups at the release instant); DynamoDB Local and moto share those cores; "
            "no clock offsets between instances (one clock)"
        ),
    }
