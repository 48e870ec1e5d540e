"""Summarize step: CloudWatch burst metrics of every slot's run window -> `burst_metrics`.

Which metrics, the GetMetricData queries and the rows are `iofleet.aws.metrics`;
this module finds the resources and windows of a finished run and does the
calls. Volumes and created file systems are deleted by then, CloudWatch keeps
their metrics, so the ids come from what the run recorded:

- the plan manifest (`control/{run}/plan.json`): each cell's storage type,
  EBS volume type and an existing file system's id;
- the cell item (`cell#...`): `file_system_id` of shared storage (written by
  PrepareCell, also for a file system created for the run), `started_at`,
  `finished_at`;
- the slot items (`slot#...`): `agent_instance_id` (else the launcher's
  `instance_id`), `agent_volume_id`, `agent_started_at`, `agent_finished_at`
  (copied from the slot's manifest.json / slot.json by ingest).

One GetMetricData window per cell (its slots start together at the barrier):
from the earliest slot start to the latest slot end, widened to whole periods
plus one on each side. Rows go to one curated object per run,
`curated/burst_metrics/dt=.../{run_id}/burst_metrics.jsonl`, overwritten
when Summarize runs again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from iofleet.aws import keys, metrics
from iofleet.aws.curate import jsonl
from iofleet.aws.ddb import query_items
from iofleet.aws.plan import load_manifest
from iofleet.results.schema import BURST_METRICS

BALANCE_METRICS = ("BurstBalance", "BurstCreditBalance", "EBSIOBalance%", "EBSByteBalance%")


@dataclass(frozen=True)
class CellWindow:
    """The slots of one cell whose metrics are fetched over one time window."""

    cell_id: str
    slots: tuple[metrics.SlotResources, ...]
    start: datetime
    end: datetime


@dataclass
class BurstCollection:
    rows: list[dict[str, object]] = field(default_factory=list)
    key: str | None = None  # the curated object written (None: no rows)
    notes: list[str] = field(default_factory=list)  # cells or slots left out, and why

    def report(self) -> dict[str, Any]:
        """The run report's `burst_metrics` section."""
        return {
            "rows": len(self.rows),
            "object_key": self.key,
            "slots": slot_verdicts(metrics.balance_summary(self.rows)),
            "notes": self.notes,
            "error": None,
        }


def run_items(ddb: Any, table: str, run_id: str) -> list[dict[str, Any]]:
    """Every item of the run (run, cell#..., slot#...), attribute values unwrapped."""
    return [
        {k: next(iter(v.values())) for k, v in item.items()}
        for item in query_items(ddb, table, f"run#{run_id}")
    ]


def _when(value: str) -> datetime:
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _window(
    started: Sequence[object], finished: Sequence[object], period_s: int
) -> tuple[datetime, datetime] | None:
    """Earliest start to latest finish (None without both), whole periods plus one each side."""
    starts = [_when(str(s)) for s in started if s]
    ends = [_when(str(f)) for f in finished if f]
    if not starts or not ends:
        return None
    first, last = min(starts), max(ends)
    return metrics.time_window(first, max(first, last), period_s)


def cell_windows(
    run_id: str,
    plan_cells: Sequence[Mapping[str, Any]],
    items: Sequence[Mapping[str, Any]],
    period_s: int = metrics.DEFAULT_PERIOD_S,
) -> tuple[list[CellWindow], list[str]]:
    """SlotResources per cell with the cell's window; notes for cells that have none."""
    cells = {
        str(i["sk"])[len("cell#") :]: i for i in items if str(i.get("sk", "")).startswith("cell#")
    }
    slots: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        sk = str(item.get("sk", ""))
        if sk.startswith("slot#"):
            cell_id, _, index = sk[len("slot#") :].rpartition("#")
            slots.setdefault(cell_id, []).append({**item, "slot_index": int(index)})
    out: list[CellWindow] = []
    notes: list[str] = []
    for cell in plan_cells:
        cell_id = str(cell["cell_id"])
        storage = cell.get("storage") or {}
        storage_type = str(cell.get("storage_type") or storage.get("type") or "")
        cell_item = cells.get(cell_id, {})
        fs_id = cell_item.get("file_system_id") or storage.get("file_system_id")
        resources = []
        cell_slots = sorted(slots.get(cell_id, []), key=lambda s: int(s["slot_index"]))
        for s in cell_slots:
            resources.append(
                metrics.SlotResources(
                    run_id=run_id,
                    cell_id=cell_id,
                    slot_index=int(s["slot_index"]),
                    storage_type=storage_type,
                    volume_type=storage.get("volume_type"),
                    volume_id=s.get("agent_volume_id"),
                    file_system_id=fs_id,
                    instance_id=s.get("agent_instance_id") or s.get("instance_id"),
                )
            )
        if not any(metrics.slot_queries(r, period_s) for r in resources):
            continue  # nothing with published credit metrics (gp3 without instance id, FSx, ...)
        # the slots' own times; the cell's (prepare .. cleanup) if no slot recorded any
        started = [s.get("agent_started_at") for s in cell_slots if s.get("agent_started_at")]
        finished = [s.get("agent_finished_at") for s in cell_slots if s.get("agent_finished_at")]
        window = _window(
            started or [cell_item.get("started_at")],
            finished or [cell_item.get("finished_at")],
            period_s,
        )
        if window is None:
            notes.append(f"{cell_id}: no start or finish time recorded, no metrics fetched")
            continue
        out.append(CellWindow(cell_id, tuple(resources), *window))
    return out, notes


