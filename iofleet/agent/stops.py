"""The agent's stops that a finalizer dropped, taken back (decision 67). Stdlib only.

The agent stops on SIGTERM and SIGINT (`iofleet.agent.slot.sigterm_interrupts`) by a
KeyboardInterrupt that the handler raises wherever the main thread is, and
`outputs_kept` and `stops_held` pass a held signal on to that handler. When the main
thread is in a finalizer (a `__del__`, a generator the collector closes), Python
prints "Exception ignored in ..." and drops the exception: the stop was lost, and the
handler had already set SIGTERM (and, since, SIGINT) to SIG_IGN, so a second one did
nothing either and the slot ran its workloads to their end.

Inside `dropped_stops_kept` (which `sigterm_interrupts` enters), a KeyboardInterrupt
that a finalizer drops in the main thread is taken back instead, with no message (in
the agent only a signal handler raises one), and raised again at the agent's next
point (`raise_dropped`): its waits (a workload's, `iofleet.agent.process.wait_until`;
the start barrier's and the refill's, `sleep`), a workload's start
(`iofleet.agent.process.run_child`), the end of each workload (`outputs_kept`), and
the end of the block. Anything else a finalizer raises goes to the hook that was
there before.

The waits are woken, not polled: the hook also writes a byte to a pipe of its own
(`wake_fd`), which the workload wait polls beside the child's pidfd and `sleep`
polls alone. So a stop dropped just before a wait, or while Python resumes an
interrupted poll(2) after a handler (nothing else runs between the two), ends the
wait at once, and a workload that runs for hours is never woken for nothing.
`signal.set_wakeup_fd` would wake the wait at every signal, whether its handler
raised or not, and it is one fd for the whole process (`iofleet.local.stopping`
uses it).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Dropped:
    """The state of the outermost `dropped_stops_kept` in force (depth 0: none)."""

    depth = 0
    pending: KeyboardInterrupt | None = None  # the first stop a finalizer dropped
    read_fd = -1  # the wake pipe: a byte in it for each stop taken back
    write_fd = -1
    previous_hook: Any = None


def _unraisable(unraisable: Any) -> None:
    """sys.unraisablehook inside `dropped_stops_kept`."""
    exc = unraisable.exc_value
    if (
        isinstance(exc, KeyboardInterrupt)
        and threading.current_thread() is threading.main_thread()
        and _Dropped.depth
    ):
        if _Dropped.pending is None:
            _Dropped.pending = exc
        try:
            os.write(_Dropped.write_fd, b"\0")
        except OSError:  # full: the wait is woken already
            pass
        return
    (_Dropped.previous_hook or sys.__unraisablehook__)(unraisable)


@contextmanager
def dropped_stops_kept() -> Iterator[None]:
    """Inside, a stop a finalizer dropped is taken back and raised at the next point;
    one still held when the block ends is raised there (unless an exception is already
    on its way out). The previous hook comes back on leaving. Nested blocks share the
    outermost one's state."""
    _Dropped.depth += 1
    if _Dropped.depth == 1:
        _Dropped.read_fd, _Dropped.write_fd = os.pipe()
        os.set_blocking(_Dropped.read_fd, False)
        os.set_blocking(_Dropped.write_fd, False)
        _Dropped.previous_hook = sys.unraisablehook
        sys.unraisablehook = _unraisable
    try:
        yield
    except BaseException:
        _leave()
        raise
    pending = _leave()
    if pending is not None:
        raise pending.with_traceback(None)


def _leave() -> KeyboardInterrupt | None:
    """Leave one `dropped_stops_kept`; the outermost returns the stop still held."""
    _Dropped.depth -= 1
    if _Dropped.depth:
        return None
    if sys.unraisablehook is _unraisable:
        sys.unraisablehook = _Dropped.previous_hook
    _Dropped.previous_hook = None
    os.close(_Dropped.read_fd)
    os.close(_Dropped.write_fd)
    _Dropped.read_fd = _Dropped.write_fd = -1
    pending, _Dropped.pending = _Dropped.pending, None
    return pending


def wake_fd() -> int | None:
    """The fd a wait polls for POLLIN beside what it waits for (None outside
    `dropped_stops_kept`); once it is readable, call `woken`, then `raise_dropped`."""
    return _Dropped.read_fd if _Dropped.depth else None


def woken() -> None:
    """Empty the wake pipe (the wait that polled it has returned)."""
    try:
        while os.read(_Dropped.read_fd, 64):
            pass
    except OSError:  # empty (EAGAIN), or closed
        pass


def raise_dropped() -> None:
    """Raise the stop a finalizer dropped, if there is one (once)."""
    exc = _Dropped.pending
    if exc is None:
        return
    _Dropped.pending = None
    woken()
    raise exc.with_traceback(None)


def sleep(seconds: float) -> None:
    """`time.sleep(seconds)`, ended by a stop a finalizer drops meanwhile (raised)."""
    fd = wake_fd()
    if fd is None:
        time.sleep(seconds)
        return
    end = time.monotonic() + seconds
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        raise_dropped()
        left = end - time.monotonic()
        if left <= 0:
            return
        if poller.poll(max(1, round(left * 1000))):
            woken()


# The signals that stop a slot. SIGHUP (a terminal closed on `iofleet agent` run by hand)
# stops it as SIGTERM does; before, it killed the agent with no slot.json
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextmanager
def stops_held() -> Iterator[None]:
    """Inside, the STOPS wait: the slot's cleanup and its slot.json are never cut
    short (a signal there used to leave a slot whose workloads had all run without its
    record: its parent then recorded it FAILED, with its workload entries lost), nor
    a step that makes something and records it (the raw target's scratch directory). A
    signal that came meanwhile meets, on leaving, the handler it would have met. Only
    in the main thread (where Python handles signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: came.append(signum)) for s in STOPS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for first in came[:1]:
            meets = previous[signal.Signals(first)]
            if callable(meets):
                meets(first, None)  # raises KeyboardInterrupt (sigterm_interrupts, Ctrl-C)
            elif meets == signal.SIG_DFL:
                signal.raise_signal(first)
