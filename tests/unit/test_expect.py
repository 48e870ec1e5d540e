"""Expected ceilings, limited_by and burst buckets: the seeds' scenarios as tests."""

from __future__ import annotations

import math

import pytest

from iofleet.plan.expect import (
    CellContext,
    Limit,
    StorageSpec,
    expect_cell,
    parse_job_text,
    parse_size,
    simulate,
    storage_spec,
)


def fio(name: str, **params: str) -> dict:
    return {"kind": "fio", "name": name, "params": params}


def only(entries: list[dict], direction: str | None = None) -> dict:
    picked = [e for e in entries if direction is None or e["direction"] == direction]
    assert len(picked) == 1, picked
    return picked[0]


# ---------------------------------------------------------------- seed 000


def test_seed000_io2_50k_on_c6a_xlarge_is_instance_limited_at_40000() -> None:
    # given an io2 volume provisioned above what the instance can take
    ctx = CellContext("c6a.xlarge", StorageSpec("io2", size_gib=100, iops=50000))
    # when the seed's 16 KiB psync randwrite runs 180 s
    entries, _, _ = expect_cell(ctx, [fio("randwrite-16k-psync-16jobs", RUNTIME="180")])
    # then the instance sets the ceiling
    entry = only(entries)
    assert entry["limited_by"] == "instance"
    assert entry["expected_iops"] == 40000
    assert entry["expected_bw_bytes"] == 40000 * 16 * 1024


def test_seed000_m5a_xlarge_stops_at_16000() -> None:
    ctx = CellContext("m5a.xlarge", StorageSpec("io2", size_gib=100, iops=50000))
    entries, _, _ = expect_cell(ctx, [fio("randwrite-16k-psync-16jobs", RUNTIME="180")])
    assert only(entries)["expected_iops"] == 16000
    assert only(entries)["limited_by"] == "instance"


def test_seed000_warns_that_the_instance_maximum_is_a_30_minute_burst() -> None:
    ctx = CellContext("c6a.xlarge", StorageSpec("io2", size_gib=100, iops=50000))
    entries, warnings, _ = expect_cell(ctx, [fio("randwrite-16k-psync-16jobs", RUNTIME="180")])
    entry = only(entries)
    assert entry["seconds_to_exhaust"] == 1800
    assert entry["burst_source"] == "instance"
    assert entry["phases"][-1]["iops"] == 6000
    assert any("measures the burst" in w and "c6a.xlarge" in w for w in warnings)


def test_volume_below_the_instance_is_volume_limited() -> None:
    ctx = CellContext("c6a.xlarge", StorageSpec("io2", size_gib=100, iops=3000))
    entries, _, _ = expect_cell(ctx, [fio("randwrite-16k-psync-16jobs", RUNTIME="60")])
    assert only(entries)["limited_by"] == "volume"
    assert only(entries)["expected_iops"] == 3000


# ---------------------------------------------------------------- seed 001


def test_seed001_gp2_8gib_bursts_at_3000_before_credits_run_out() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=8))
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="60")])
    entry = only(entries)
    assert entry["limited_by"] == "burst-bucket"
    assert entry["expected_iops"] == 3000
    assert entry["phases"][0]["iops"] == 3000


def test_seed001_gp2_8gib_runs_at_baseline_100_after_credits() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=8))
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="60")])
    last = only(entries)["phases"][-1]
    assert last["iops"] == 100
    assert last["limited_by"] == "volume"
    assert last["to_s"] is None


def test_seed001_gp2_8gib_credits_last_5_4m_over_2900() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=8))
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="60")])
    assert only(entries)["seconds_to_exhaust"] == pytest.approx(5_400_000 / (3000 - 100), abs=0.01)


def test_gp2_100gib_at_3000_iops_empties_in_2000_seconds() -> None:
    # 5.4M credits / (3000 - 300) = 2000 s (issue 5)
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=100))
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="60")])
    assert only(entries)["seconds_to_exhaust"] == 2000


def test_short_size_based_run_on_gp2_measures_the_burst() -> None:
    # seed 001's 250 MB randrw at QD64 ends long before the bucket empties
    ctx = CellContext("t4g.medium", StorageSpec("gp2", size_gib=8))
    entries, warnings, _ = expect_cell(ctx, [fio("randrw-4k-80-20-qd64")])
    read, write = only(entries, "read"), only(entries, "write")
    assert read["expected_iops"] + write["expected_iops"] == pytest.approx(3000)
    assert read["runtime_s"] < read["seconds_to_exhaust"]
    assert any("it measures the burst, not 100 IOPS" in w for w in warnings)


def test_run_longer_than_the_bucket_mixes_burst_and_baseline() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=100))
    entries, warnings, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="4000")])
    # 2000 s at 3000 then 2000 s at 300
    assert only(entries)["expected_iops"] == pytest.approx((2000 * 3000 + 2000 * 300) / 4000)
    assert any("mixes burst and 300 IOPS" in w for w in warnings)