def fetch_rows(
    cloudwatch: Any, cell: CellWindow, period_s: int = metrics.DEFAULT_PERIOD_S
) -> list[dict[str, object]]:
    """GetMetricData for one cell's queries, in batches, following NextToken."""
    rows: list[dict[str, object]] = []
    for batch in metrics.batches(metrics.cell_queries(cell.slots, period_s)):
        args: dict[str, Any] = {
            "MetricDataQueries": metrics.metric_data_queries(batch),
            "StartTime": cell.start,
            "EndTime": cell.end,
            "ScanBy": "TimestampAscending",
        }
        while True:
            answer = cloudwatch.get_metric_data(**args)
            rows += metrics.rows_from_results(batch, answer.get("MetricDataResults") or [])
            token = answer.get("NextToken")
            if not token:
                break
            args["NextToken"] = token
    return rows


def burst_metrics_key(run_id: str) -> str:
    return keys.curated_key(BURST_METRICS.name, run_id, f"{run_id}/burst_metrics.json")


def collect_burst_metrics(
    run_id: str,
    *,
    cloudwatch: Any,
    s3: Any,
    ddb: Any,
    bucket: str,
    table: str,
    period_s: int = metrics.DEFAULT_PERIOD_S,
) -> BurstCollection:
    """Fetch every slot's burst metrics of a run and write them as the run's curated object."""
    manifest = load_manifest(s3, bucket, run_id)
    cells, notes = cell_windows(
        run_id, manifest["plan"]["cells"], run_items(ddb, table, run_id), period_s
    )
    rows: list[dict[str, object]] = []
    for cell in cells:
        rows += fetch_rows(cloudwatch, cell, period_s)
    rows.sort(key=lambda r: tuple(str(r[c]) for c in ("cell_id", "metric", "resource_id", "ts")))
    out = BurstCollection(rows=rows, notes=notes)
    if rows:
        out.key = burst_metrics_key(run_id)
        s3.put_object(
            Bucket=bucket,
            Key=out.key,
            Body=jsonl(BURST_METRICS.name, rows),
            ContentType="application/x-ndjson",
        )
    return out


def slot_verdicts(balances: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Per slot: was it measured in burst?

    `in_burst`: a credit balance fell during the window (the slot ran above a
    baseline on credits); `emptied`: a balance reached zero (part of the run was
    held to the baseline). Both: the result mixes burst and baseline.
    `io_limited`: EFS PercentIOLimit reached 100 %.
    """
    by_slot: dict[tuple[str, int], list[Mapping[str, object]]] = {}
    for b in balances:
        by_slot.setdefault((str(b["cell_id"]), int(b["slot_index"])), []).append(b)  # type: ignore[call-overload]
    out = []
    for (cell_id, slot_index), items in sorted(by_slot.items()):
        credit = [b for b in items if b["metric"] in BALANCE_METRICS]
        out.append(
            {
                "cell_id": cell_id,
                "slot_index": slot_index,
                "in_burst": any(float(b["min"]) < float(b["first"]) for b in credit),  # type: ignore[arg-type]
                "emptied": any(bool(b["emptied"]) for b in credit),
                "io_limited": any(
                    b["metric"] == "PercentIOLimit" and float(b["max"]) >= 100.0  # type: ignore[arg-type]
                    for b in items
                ),
                "balances": [dict(b) for b in items],
            }
        )
    return out
