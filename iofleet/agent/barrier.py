"""Start barrier: the slots of one cell start their timed work at one agreed instant.

Each party announces itself, then reads the barrier's state at a fixed poll
interval (reads start on a fixed schedule, so a slow read does not delay the
next one). The first party to see every announcement (normally the last to
arrive) writes the release record: one wall-clock instant, its own clock's
now plus a margin, in microseconds since the Unix epoch. Writing it is
create-if-absent, so when several parties race the first record wins and the
others adopt it. Every party, once it has seen the record, sleeps until that
absolute instant (short sleeps, re-reading the wall clock, and a busy wait
with sched_yield for the last millisecond) and records the instant it passed.
A party that first sees the record after the instant passes at once and
records how late it saw it (`late_us`). See docs/internals.md, "Start barrier".

The margin is two poll intervals plus a slack for one slow read (a scheduling
delay locally, a retried request on DynamoDB): a party polling on time sees
the record at most one interval after it was written, so it has more than an
interval in hand before the instant.

Kinds: `none`, `file` (local processes sharing a directory); the AWS side
registers a DynamoDB item with `register_barrier`.

Stdlib only.
"""

from __future__ import annotations

import errno
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from iofleet.agent import stops
from iofleet.quote import quote

SPIN_US = 1000  # busy-wait (yielding) for the last millisecond before the instant
SLEEP_CHUNK_S = 0.05  # re-read the wall clock at least this often while sleeping


class BarrierError(Exception):
    """The barrier cannot be used (bad config, unwritable directory); one line."""


@dataclass(frozen=True)
class BarrierState:
    arrived: int  # announcements seen (a lower bound once the release is set)
    release_us: int | None  # the agreed instant, microseconds since the epoch


@dataclass(frozen=True)
class BarrierResult:
    passed: bool
    waited_s: float
    arrived: int  # announcements seen when the wait ended
    parties: int
    released_us: int | None = None  # the agreed instant (wall clock, us since the epoch)
    passed_us: int | None = None  # when this party passed (its wall clock; >= released_us)
    late_us: int = 0  # how long after the instant this party first saw the release record

    @property
    def error(self) -> str | None:
        if self.passed:
            return None
        return (
            f"start barrier timed out after {self.waited_s:.1f} s: "
            f"{self.arrived} of {self.parties} slots arrived"
        )


def now_us() -> int:
    """The wall clock (CLOCK_REALTIME), microseconds since the Unix epoch."""
    return time.time_ns() // 1000


