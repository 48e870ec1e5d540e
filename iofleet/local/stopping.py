"""How `iofleet local` stops: SIGINT (Ctrl-C), SIGTERM and SIGHUP.

The first of them interrupts the run where it waits (`Interrupted`, a KeyboardInterrupt
that names its signal): in a cell's populate step or its slots (`opened`), in the
ingest or report (`interruptible`); one that comes anywhere else waits for the next
of those points (`StopSignals(deferred=True)`), so no code between them is cut
short. Then the runner stops every slot, records the slots that did not
record themselves, removes what the run put on the target, and ingests what was
measured. While it does that, later signals do not interrupt it (a cleanup cut in
the middle is what leaves files and processes behind): they only make it hurry
(`hurry`): the slots still running are killed at once instead of being given their
grace, and the ingest and report are left to the next run. Ingest and report
themselves are interruptible at any signal (`interruptible`): the warehouse is
written in one transaction, which an interrupt rolls back. Once one signal has cut
them, later ones wait: what follows is that rollback and the removal of their temp
files (a second signal there used to leave the ingest's rows in
--out/.iofleet-load-*, or a .report.html.*.tmp, and end the run as that second
signal).

The exit status is 128 + the first signal's number (130 SIGINT, 143 SIGTERM, 129
SIGHUP), as a shell reports a process killed by it.

Before the run takes the signals, from the command's first line (`startup_stops`), the
first of them interrupts at once wherever the command is (its early fio checks, its
imports, the validation, the targets being made, until it holds the --out lock), as
SIGINT always did: the `finally` blocks on the way out stop the checks and remove
what was made. Before, SIGTERM and SIGHUP there killed the process outright.

A child process is started and recorded in one step (`held`): a signal that comes
between the fork and the record is raised once it is recorded, so the cleanup finds
the child (otherwise it would run on with no one to stop or reap it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_installed: list[StopSignals] = []  # the StopSignals in force, innermost last (`held`)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by `signum`."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopSignals:
    """Installed for the length of a run (a context manager); see the module docstring.

    `deferred`: a signal interrupts only inside `opened` (where the run waits for its
    slots) or `interruptible`; anywhere else it waits for the next of them, so that
    no code between two of them (an exception on its way to the cleanup, the last
    cell's end and the writing of run.json) is cut short by it.
    `once`: only the first signal ever interrupts (`iofleet import`, `report`,
    `compare`: what follows it is a rollback and the removal of a temp file, which a
    second signal must not cut).
    `then_ignore`: on leaving, stop signals are ignored instead of given back to the
    handlers that were there (`command_stops` in a process that ends after it)."""

    def __init__(
        self, once: bool = False, deferred: bool = False, then_ignore: bool = False
    ) -> None:
        self.once = once
        self.deferred = deferred  # outside `opened` and `interruptible`, signals wait
        self.then_ignore = then_ignore  # on leaving, stop signals are ignored (command_stops)
        self._open = 0
        self.received: list[int] = []
        self._raised = False
        self._interruptible = 0
        self._cut = False  # an `interruptible` block was interrupted: it is unwinding
        self._shielded = 0
        self._previous: dict[int, Any] = {}
        self._previous_hook = sys.unraisablehook

    def __enter__(self) -> StopSignals:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        _installed.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if self.then_ignore else handler)
        self._previous.clear()
        if sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self._previous_hook
        if self in _installed:
            _installed.remove(self)

    def _unraisable(self, unraisable: Any) -> None:
        """A signal's Interrupted raised inside a finalizer (a `__del__`, a generator the
        collector closes) never reaches the run: Python prints a traceback and drops it.
        Take it back instead, silently: `deliver` raises it at the run's next point (the
        slots' wait checks every 0.5 s). Sending the signal again from here would not
        do: its handler would run inside this hook, and be dropped the same way."""
        exc = unraisable.exc_value
        if isinstance(exc, Interrupted) and self._raised and exc.signum in self.received:
            self._raised = False
            if self._interruptible:
                self._cut = False
            return
        self._previous_hook(unraisable)

    @property
    def hurry(self) -> bool:
        """A second signal came: stop the slots now, leave ingest to the next run."""
        return len(self.received) > 1

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.once and self._raised:
            return
        if self._shielded:  # raised on leaving `held`, or at the next point
            return
        if self._interruptible:
            if self._cut:  # its rollback and temp-file removal: not cut again
                return
            self._cut = self._raised = True
            if _unwinding_from_interrupt():  # the block ends in that error: no second cut
                return
            raise Interrupted(signum)
        if not (self._raised or self._shielded) and (self._open or not self.deferred):
            self._raised = True
            raise Interrupted(signum)

    def deliver(self) -> None:
        """Raise the first signal now if it came while shielded and has not been raised."""
        if self.received and not self._raised:
            self._raised = True
            raise Interrupted(self.received[0])

    @contextmanager
    def shielded(self) -> Iterator[None]:
        """Inside, no signal interrupts (a cleanup, a record being written); the first
        signal that came meanwhile is raised by `deliver` or `interruptible`."""
        self._shielded += 1
        try:
            yield
        finally:
            self._shielded -= 1

    @contextmanager
    def opened(self) -> Iterator[None]:
        """Inside, the first signal interrupts (with `deferred`); one that came while
        outside is raised on entering."""
        self.deliver()
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Inside, a signal interrupts, the run's first or a later one; once one has,
        the next ones wait (the block's unwinding is its cleanup). DuckDB turns an
        exception raised by a signal handler during a query into its own RuntimeError
        ("Query interrupted"): an error that ends the block after a signal came is
        that signal's Interrupted."""
        self.deliver()  # a signal that came while shielded
        before = len(self.received)
        cut, self._cut = self._cut, False
        self._interruptible += 1
        try:
            yield
        except Interrupted:
            raise
        except BaseException as exc:
            if len(self.received) > before:
                raise Interrupted(self.received[before]) from exc
            raise
        finally:
            self._interruptible -= 1
            self._cut = cut

    @contextmanager
    def interrupting(self, interrupt: Callable[[], None]) -> Iterator[None]:
        """Inside, the first stop signal also calls `interrupt` at once, from a thread
        (later ones leave the rollback that follows alone). A Python
        signal handler runs only between bytecodes, and DuckDB looks for signals only
        now and then while a statement runs (one ran on past a test's 180 s bound
        after Ctrl-C): `interrupt` is the connection's `interrupt()`, which stops the
        statement; the handler then raises in the main thread as usual."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        stops = {int(s) for s in STOP_SIGNALS}
        interrupted = False

        def watch() -> None:
            nonlocal interrupted
            while data := os.read(read_fd, 64):  # the signal numbers; b"" once closed
                if stops.intersection(data) and not interrupted:  # not the rollback
                    interrupted = True
                    interrupt()

        watcher = threading.Thread(target=watch, name="iofleet-stop-watch", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous)
            os.close(write_fd)  # the watcher reads EOF and ends
            watcher.join()
            os.close(read_fd)


def _unwinding_from_interrupt() -> bool:
    """Whether the code a signal's handler runs on top of is handling DuckDB's error for
    an interrupted statement (`InterruptException`), the one the first signal's
    `interrupt()` made (`StopSignals.interrupting`): the watcher thread calls it as soon
    as the signal comes, and the handler runs in the main thread only once DuckDB has
    returned, somewhere in the unwinding of that error (the temp directory of the rows
    being loaded was being removed, in 1 of 3 SIGTERMs to an import). Raising there
    would cut that cleanup; the error already ends the `interruptible` block, which
    makes it the signal's Interrupted."""
    exc = sys.exc_info()[1]
    return exc is not None and any(
        cls.__name__ == "InterruptException" for cls in type(exc).__mro__
    )


