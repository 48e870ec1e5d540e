"""Start barrier, in-process (the two-process case is in tests/integration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iofleet.agent.barrier import BarrierError, FileBarrier, NoBarrier, barrier_from_config


def test_single_party_passes_at_once(tmp_path: Path) -> None:
    result = FileBarrier(tmp_path / "b", parties=1, timeout_s=5).wait(0)

    assert result.passed
    assert result.error is None


def test_missing_party_times_out_with_a_reason(tmp_path: Path) -> None:
    # given a barrier for two slots and only one arriving
    barrier = FileBarrier(tmp_path / "b", parties=2, timeout_s=0.2)

    result = barrier.wait(0)

    assert not result.passed
    assert result.arrived == 1
    assert "start barrier timed out" in (result.error or "")
    assert "1 of 2 slots arrived" in (result.error or "")


def test_party_that_arrived_earlier_releases_the_last_one(tmp_path: Path) -> None:
    barrier = FileBarrier(tmp_path / "b", parties=2, timeout_s=5)
    barrier.announce(1)

    assert barrier.wait(0).passed


def test_announcing_twice_counts_once(tmp_path: Path) -> None:
    barrier = FileBarrier(tmp_path / "b", parties=2, timeout_s=0)

    barrier.announce(3)
    barrier.announce(3)

    assert barrier.count() == 1


def test_wait_is_capped_by_the_callers_timeout(tmp_path: Path) -> None:
    barrier = FileBarrier(tmp_path / "b", parties=2, timeout_s=600)

    assert not barrier.wait(0, timeout_s=0.05).passed


def test_none_kind_never_waits() -> None:
    assert isinstance(barrier_from_config({"kind": "none"}), NoBarrier)
    assert NoBarrier().wait(5).passed


def test_file_kind_needs_parties(tmp_path: Path) -> None:
    with pytest.raises(BarrierError, match="barrier.parties"):
        barrier_from_config({"kind": "file", "dir": str(tmp_path), "parties": 0})


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(BarrierError, match="barrier.kind"):
        barrier_from_config({"kind": "zookeeper"})
