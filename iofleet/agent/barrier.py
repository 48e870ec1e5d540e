"""Start barrier: the slots of one cell start their timed work together.

Each party announces itself, then waits until `parties` announcements exist
or the timeout expires. Kinds: `none`, `file` (local processes sharing a
directory); the AWS side registers a DynamoDB counter with `register_barrier`.

Stdlib only.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


class BarrierError(Exception):
    """The barrier cannot be used (bad config, unwritable directory); one line."""


@dataclass(frozen=True)
class BarrierResult:
    passed: bool
    waited_s: float
    arrived: int  # announcements seen when the wait ended
    parties: int

    @property
    def error(self) -> str | None:
        if self.passed:
            return None
        return (
            f"start barrier timed out after {self.waited_s:.1f} s: "
            f"{self.arrived} of {self.parties} slots arrived"
        )


class Barrier(ABC):
    parties: int
    timeout_s: float

    @abstractmethod
    def announce(self, party: int) -> None:
        """Record that `party` (the slot index) has arrived. Idempotent."""

    @abstractmethod
    def count(self) -> int:
        """Announcements so far."""

    def wait(self, party: int, timeout_s: float | None = None) -> BarrierResult:
        """Announce, then wait for every party (polling with a growing interval)."""
        limit = self.timeout_s if timeout_s is None else min(self.timeout_s, timeout_s)
        started = time.monotonic()
        self.announce(party)
        interval = 0.02
        while True:
            arrived = self.count()
            waited = time.monotonic() - started
            if arrived >= self.parties:
                return BarrierResult(True, waited, arrived, self.parties)
            if waited >= limit:
                return BarrierResult(False, waited, arrived, self.parties)
            time.sleep(min(interval, max(limit - waited, 0.0)))
            interval = min(interval * 1.5, 0.5)


class NoBarrier(Barrier):
    def __init__(self) -> None:
        self.parties = 1
        self.timeout_s = 0.0

    def announce(self, party: int) -> None:
        return None

    def count(self) -> int:
        return 1


class FileBarrier(Barrier):
    """One `party-NNNN` file per slot in a shared directory (O_CREAT|O_EXCL)."""

    def __init__(self, directory: Path, parties: int, timeout_s: float):
        self.directory = Path(directory)
        self.parties = parties
        self.timeout_s = timeout_s

    def announce(self, party: int) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(
                self.directory / f"party-{party:04d}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644
            )
        except FileExistsError:
            return  # this slot already arrived (a retried agent): still one party
        except OSError as exc:
            raise BarrierError(
                f"cannot announce at barrier {self.directory}: {exc.strerror or exc}"
            ) from None
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{os.getpid()} {time.time():.6f}\n")

    def count(self) -> int:
        try:
            return sum(1 for p in self.directory.iterdir() if p.name.startswith("party-"))
        except FileNotFoundError:
            return 0


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
            f"barrier.kind: must be one of {', '.join(sorted(_FACTORIES))}, got {kind!r}"
        )
    return factory(config)