@contextmanager
def startup_stops() -> Iterator[StopSignals]:
    """For `iofleet local` from its first line until its run takes the signals (the
    run's own StopSignals, iofleet.local.runner): the first stop signal interrupts at
    once, wherever the command is; later ones are let go, so the cleanup on the way out
    (the early fio checks stopped, the targets made removed) is not cut short."""
    with StopSignals(once=True) as stops:
        yield stops


@contextmanager
def held() -> Iterator[None]:
    """Inside, no stop signal interrupts; on leaving, one that came is raised where a
    signal interrupts at once (StopSignals not `deferred`, or inside `opened` or
    `interruptible`: there it cuts the block once, as it would have inside), and waits
    for the next point under deferred ones as always. For a child process started and
    recorded where its cleanup finds it, in one step; for DuckDB's module being loaded
    (iofleet.cli, iofleet.local.finish): it calls back into Python as it loads, and an
    exception raised there aborts the process. Without StopSignals installed, nothing
    is held."""
    stops = _installed[-1] if _installed else None
    if stops is None:
        yield
        return
    before = len(stops.received)
    with stops.shielded():
        yield
    came = len(stops.received) > before and not (stops.once and stops._raised)
    if stops._interruptible and came and not stops._cut:
        stops._cut = stops._raised = True
        raise Interrupted(stops.received[before])
    if not stops.deferred or stops._open:
        stops.deliver()


@contextmanager
def command_stops(interrupt: Callable[[], None], to_the_end: bool = False) -> Iterator[StopSignals]:
    """For `iofleet import`, `report` and `compare`: the first stop signal interrupts the
    command wherever it is (`interrupt` stops a running DuckDB statement), and whatever
    error it ends in is that signal's `Interrupted`; later signals wait, and the first
    does not raise again once the statement's own error unwinds
    (`_unwinding_from_interrupt`), so the rollback and the removal of a temp file that
    follow are never cut short.

    `to_the_end`: the process ends after the command (the command line's): once the
    block is left, stop signals are ignored to the process's end. What is left then
    is the command's last line and the interpreter's exit (a tenth of a second with
    DuckDB loaded); the default action there killed the process after its work was
    done, or ended one already interrupted as a second signal (decision 68)."""
    with (
        StopSignals(once=True, then_ignore=to_the_end) as stops,
        stops.interrupting(interrupt),
        stops.interruptible(),
    ):
        yield stops