def test_drain_policy_expects_the_baseline_and_waits_for_the_drain() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=100), burst_policy="drain")
    entries, warnings, timings = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="60")])
    entry = only(entries)
    assert entry["expected_iops"] == 300
    assert entry["limited_by"] == "volume"
    assert entry["seconds_to_exhaust"] is None
    assert timings["burst_wait_s"] == pytest.approx(2000)
    assert not any("burst" in w for w in warnings)


def test_refill_policy_waits_for_the_credits_the_previous_job_spent() -> None:
    # given two 1000 s jobs on gp2 100 GiB: the first spends 1000 x 2700 credits
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=100), burst_policy="refill")
    job = fio("latency-4k-qd1-randread", RUNTIME="1000")
    # when
    entries, _, timings = expect_cell(ctx, [job, job])
    # then the second starts full again, after 2.7M credits / 300 per second
    assert [e["expected_iops"] for e in entries] == [3000, 3000]
    assert timings["burst_wait_s"] == pytest.approx(1000 * 2700 / 300)


def test_as_is_policy_carries_spent_credits_into_the_next_job() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=100))
    job = fio("latency-4k-qd1-randread", RUNTIME="1500")
    entries, _, _ = expect_cell(ctx, [job, job])
    assert entries[0]["seconds_to_exhaust"] == 2000
    assert entries[1]["seconds_to_exhaust"] == pytest.approx(500)


def test_gp2_1tib_has_no_burst_bucket() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp2", size_gib=1000))
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="60")])
    assert only(entries)["expected_iops"] == 3000
    assert only(entries)["limited_by"] == "volume"
    assert only(entries)["seconds_to_exhaust"] is None


def test_st1_1tib_bursts_at_250_mibs_then_40() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("st1", size_gib=1024))
    entries, _, _ = expect_cell(ctx, [fio("seq-read-1m-qd32", RUNTIME="60")])
    entry = only(entries)
    assert entry["expected_bw_bytes"] == 250 * 1024 * 1024
    assert entry["limited_by"] == "burst-bucket"
    assert entry["phases"][-1]["bw_bytes"] == 40 * 1024 * 1024
    assert entry["seconds_to_exhaust"] == pytest.approx(1024 * 1024 / (250 - 40), abs=0.01)


# ---------------------------------------------------------------- seed 002


def test_seed002_io2_400_iops_is_volume_limited() -> None:
    ctx = CellContext("t4g.medium", StorageSpec("io2", size_gib=8, iops=400))
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randwrite", RUNTIME="30")])
    assert only(entries)["expected_iops"] == 400
    assert only(entries)["limited_by"] == "volume"


def test_seed002_gp2_8gib_out_runs_io2_400_in_a_short_test() -> None:
    job = fio("latency-4k-qd1-randwrite", RUNTIME="30")
    io2, _, _ = expect_cell(CellContext("t4g.medium", StorageSpec("io2", 8, 400)), [job])
    gp2, _, _ = expect_cell(CellContext("t4g.medium", StorageSpec("gp2", 8)), [job])
    assert only(gp2)["expected_iops"] == 3000 > only(io2)["expected_iops"]
    assert only(gp2)["limited_by"] == "burst-bucket"


def test_seed002_rate_capped_writers_are_limited_by_their_own_rate() -> None:
    # 16 writers x 5 MiB/s of 64 KiB writes = 1280 IOPS, below gp2's 3000 burst
    ctx = CellContext("t4g.medium", StorageSpec("gp2", size_gib=8))
    entries, warnings, _ = expect_cell(ctx, [fio("logging-steady-write-burst-read")])
    writer = only([e for e in entries if e["job"] == "steady_write"])
    assert writer["limited_by"] == "job-rate"
    assert writer["expected_bw_bytes"] == 16 * 5 * 1024 * 1024
    assert any("run together" in w for w in warnings)


# ---------------------------------------------------------------- seed 004


def test_seed004_gp3_defaults_are_3000_iops_and_125_mibs() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp3", size_gib=100))
    small, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="30")])
    large, _, _ = expect_cell(ctx, [fio("seq-read-1m-qd32", RUNTIME="30")])
    assert only(small)["expected_iops"] == 3000
    assert only(large)["expected_bw_bytes"] == 125 * 1024 * 1024
    assert only(large)["limited_by"] == "volume"


def test_shared_file_system_ceiling_is_split_across_the_fleet() -> None:
    spec = StorageSpec("fsx-openzfs", size_gib=256, iops=20000, throughput_mibps=4096)
    entries, warnings, _ = expect_cell(
        CellContext("m6i.4xlarge", spec, fleet_size=200),
        [fio("latency-4k-qd1-randread", RUNTIME="30")],
    )
    assert only(entries)["expected_iops"] == 100
    assert any("shared by 200 slots" in w for w in warnings)


