"""CloudWatch burst metrics for a slot: which to fetch, and the rows they become.

So a user can see whether a result was measured in burst, the AWS side records
for each slot's run window the credit balances behind the ceilings of
docs/expectations.md, into the `burst_metrics` table (iofleet/results/schema.py):

| storage / resource | namespace | metric | dimension | statistic |
|---|---|---|---|---|
| EBS gp2, st1, sc1 volume | AWS/EBS | BurstBalance (%) | VolumeId | Minimum |
| EFS file system | AWS/EFS | BurstCreditBalance (bytes) | FileSystemId | Minimum |
| EFS file system | AWS/EFS | PercentIOLimit (%) | FileSystemId | Maximum |
| the instance, for EBS cells | AWS/EC2 | EBSIOBalance%, EBSByteBalance% | InstanceId | Minimum |
| EBS volume (any type) | AWS/EBS | VolumeIOPSExceededCheck, VolumeThroughputExceededCheck (0/1) | VolumeId | Maximum |
| the instance, for EBS cells | AWS/EC2 | InstanceEBSIOPSExceededCheck, InstanceEBSThroughputExceededCheck (0/1) | InstanceId | Maximum |

The exceeded checks are AWS's own throttling evidence (1: the workload asked for
more than the volume's / instance's provisioned IOPS or throughput in that
minute; Nitro instances only). They are queried without a unit (CloudWatch
lists theirs as None) and recorded with unit "None"; they are not balances.

Pure functions, no AWS client: the caller (the summarize step or the agent's
wrapper on AWS) does

    queries = slot_queries(SlotResources(...))
    start, end = time_window(started_at, finished_at)
    for batch in batches(queries):
        answer = cloudwatch.get_metric_data(
            MetricDataQueries=metric_data_queries(batch),
            StartTime=start, EndTime=end, ScanBy="TimestampAscending")
        rows += rows_from_results(batch, answer["MetricDataResults"])

(following NextToken), then writes the rows like any other curated table.
Stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from iofleet.results.schema import BURST_METRICS

DEFAULT_PERIOD_S = 60
MAX_QUERIES = 500  # GetMetricData's limit per call
BURST_VOLUME_TYPES = ("gp2", "st1", "sc1")
VOLUME_EXCEEDED_CHECKS = ("VolumeIOPSExceededCheck", "VolumeThroughputExceededCheck")
INSTANCE_EXCEEDED_CHECKS = ("InstanceEBSIOPSExceededCheck", "InstanceEBSThroughputExceededCheck")
EXCEEDED_CHECKS = VOLUME_EXCEEDED_CHECKS + INSTANCE_EXCEEDED_CHECKS
NOT_BALANCES = ("PercentIOLimit", *EXCEEDED_CHECKS)


@dataclass(frozen=True)
class SlotResources:
    """A slot and the AWS resources whose balances matter for it."""

    run_id: str
    cell_id: str
    slot_index: int
    storage_type: str  # ebs | efs | fsx-openzfs | instance-store | local
    volume_type: str | None = None  # ebs: gp2 gp3 io1 io2 st1 sc1
    volume_id: str | None = None
    file_system_id: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True)
class MetricQuery:
    run_id: str
    cell_id: str
    slot_index: int
    namespace: str
    metric: str
    dimension: str  # VolumeId | FileSystemId | InstanceId
    resource_id: str
    stat: str
    unit: str
    period_s: int = DEFAULT_PERIOD_S


def slot_queries(slot: SlotResources, period_s: int = DEFAULT_PERIOD_S) -> list[MetricQuery]:
    """The CloudWatch metrics to fetch for one slot (empty for local or FSx-only slots)."""

    def q(namespace: str, metric: str, dim: str, rid: str, stat: str, unit: str) -> MetricQuery:
        return MetricQuery(
            slot.run_id, slot.cell_id, slot.slot_index, namespace, metric, dim, rid, stat, unit,
            period_s,
        )  # fmt: skip

    out: list[MetricQuery] = []
    if slot.storage_type == "ebs":
        if slot.volume_id and slot.volume_type in BURST_VOLUME_TYPES:
            out.append(
                q("AWS/EBS", "BurstBalance", "VolumeId", slot.volume_id, "Minimum", "Percent")
            )
        if slot.instance_id:
            for metric in ("EBSIOBalance%", "EBSByteBalance%"):
                out.append(
                    q("AWS/EC2", metric, "InstanceId", slot.instance_id, "Minimum", "Percent")
                )
        if slot.volume_id:
            for metric in VOLUME_EXCEEDED_CHECKS:
                out.append(q("AWS/EBS", metric, "VolumeId", slot.volume_id, "Maximum", "None"))
        if slot.instance_id:
            for metric in INSTANCE_EXCEEDED_CHECKS:
                out.append(q("AWS/EC2", metric, "InstanceId", slot.instance_id, "Maximum", "None"))
    elif slot.storage_type == "efs" and slot.file_system_id:
        fs = slot.file_system_id
        out.append(q("AWS/EFS", "BurstCreditBalance", "FileSystemId", fs, "Minimum", "Bytes"))
        out.append(q("AWS/EFS", "PercentIOLimit", "FileSystemId", fs, "Maximum", "Percent"))
    return out


def cell_queries(
    slots: Iterable[SlotResources], period_s: int = DEFAULT_PERIOD_S
) -> list[MetricQuery]:
    """Every slot's queries; a shared file system is queried once (for its first slot)."""
    out: list[MetricQuery] = []
    seen: set[tuple[str, str, str]] = set()
    for slot in slots:
        for query in slot_queries(slot, period_s):
            key = (query.namespace, query.metric, query.resource_id)
            if query.dimension == "FileSystemId" and key in seen:
                continue
            seen.add(key)
            out.append(query)
    return out


