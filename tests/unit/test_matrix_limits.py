"""The dated EBS limits table and its checker."""

from __future__ import annotations

import pytest

from iofleet.plan.limits import check_ebs_volume, ebs_limits


def test_limits_table_is_dated_and_sourced() -> None:
    limits = ebs_limits()
    assert limits.source.startswith("https://docs.aws.amazon.com/")
    assert limits.as_of.startswith("2026-")
    assert set(limits.volume_types) == {"gp2", "gp3", "io1", "io2", "st1", "sc1"}


@pytest.mark.parametrize(
    ("volume_type", "size", "iops", "throughput"),
    [
        ("gp2", 1, None, None),
        ("gp2", 16384, None, None),
        ("gp3", 65536, 80000, 2000),
        ("gp3", 1, 3000, 125),  # the baseline is allowed below the per-GiB ratio
        ("gp3", 100, None, 750),  # default 3000 IOPS allows 750 MiB/s
        ("io1", 4, 200, None),
        ("io1", 16384, 64000, None),
        ("io2", 256, 256000, None),
        ("io2", 8, 400, None),
        ("st1", 125, None, None),
        ("sc1", 16384, None, None),
    ],
)
def test_volumes_within_the_published_limits_pass(
    volume_type: str, size: int, iops: int | None, throughput: int | None
) -> None:
    assert check_ebs_volume(volume_type, size, iops, throughput) == []


@pytest.mark.parametrize(
    ("volume_type", "size", "iops", "throughput", "field", "text"),
    [
        ("gp2", 16385, None, None, "size_gib", "1-16384 GiB"),
        ("gp2", 0, None, None, "size_gib", "1-16384 GiB"),
        ("gp2", 100, 300, None, "iops", "does not take provisioned IOPS"),
        ("gp2", 100, None, 250, "throughput_mibps", "does not take provisioned throughput"),
        ("gp3", 65537, None, None, "size_gib", "1-65536 GiB"),
        ("gp3", 1000, 2999, None, "iops", "3000-80000"),
        ("gp3", 1000, 80001, None, "iops", "3000-80000"),
        ("gp3", 10, 5001, None, "iops", "10 GiB allows 5000"),
        ("gp3", 1000, 16000, 124, "throughput_mibps", "125-2000 MiB/s"),
        ("gp3", 1000, 16000, 2001, "throughput_mibps", "125-2000 MiB/s"),
        ("gp3", 1000, 4000, 1001, "throughput_mibps", "4000 IOPS allows 1000 MiB/s"),
        ("io1", 3, 100, None, "size_gib", "4-16384 GiB"),
        ("io1", 100, None, None, "iops", "required for io1"),
        ("io1", 100, 5001, None, "iops", "50 IOPS per GiB"),
        ("io1", 2000, 64001, None, "iops", "100-64000"),
        ("io1", 100, 1000, 500, "throughput_mibps", "does not take provisioned throughput"),
        ("io2", 65537, 1000, None, "size_gib", "4-65536 GiB"),
        ("io2", 100, 99, None, "iops", "100-256000"),
        ("io2", 300, 256001, None, "iops", "100-256000"),
        ("io2", 8, 8001, None, "iops", "1000 IOPS per GiB"),
        ("st1", 124, None, None, "size_gib", "125-16384 GiB"),
        ("st1", 500, 500, None, "iops", "does not take provisioned IOPS"),
        ("sc1", 16385, None, None, "size_gib", "125-16384 GiB"),
    ],
)
def test_volumes_outside_the_published_limits_are_reported(
    volume_type: str,
    size: int,
    iops: int | None,
    throughput: int | None,
    field: str,
    text: str,
) -> None:
    problems = check_ebs_volume(volume_type, size, iops, throughput)
    assert [f for f, _ in problems] == [field]
    assert text in problems[0][1]


def test_unknown_volume_type_lists_the_known_ones() -> None:
    assert check_ebs_volume("gp4", 10, None, None) == [
        ("volume_type", "unknown EBS volume type 'gp4' (known: gp2, gp3, io1, io2, sc1, st1)")
    ]