# ---------------------------------------------------------------- unknowns


def test_unknown_instance_type_offline_gives_limited_by_unknown() -> None:
    ctx = CellContext("x99.superhuge", StorageSpec("gp3", size_gib=100))
    entries, warnings, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="30")])
    entry = only(entries)
    assert entry["limited_by"] == "unknown"
    assert entry["upper_bound"] is True
    assert entry["expected_iops"] == 3000  # the volume's figure, as an upper bound
    assert any("x99.superhuge is not in the offline catalogue" in w for w in warnings)


def test_local_storage_has_no_ceiling() -> None:
    ctx = CellContext("local", StorageSpec("local"))
    entries, _, _ = expect_cell(ctx, [fio("latency-4k-qd1-randread", RUNTIME="1")])
    assert only(entries)["limited_by"] == "unknown"
    assert only(entries)["expected_iops"] is None


def test_efs_elastic_throughput_is_unknown() -> None:
    spec = StorageSpec("efs", throughput_mode="elastic")
    entries, _, _ = expect_cell(CellContext("m6i.4xlarge", spec), [fio("seq-read-1m-qd32")])
    assert only(entries)["limited_by"] == "unknown"


def test_unknown_fio_job_is_a_warning_not_a_crash() -> None:
    ctx = CellContext("m6i.4xlarge", StorageSpec("gp3", size_gib=100))
    entries, warnings, _ = expect_cell(ctx, [fio("no-such-job")])
    assert entries == []
    assert any("no-such-job could not be read" in w for w in warnings)


# ---------------------------------------------------------------- pieces


def test_storage_spec_from_matrix_dicts() -> None:
    assert storage_spec({"type": "ebs", "volume_type": "gp2", "size_gib": 8}) == StorageSpec(
        "gp2", size_gib=8
    )
    efs = storage_spec({"type": "efs", "throughput_mode": "provisioned", "provisioned_mibps": 1024})
    assert (efs.type, efs.throughput_mode, efs.throughput_mibps) == ("efs", "provisioned", 1024)


def test_parse_job_text_merges_global_and_expands_variables() -> None:
    text = "[global]\nbs=${BS}\nrate=,5m\nnumjobs=4\n[w]\nrw=randwrite\n[r]\nstonewall\nrw=read\n"
    write, read = parse_job_text(text, {"BS": "64k"})
    assert write.block_sizes == {"write": 65536}
    assert write.demand_iops() == 4 * 5 * 1024 * 1024 / 65536
    assert (write.group, read.group) == (0, 1)
    assert math.isinf(read.demand_iops())


def test_parse_size_uses_base_1024() -> None:
    assert [parse_size(s) for s in ("4k", "1m", "1g", "512", "x")] == [
        4096,
        2**20,
        2**30,
        512,
        None,
    ]


def test_parse_size_reads_iec_suffixes_as_fio_does() -> None:
    # fio 3.33, default kb_base=1024: `--size=1mib --bs=4kib` read 1,000,000 bytes in 250 I/Os
    assert parse_size("4kib") == 4000
    assert parse_size("1MiB") == 1_000_000
    assert parse_size("4k", kb_base=1000) == 4000
    assert parse_size("4kib", kb_base=1000) == 4096


def test_a_job_in_iec_units_gets_fios_block_size_and_size() -> None:
    (job,) = parse_job_text("[j]\nrw=randread\nbs=4kib\nsize=1gib\nrate=1mib\n", {})
    assert job.block_sizes == {"read": 4000}
    assert job.size_bytes == 10**9
    assert job.rate_bytes == {"read": 1e6, "write": 1e6}  # "x" applies to both directions
    (base1000,) = parse_job_text("[j]\nkb_base=1000\nrw=read\nbs=4k\n", {})
    assert base1000.block_sizes == {"read": 4000}


def test_simulate_drain_arithmetic_with_two_buckets() -> None:
    # given a volume bucket (100 credits, burst 20/s over 10/s) and an
    # instance bucket (300 credits, burst 15/s over 5/s)
    volume = Limit("volume", "ops", 10, 20, 100, what="v")
    instance = Limit("instance", "ops", 5, 15, 300, what="i")
    # when the job asks for as much as it can get
    phases, emptied = simulate([volume, instance], 4096, math.inf, [100.0, 300.0])
    # then: 15/s (instance burst) until the volume bucket empties at 100/(15-10)=20 s,
    # having spent 20 x 10 of the instance's; then 10/s (volume baseline) for
    # 100/(10-5)=20 s more; then 5/s for good
    assert [(p.start_s, p.end_s, p.iops, p.limited_by) for p in phases] == [
        (0, 20, 15, "instance"),
        (20, 40, 10, "volume"),
        (40, None, 5, "instance"),
    ]
    assert emptied == [(0, 20), (1, 40)]
