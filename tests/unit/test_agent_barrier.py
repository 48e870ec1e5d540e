"""Start barrier: in-process, and with real processes released at one agreed instant
(two slot processes running fio and ioping are in tests/integration)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import iofleet.agent.barrier as barrier_module
from iofleet.agent.barrier import (
    Barrier,
    BarrierError,
    BarrierState,
    FileBarrier,
    NoBarrier,
    barrier_from_config,
    iso_us,
    now_us,
    sleep_until,
)

ROOT = Path(__file__).resolve().parents[2]


def test_single_party_passes_at_once(tmp_path: Path) -> None:
    result = FileBarrier(tmp_path / "b", parties=1, timeout_s=5).wait(0)

    assert result.passed
    assert result.error is None
    # it set the instant itself ("now"): it did not see it late (the report's "seen late")
    assert result.late_us == 0
    assert result.passed_us is not None and result.released_us is not None
    assert result.passed_us >= result.released_us


def test_a_lone_party_that_finds_an_earlier_instant_saw_it_late(tmp_path: Path) -> None:
    # given a release instant set a second ago (a retried slot of a one-slot cell)
    barrier = FileBarrier(tmp_path / "b", parties=1, timeout_s=5)
    barrier.announce(0)
    barrier.propose_release(now_us() - 1_000_000)
    # then the party passes at once and says how late it saw the instant
    assert barrier.wait(0).late_us >= 1_000_000


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


# --- the agreed release instant, with real processes ------------------------------

# One party: note the wall clock, then wait at the barrier; print both as JSON.
PARTY = """
import json, sys
from pathlib import Path
from iofleet.agent.barrier import FileBarrier, now_us
barrier = FileBarrier(Path(sys.argv[1]), int(sys.argv[2]), 120, slack_s=float(sys.argv[4]))
before = now_us()
result = barrier.wait(int(sys.argv[3]))
print(json.dumps({"before_us": before, **result.__dict__}))
"""
# A loaded 2-core test machine may keep a woken process from a CPU for tens of ms:
# the slack (part of the margin) is what the barrier allows for that, so give it room.
TEST_SLACK_S = 0.5


def _start_party(directory: Path, parties: int, index: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", PARTY, str(directory), str(parties), str(index), str(TEST_SLACK_S)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for_files(directory: Path, count: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if directory.is_dir() and sum(1 for _ in directory.glob("party-*")) >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{count} parties never announced in {directory}")


@pytest.mark.parametrize("parties", [8, 24])
def test_every_process_passes_at_the_one_agreed_instant_and_never_before_it(
    tmp_path: Path, parties: int
) -> None:
    # given all parties but the last waiting at a file barrier, the last started after
    directory = tmp_path / "barrier"
    procs = [_start_party(directory, parties, i) for i in range(parties - 1)]
    _wait_for_files(directory, parties - 1)
    procs.append(_start_party(directory, parties, parties - 1))
    # when every process has passed
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        results.append(json.loads(out))
    # then they agreed on one instant, set a margin after the last party arrived
    barrier = FileBarrier(directory, parties, 120, slack_s=TEST_SLACK_S)
    assert all(r["passed"] for r in results)
    (released,) = {r["released_us"] for r in results}
    assert released >= max(r["before_us"] for r in results) + round(barrier.margin_s * 1e6)
    assert int((directory / "release").read_text().split()[0]) == released
    # and each passed at or after it, within the poll interval plus the margin
    bound_us = round((barrier.poll_s + barrier.margin_s) * 1e6)
    for r in results:
        assert r["late_us"] == 0, r  # seen before the instant: the margin sufficed
        assert released <= r["passed_us"] < released + bound_us, r


def test_a_party_that_sees_the_release_late_passes_at_once_and_records_how_late(
    tmp_path: Path,
) -> None:
    # given a release instant already 50 ms in the past when the last party arrives
    barrier = FileBarrier(tmp_path / "b", parties=2, timeout_s=5)
    barrier.announce(1)
    released = barrier.propose_release(now_us() - 50_000)
    # when
    result = barrier.wait(0)
    # then it passes (after the instant, as always) and says it saw the record late
    assert result.passed and result.released_us == released
    assert result.passed_us is not None and result.passed_us >= released
    assert result.late_us >= 50_000


def test_the_first_release_instant_wins_and_later_proposals_adopt_it(tmp_path: Path) -> None:
    barrier = FileBarrier(tmp_path / "b", parties=1, timeout_s=5)
    barrier.announce(0)

    assert barrier.propose_release(1_000_000) == 1_000_000
    assert barrier.propose_release(2_000_000) == 1_000_000
    assert barrier.state().release_us == 1_000_000
    assert [p.name for p in (tmp_path / "b").iterdir() if p.name.startswith(".")] == []


def test_release_is_created_in_place_where_hard_links_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a file system that refuses link(2) (EPERM, as vfat and some FUSE mounts do)
    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    barrier = FileBarrier(tmp_path / "b", parties=1, timeout_s=5)
    # when / then
    assert barrier.wait(0).released_us == int((tmp_path / "b" / "release").read_text().split()[0])


def test_an_empty_release_file_is_a_record_being_written_not_an_instant(tmp_path: Path) -> None:
    barrier = FileBarrier(tmp_path / "b", parties=2, timeout_s=5)
    barrier.announce(0)
    (tmp_path / "b" / "release").write_text("")

    assert barrier.state() == BarrierState(1, None)


def test_sleep_until_never_returns_before_the_instant() -> None:
    for offset_us in (-1000, 0, 300, 3000, 20_000):
        at = now_us() + offset_us
        assert sleep_until(at) >= at


def test_iso_us_keeps_every_microsecond() -> None:
    assert iso_us(1_795_446_029_000_001) == "2026-11-23T15:00:29.000001Z"
    assert iso_us(None) is None


# --- probe sets (tests/data/probes/barrier/) ------------------------------------------

PROBES = ROOT / "tests" / "data" / "probes" / "barrier"
RELEASE_CASES = json.loads((PROBES / "release_records.json").read_text())["cases"]
CONFIG_CASES = json.loads((PROBES / "configs.json").read_text())["cases"]


@pytest.mark.parametrize("case", RELEASE_CASES, ids=[c["name"] for c in RELEASE_CASES])
def test_release_record_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: dict) -> None:
    # given the last party arriving at a barrier whose release record holds `content`,
    # on a wall clock that stands still while it reads (an instant 20 ms ahead would
    # otherwise be late on a loaded machine) and a sleep that returns at the instant
    frozen = now_us()
    monkeypatch.setattr("iofleet.agent.barrier.now_us", lambda: frozen)
    monkeypatch.setattr("iofleet.agent.barrier.sleep_until", lambda at_us: max(at_us, frozen))
    barrier = FileBarrier(tmp_path / "b", parties=2, timeout_s=30, slack_s=0.05)
    barrier.announce(1)
    at = frozen + (case["instant_us"] or 0)
    (tmp_path / "b" / "release").write_bytes(
        case["content"].replace("{at}", str(at)).encode("utf-8")
    )
    # when / then
    if case["outcome"] == "refused":
        with pytest.raises(BarrierError, match=case["message"]):
            barrier.wait(0)
        return
    result = barrier.wait(0)
    assert result.passed and result.released_us is not None and result.passed_us is not None
    assert result.passed_us >= result.released_us
    assert (result.late_us > 0) is (case["outcome"] == "late")


@pytest.mark.parametrize("case", CONFIG_CASES, ids=[json.dumps(c["config"]) for c in CONFIG_CASES])
def test_barrier_config_probe(case: dict) -> None:
    if case["outcome"] == "refused":
        with pytest.raises(BarrierError, match=case["message"]):
            barrier_from_config(case["config"])
    else:
        assert type(barrier_from_config(case["config"])).__name__ == case["kind"]


@pytest.mark.parametrize("parties", [1, 2])
def test_release_margin_only_when_others_must_read_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parties: int
) -> None:
    """A party alone is released at the instant it decides (no one else has to read
    the record in time); with others, the record is set a margin ahead."""
    frozen = 1_800_000_000_000_000
    slept: list[int] = []
    monkeypatch.setattr("iofleet.agent.barrier.now_us", lambda: frozen)
    monkeypatch.setattr("iofleet.agent.barrier.sleep_until", lambda at: slept.append(at) or frozen)
    barrier = FileBarrier(tmp_path / "b", parties=parties, timeout_s=5)
    for other in range(1, parties):
        barrier.announce(other)

    result = barrier.wait(0)

    assert result.passed
    margin_us = 0 if parties == 1 else round(barrier.margin_s * 1e6)
    assert result.released_us == frozen + margin_us
    assert slept == [frozen + margin_us]
    on_disk = barrier.state().release_us  # the record the others (would) read
    assert on_disk == frozen + margin_us


class _SlowReads(Barrier):
    """A barrier on a fake monotonic clock whose every state read takes `read_s` of it;
    the release record appears at the `release_on`-th read. Records when each read began."""

    def __init__(self, clock: list[float], read_s: float, poll_s: float, release_on: int):
        self.parties, self.timeout_s, self.poll_s, self.slack_s = 2, 60.0, poll_s, 0.0
        self.clock, self.read_s, self.release_on = clock, read_s, release_on
        self.read_starts: list[float] = []

    def announce(self, party: int) -> BarrierState:
        return BarrierState(1, None)

    def state(self) -> BarrierState:
        self.read_starts.append(self.clock[0])
        self.clock[0] += self.read_s
        released = len(self.read_starts) >= self.release_on
        return BarrierState(2 if released else 1, now_us() if released else None)

    def propose_release(self, at_us: int) -> int:
        return at_us


@pytest.mark.parametrize(
    ("read_s", "expected_starts"),
    [
        (0.3, [1.0, 2.0, 3.0, 4.0]),  # a read shorter than the interval: starts stay on time
        (1.5, [1.0, 2.5, 4.0, 5.5]),  # a read longer than it: the next follows at once, no burst
    ],
)
def test_reads_start_on_a_fixed_schedule_whatever_each_read_takes(
    monkeypatch: pytest.MonkeyPatch, read_s: float, expected_starts: list[float]
) -> None:
    """The margin counts on one read per poll interval: a slow read (a loaded DynamoDB,
    a retried request) must not push every later read back by its own duration."""
    clock = [0.0]

    def fake_sleep(seconds: float) -> None:
        assert seconds >= 0
        clock[0] += seconds

    fake_time = SimpleNamespace(monotonic=lambda: clock[0], sleep=fake_sleep, time_ns=time.time_ns)
    monkeypatch.setattr(barrier_module, "time", fake_time)
    monkeypatch.setattr("iofleet.agent.barrier.sleep_until", lambda at: at)
    barrier = _SlowReads(clock, read_s=read_s, poll_s=1.0, release_on=4)

    result = barrier.wait(0)

    assert result.passed
    assert barrier.read_starts == pytest.approx(expected_starts)
