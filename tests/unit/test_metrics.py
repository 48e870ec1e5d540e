"""CloudWatch burst metrics: which to fetch per slot, and GetMetricData -> burst_metrics rows.

The round trip runs against moto's CloudWatch (server mode), the AWS engine
the project tests with.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from iofleet.aws.metrics import (
    EXCEEDED_CHECKS,
    SlotResources,
    balance_summary,
    batches,
    cell_queries,
    metric_data_queries,
    rows_from_results,
    slot_queries,
    time_window,
)
from iofleet.results.warehouse import Warehouse

VOL = "vol-0123456789abcdef0"
FS = "fs-0123456789abcdef0"
INSTANCE = "i-0123456789abcdef0"


def slot(storage_type: str = "ebs", index: int = 0, **changes: str) -> SlotResources:
    return SlotResources("r-1", "c000", index, storage_type, **changes)


def names(queries: list) -> list[tuple[str, str, str]]:
    return [(q.namespace, q.metric, q.resource_id) for q in queries]


# -- which metrics --------------------------------------------------------------------


def test_gp2_volume_gets_burst_balance_and_the_instance_its_ebs_balances() -> None:
    queries = slot_queries(slot(volume_type="gp2", volume_id=VOL, instance_id=INSTANCE))

    assert names(queries) == [
        ("AWS/EBS", "BurstBalance", VOL),
        ("AWS/EC2", "EBSIOBalance%", INSTANCE),
        ("AWS/EC2", "EBSByteBalance%", INSTANCE),
        ("AWS/EBS", "VolumeIOPSExceededCheck", VOL),
        ("AWS/EBS", "VolumeThroughputExceededCheck", VOL),
        ("AWS/EC2", "InstanceEBSIOPSExceededCheck", INSTANCE),
        ("AWS/EC2", "InstanceEBSThroughputExceededCheck", INSTANCE),
    ]


@pytest.mark.parametrize("volume_type", ["gp3", "io1", "io2"])
def test_volumes_without_a_bucket_get_no_burst_balance(volume_type: str) -> None:
    queries = slot_queries(slot(volume_type=volume_type, volume_id=VOL, instance_id=INSTANCE))

    assert [q.metric for q in queries] == [
        "EBSIOBalance%",
        "EBSByteBalance%",
        *EXCEEDED_CHECKS,  # AWS's throttling evidence: every volume type has it
    ]


def test_efs_gets_credit_balance_and_io_limit() -> None:
    queries = slot_queries(slot("efs", file_system_id=FS, instance_id=INSTANCE))

    assert [(q.metric, q.stat) for q in queries] == [
        ("BurstCreditBalance", "Minimum"),
        ("PercentIOLimit", "Maximum"),
    ]


@pytest.mark.parametrize("storage_type", ["local", "fsx-openzfs", "instance-store"])
def test_storage_without_published_credit_metrics_gets_none(storage_type: str) -> None:
    assert slot_queries(slot(storage_type, file_system_id=FS)) == []


def test_shared_file_system_is_queried_once_per_cell() -> None:
    slots = [slot("efs", i, file_system_id=FS) for i in range(3)]

    assert len(cell_queries(slots)) == 2


def test_queries_are_split_at_the_api_limit() -> None:
    slots = [slot(index=i, volume_type="st1", volume_id=f"vol-{i:017x}") for i in range(1001)]

    # 1001 slots x (BurstBalance + 2 volume exceeded checks) = 3003 queries
    assert [len(b) for b in batches(cell_queries(slots))] == [500] * 6 + [3]


def test_window_covers_whole_periods_plus_one_on_each_side() -> None:
    start, end = time_window("2026-11-21T05:12:30Z", "2026-11-21T05:14:10Z")

    assert (start, end) == (
        datetime(2026, 11, 21, 5, 11, tzinfo=UTC),
        datetime(2026, 11, 21, 5, 16, tzinfo=UTC),
    )


def test_summary_says_whether_a_balance_emptied() -> None:
    base = {"run_id": "r", "cell_id": "c", "slot_index": 0, "resource_id": VOL}
    rows = [
        {**base, "metric": "BurstBalance", "ts": f"2026-11-21 05:1{i}:00.000000", "value": v}
        for i, v in enumerate([100.0, 40.0, 0.0])
    ]

    [summary] = balance_summary(rows)

    assert (summary["first"], summary["min"], summary["last"], summary["emptied"]) == (
        100.0,
        0.0,
        0.0,
        True,
    )


# -- GetMetricData round trip on moto ----------------------------------------------------


@pytest.fixture(scope="module")
def cloudwatch() -> Iterator[object]:
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield boto3.client(
            "cloudwatch",
            region_name="us-east-1",
            endpoint_url=f"http://{host}:{port}",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
    finally:
        server.stop()


def test_get_metric_data_answer_becomes_burst_metrics_rows(cloudwatch) -> None:  # type: ignore[no-untyped-def]
    # given a gp2 volume whose BurstBalance fell during the run
    t0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    for minute, value in enumerate([100.0, 70.0, 35.0]):
        cloudwatch.put_metric_data(
            Namespace="AWS/EBS",
            MetricData=[
                {
                    "MetricName": "BurstBalance",
                    "Dimensions": [{"Name": "VolumeId", "Value": VOL}],
                    "Timestamp": t0 + timedelta(minutes=minute, seconds=5),
                    "Value": value,
                    "Unit": "Percent",
                }
            ],
        )
    queries = slot_queries(slot(volume_type="gp2", volume_id=VOL, instance_id=INSTANCE))
    start, end = time_window(t0, t0 + timedelta(minutes=3))
    # when
    answer = cloudwatch.get_metric_data(
        MetricDataQueries=metric_data_queries(queries),
        StartTime=start,
        EndTime=end,
        ScanBy="TimestampAscending",
    )
    rows = rows_from_results(queries, answer["MetricDataResults"])
    # then
    burst = [r for r in rows if r["metric"] == "BurstBalance"]
    assert [r["value"] for r in burst] == [100.0, 70.0, 35.0]
    assert {(r["namespace"], r["resource_id"], r["unit"]) for r in burst} == {
        ("AWS/EBS", VOL, "Percent")
    }
    with Warehouse(":memory:") as wh:
        assert wh.insert_rows("burst_metrics", rows) == len(rows)
        [row] = wh.query(
            "SELECT min(value) AS low FROM burst_metrics WHERE metric = 'BurstBalance'"
        )
    assert row["low"] == 35.0


def test_exceeded_checks_come_back_from_get_metric_data_and_bind_the_fleet_total(
    cloudwatch,
) -> None:  # type: ignore[no-untyped-def]
    # given a gp3 volume AWS flagged as asked for more IOPS than provisioned, minute 2
    t0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    vol = "vol-0fedcba9876543210"
    for minute, value in enumerate([0.0, 1.0, 0.0]):
        cloudwatch.put_metric_data(
            Namespace="AWS/EBS",
            MetricData=[
                {
                    "MetricName": "VolumeIOPSExceededCheck",
                    "Dimensions": [{"Name": "VolumeId", "Value": vol}],
                    "Timestamp": t0 + timedelta(minutes=minute, seconds=5),
                    "Value": value,
                    "Unit": "None",
                }
            ],
        )
    queries = slot_queries(slot(volume_type="gp3", volume_id=vol, instance_id=INSTANCE))
    start, end = time_window(t0, t0 + timedelta(minutes=3))
    answer = cloudwatch.get_metric_data(
        MetricDataQueries=metric_data_queries(queries), StartTime=start, EndTime=end,
        ScanBy="TimestampAscending",
    )  # fmt: skip
    rows = rows_from_results(queries, answer["MetricDataResults"])
    check = [r for r in rows if r["metric"] == "VolumeIOPSExceededCheck"]
    assert [r["value"] for r in check] == [0.0, 1.0, 0.0]
    (summary,) = [b for b in balance_summary(rows) if b["metric"] == "VolumeIOPSExceededCheck"]
    assert (summary["max"], summary["emptied"]) == (1.0, False)  # a check, not a balance
    # and the fleet_totals view names the volume's limit as the one that bound
    from iofleet.results.schema import EXPECTATIONS, FIO_RESULTS, SLOTS

    with Warehouse(":memory:") as wh:
        wh.insert_rows("burst_metrics", rows)
        wh.insert_rows(SLOTS, [SLOTS.row(run_id="r-1", cell_id="c000", slot_index=0, fleet_size=1)])
        wh.insert_rows(
            FIO_RESULTS,
            [FIO_RESULTS.row(run_id="r-1", cell_id="c000", slot_index=0, workload_index=0,
                             workload="w", job="j", direction="read", iops=2000.0, runtime_ms=60000,
                             error=0)],
        )  # fmt: skip
        wh.insert_rows(
            EXPECTATIONS,
            [EXPECTATIONS.row(run_id="r-1", cell_id="c000", workload_index=0, workload="w",
                              job="j", direction="read", expected_iops=3000.0,
                              limited_by="volume")],
        )  # fmt: skip
        (row,) = wh.query("SELECT binding, iops_ratio FROM fleet_totals")
    assert row["binding"] == "volume-exceeded-check"
    assert row["iops_ratio"] == pytest.approx(2000 / 3000)