def batches(queries: Sequence[MetricQuery], size: int = MAX_QUERIES) -> Iterator[list[MetricQuery]]:
    for start in range(0, len(queries), size):
        yield list(queries[start : start + size])


def query_id(index: int) -> str:
    """GetMetricData ids must start with a lower-case letter."""
    return f"m{index}"


def metric_data_queries(queries: Sequence[MetricQuery]) -> list[dict[str, Any]]:
    """`MetricDataQueries` for one GetMetricData call (ids m0, m1, ... by position)."""
    return [
        {
            "Id": query_id(i),
            "MetricStat": {
                "Metric": {
                    "Namespace": q.namespace,
                    "MetricName": q.metric,
                    "Dimensions": [{"Name": q.dimension, "Value": q.resource_id}],
                },
                "Period": q.period_s,
                "Stat": q.stat,
                # no unit filter for unitless metrics: a datum published as Count still counts
                **({"Unit": q.unit} if q.unit != "None" else {}),
            },
            "ReturnData": True,
        }
        for i, q in enumerate(queries)
    ]


def _utc(value: datetime | str) -> datetime:
    when = (
        value
        if isinstance(value, datetime)
        else datetime.fromisoformat(value.replace("Z", "+00:00"))
    )
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def time_window(
    started_at: datetime | str, finished_at: datetime | str, period_s: int = DEFAULT_PERIOD_S
) -> tuple[datetime, datetime]:
    """StartTime/EndTime covering the run window, widened to whole periods plus one
    on each side (the balance just before and just after the run)."""
    start, end = _utc(started_at), _utc(finished_at)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = math.floor((start - epoch).total_seconds() / period_s) - 1
    last = math.ceil((end - epoch).total_seconds() / period_s) + 1
    return epoch + timedelta(seconds=first * period_s), epoch + timedelta(seconds=last * period_s)


def _ts_text(value: datetime | str) -> str:
    return _utc(value).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def rows_from_results(
    queries: Sequence[MetricQuery], results: Iterable[Mapping[str, Any]]
) -> list[dict[str, object]]:
    """`MetricDataResults` of one call (queries in the order given to it) -> burst_metrics rows."""
    by_id = {query_id(i): q for i, q in enumerate(queries)}
    rows: list[dict[str, object]] = []
    for result in results:
        q = by_id.get(str(result.get("Id")))
        if q is None:
            continue
        for ts, value in zip(
            result.get("Timestamps") or [], result.get("Values") or [], strict=False
        ):
            rows.append(
                BURST_METRICS.row(
                    run_id=q.run_id,
                    cell_id=q.cell_id,
                    slot_index=q.slot_index,
                    namespace=q.namespace,
                    metric=q.metric,
                    resource_id=q.resource_id,
                    stat=q.stat,
                    unit=q.unit,
                    ts=_ts_text(ts),
                    period_s=q.period_s,
                    value=float(value),
                )
            )
    rows.sort(key=lambda r: (r["cell_id"], r["slot_index"], r["metric"], r["resource_id"], r["ts"]))
    return rows


def balance_summary(rows: Iterable[Mapping[str, object]]) -> list[dict[str, object]]:
    """Per (cell, slot, metric, resource): first, lowest and last value and whether a
    balance hit zero (`emptied`: the run measured past the burst) in the window."""
    groups: dict[tuple[object, ...], list[Mapping[str, object]]] = {}
    for row in rows:
        key = (row["run_id"], row["cell_id"], row["slot_index"], row["metric"], row["resource_id"])
        groups.setdefault(key, []).append(row)
    out = []
    for (run_id, cell_id, slot_index, metric, resource), items in sorted(
        groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])
    ):
        items = sorted(items, key=lambda r: str(r["ts"]))
        values = [float(r["value"]) for r in items]  # type: ignore[arg-type]
        balance = metric not in NOT_BALANCES
        out.append(
            {
                "run_id": run_id,
                "cell_id": cell_id,
                "slot_index": slot_index,
                "metric": metric,
                "resource_id": resource,
                "first": values[0],
                "min": min(values),
                "max": max(values),
                "last": values[-1],
                "emptied": balance and min(values) <= 0.0,
            }
        )
    return out