def iso_us(epoch_us: int | None) -> str | None:
    """'2026-11-23T15:04:05.123456Z' for microseconds since the epoch (None stays None)."""
    if epoch_us is None:
        return None
    try:
        when = datetime.fromtimestamp(epoch_us // 1_000_000, tz=UTC)
    except (ValueError, OverflowError, OSError):  # beyond year 9999: say it in numbers
        return f"{epoch_us} us after the epoch"
    return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{epoch_us % 1_000_000:06d}Z"


def sleep_until(at_us: int) -> int:
    """Return at the first wall-clock reading >= `at_us` (that reading, in us).

    Sleeps in chunks (the wall clock is re-read after each, so a clock step
    is followed), then busy-waits, yielding the CPU, for the last SPIN_US.
    """
    while True:
        now = now_us()
        remaining = at_us - now
        if remaining <= 0:
            return now
        if remaining > SPIN_US:
            time.sleep(min(remaining - SPIN_US, SLEEP_CHUNK_S * 1e6) / 1e6)
        else:
            os.sched_yield()


class Barrier(ABC):
    parties: int
    timeout_s: float
    poll_s: float  # fixed interval between reads of the barrier state
    slack_s: float  # allowance for one slow read on top of the poll interval

    @property
    def margin_s(self) -> float:
        """How far after the decision the release instant is set."""
        return 2 * self.poll_s + self.slack_s

    @abstractmethod
    def announce(self, party: int) -> BarrierState:
        """Record that `party` (the slot index) has arrived. Idempotent."""

    @abstractmethod
    def state(self) -> BarrierState:
        """Announcements so far and the release instant, if one is set."""

    @abstractmethod
    def propose_release(self, at_us: int) -> int:
        """Set the release instant to `at_us` unless one is set; the instant in force."""

    def count(self) -> int:
        """Announcements so far."""
        return self.state().arrived

    def wait(self, party: int, timeout_s: float | None = None) -> BarrierResult:
        """Announce, poll at a fixed interval until the release instant is known, sleep
        until it; gives up after the timeout if not every party has arrived."""
        limit = self.timeout_s if timeout_s is None else min(self.timeout_s, timeout_s)
        started = time.monotonic()
        state = self.announce(party)
        next_read = started  # reads start on a fixed schedule: a slow read does not push
        # the next one back (the margin counts on one read per interval), and a read that
        # overran its slot is followed at once, never by a burst to catch up
        proposal: int | None = None
        while True:
            if state.release_us is None and state.arrived >= self.parties:
                # the margin lets the other parties read the record in time; a party
                # alone has no one to wait for and is released at once
                margin = self.margin_s if self.parties > 1 else 0.0
                proposal = now_us() + round(margin * 1e6)
                state = BarrierState(state.arrived, self.propose_release(proposal))
            if state.release_us is not None:
                seen = now_us()
                ahead_s = (state.release_us - seen) / 1e6
                if ahead_s > max(limit - (time.monotonic() - started), self.margin_s):
                    raise BarrierError(
                        f"the release instant {iso_us(state.release_us)} is {ahead_s:.1f} s "
                        "ahead of this slot's clock, beyond its barrier timeout "
                        "(a clock far from the others', or a corrupt release record)"
                    )
                # a party whose own proposal is the instant did not see it late (a party
                # alone proposes "now": it reads the clock again a few us after it)
                late = 0 if state.release_us == proposal else max(0, seen - state.release_us)
                passed = sleep_until(state.release_us)
                return BarrierResult(
                    True,
                    time.monotonic() - started,
                    max(state.arrived, self.parties),
                    self.parties,
                    released_us=state.release_us,
                    passed_us=passed,
                    late_us=late,
                )
            now = time.monotonic()
            waited = now - started
            if waited >= limit:
                return BarrierResult(False, waited, state.arrived, self.parties)
            next_read = max(next_read + self.poll_s, now)
            stops.raise_dropped()  # a stop a finalizer dropped: within one poll interval
            time.sleep(min(next_read - now, max(limit - waited, 0.0)))
            state = self.state()


class NoBarrier(Barrier):
    """Nothing to wait for: the release instant is the moment of asking."""

    def __init__(self) -> None:
        self.parties = 1
        self.timeout_s = 0.0
        self.poll_s = 0.0
        self.slack_s = 0.0

    def announce(self, party: int) -> BarrierState:
        return BarrierState(1, None)

    def state(self) -> BarrierState:
        return BarrierState(1, None)

    def propose_release(self, at_us: int) -> int:
        return at_us


class FileBarrier(Barrier):
    """One `party-NNNN` file per slot in a shared directory (O_CREAT|O_EXCL); the release
    instant in the file `release`, created once (written aside, then hard-linked)."""

    POLL_S = 0.01  # a read is an open() of one file: cheap for dozens of local processes
    SLACK_S = 0.1  # a local process may wait that long for a CPU on a loaded machine

    def __init__(
        self,
        directory: Path,
        parties: int,
        timeout_s: float,
        poll_s: float = POLL_S,
        slack_s: float = SLACK_S,
    ):
        self.directory = Path(directory)
        self.parties = parties
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.slack_s = slack_s

    @property
    def release_path(self) -> Path:
        return self.directory / "release"

    def announce(self, party: int) -> BarrierState:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(
                self.directory / f"party-{party:04d}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644
            )
        except FileExistsError:
            return self.state()  # this slot already arrived (a retried agent): still one party
        except OSError as exc:
            raise BarrierError(
                f"cannot announce at barrier {self.directory}: {exc.strerror or exc}"
            ) from None
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{os.getpid()} {now_us()}\n")
        return self.state()

    def _release(self) -> int | None:
        try:
            text = self.release_path.read_text(encoding="ascii")
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        except OSError as exc:
            raise BarrierError(f"cannot read {self.release_path}: {exc.strerror or exc}") from None
        first = text.split()[:1]
        digits = first[0] if first else ""
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 20:  # "": being written
            return None  # (past 20 digits no clock's instant: int() raised past 4,300)
        return int(digits)

    def state(self) -> BarrierState:
        release = self._release()
        try:
            arrived = sum(1 for p in self.directory.iterdir() if p.name.startswith("party-"))
        except FileNotFoundError:
            arrived = 0
        return BarrierState(arrived, release)

    def propose_release(self, at_us: int) -> int:
        aside = self.directory / f".release-{os.getpid()}-{at_us}"
        try:
            aside.write_text(f"{at_us} {os.getpid()}\n", encoding="ascii")
            try:
                os.link(aside, self.release_path)  # fails with EEXIST if another party won
            except FileExistsError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                self._create_in_place(at_us)  # a file system without hard links
        except OSError as exc:
            raise BarrierError(
                f"cannot write the release at barrier {self.directory}: {exc.strerror or exc}"
            ) from None
        finally:
            aside.unlink(missing_ok=True)
        deadline = time.monotonic() + max(self.margin_s, 1.0)
        while True:  # the winner's record (ours, or one created in place being written)
            release = self._release()
            if release is not None or time.monotonic() >= deadline:
                break
            time.sleep(self.poll_s)
        if release is None:
            raise BarrierError(f"{self.release_path}: exists but holds no instant")
        return release

    def _create_in_place(self, at_us: int) -> None:
        try:
            fd = os.open(self.release_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{at_us} {os.getpid()}\n")


BarrierFactory = Callable[[Mapping[str, object]], Barrier]
_FACTORIES: dict[str, BarrierFactory] = {}


def register_barrier(kind: str, factory: BarrierFactory) -> None:
    _FACTORIES[kind] = factory


def _file(config: Mapping[str, object]) -> Barrier:
    directory = config.get("dir")
    if not isinstance(directory, str) or not directory:
        raise BarrierError("barrier.dir: required for a file barrier")
    return FileBarrier(Path(directory), _parties(config), _timeout(config))


def _parties(config: Mapping[str, object]) -> int:
    parties = config.get("parties")
    if isinstance(parties, bool) or not isinstance(parties, int) or parties < 1:
        raise BarrierError("barrier.parties: must be a positive integer")
    return parties


def _timeout(config: Mapping[str, object]) -> float:
    timeout = config.get("timeout_s", 600)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
        raise BarrierError("barrier.timeout_s: must be a non-negative number")
    return float(timeout)


register_barrier("none", lambda config: NoBarrier())
register_barrier("file", _file)


def barrier_from_config(config: Mapping[str, object] | None) -> Barrier:
    if config is None:
        return NoBarrier()
    kind = config.get("kind")
    factory = _FACTORIES.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise BarrierError(
            f"barrier.kind: must be one of {', '.join(sorted(_FACTORIES))}, got {quote(kind)}"
        )
    return factory(config)
