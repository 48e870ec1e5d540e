"""Where the device guard looks for data (iofleet.agent.devices.sample_plan): pure arithmetic."""

from __future__ import annotations

import pytest

from iofleet.agent.devices import HEAD_SCAN_BYTES, MAX_FAR_SAMPLES, MIB, sample_plan

GIB = 1 << 30


@pytest.mark.parametrize("size", [64 * MIB, 320 * MIB + 4096, 3 * GIB, 16 << 40])
def test_plan_reads_the_first_and_last_mib_whole(size: int) -> None:
    plan = sample_plan(size)
    assert plan[0] == (0, MIB)
    last_at, last_len = plan[-1]
    assert last_at + last_len == size and last_len >= MIB - 4096
    assert all(at + length <= size for at, length in plan)


def test_plan_samples_every_mib_boundary_of_the_head_where_superblocks_sit() -> None:
    # (partitions start on MiB boundaries; a table wiped under them leaves their filesystems)
    assert HEAD_SCAN_BYTES >= 8 * GIB
    plan = set(sample_plan(HEAD_SCAN_BYTES + GIB))
    for boundary in range(MIB, HEAD_SCAN_BYTES, MIB):
        assert (boundary, 8192) in plan  # ext (+1 KiB), xfs (+0), LVM (+512), md 1.2 (+4 KiB)
        assert (boundary + 65536, 8192) in plan  # btrfs (+64 KiB)


def test_plan_beyond_a_gib_is_bounded_even_on_a_huge_volume() -> None:
    plan = sample_plan(16 << 40)
    far = [at for at, _ in plan if HEAD_SCAN_BYTES <= at < (16 << 40) - MIB]
    assert 0 < len(far) <= 2 * MAX_FAR_SAMPLES
    assert sum(length for _, length in plan) < 160 * MIB


def test_plan_of_a_tiny_device_stays_inside_it() -> None:
    assert sample_plan(512 * 1024) == [(0, 512 * 1024)]


@pytest.mark.parametrize("size", [MIB + 512, MIB + 2048, MIB + 4095])
def test_plan_of_a_device_just_over_a_mib_reads_to_its_end(size: int) -> None:
    # the tail read rounds its start down to 4 KiB: here that is 0, and it must still be made
    plan = sample_plan(size)
    assert max(at + length for at, length in plan) == size
