"""A stop of the agent whose KeyboardInterrupt a finalizer dropped (`iofleet.agent.stops`).

Real signals sent to this process; a Python handler runs at the next bytecode, so the
stop's handler runs inside the finalizer below, where Python drops what it raises.
Real child processes for the waits. The waits are bounded at 60 s so that a broken wake
fails in a minute (a wait that ran out is told apart by what it returns or leaves: no
KeyboardInterrupt, the wake pipe still full), never by a clock. The slot run whose stop
lands in a finalizer is in tests/integration/test_agent_finalizer_stop.py.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iofleet.agent import stops
from iofleet.agent.barrier import FileBarrier
from iofleet.agent.process import run_child, wait_any, wait_until
from iofleet.agent.slot import outputs_kept, sigterm_interrupts


class _StopsItselfWhenCollected:
    """A finalizer in which a stop's handler runs: it sends the signal to this process
    and goes on running Python code, where the handler is called."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        sum(range(10_000))  # the handler runs between these bytecodes


def _dropped(signum: int) -> None:
    _StopsItselfWhenCollected(signum)  # collected at once
    sum(range(10_000))


@pytest.fixture(autouse=True)
def _python_sigint() -> Iterator[None]:
    """SIGINT with Python's own handler (KeyboardInterrupt), as in `iofleet agent`."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("kept", [False, True], ids=["running", "outputs-kept"])
def test_a_stop_dropped_by_a_finalizer_is_raised_at_the_next_point_once(
    capsys: pytest.CaptureFixture[str], signum: signal.Signals, kept: bool
) -> None:
    # given the agent's stop signals (and, while a workload runs, outputs_kept over them)
    with sigterm_interrupts(), outputs_kept() if kept else contextlib.nullcontext():
        # when the stop's handler runs inside a finalizer
        _dropped(signum)
        # then it is raised at the next point, once
        with pytest.raises(KeyboardInterrupt):
            stops.raise_dropped()
        stops.raise_dropped()
    # and nothing is printed ("Exception ignored in ...")
    assert capsys.readouterr().err == ""


def test_a_second_sigterm_after_a_dropped_one_is_ignored() -> None:
    # given a SIGTERM whose handler ran inside a finalizer
    with sigterm_interrupts():
        _dropped(signal.SIGTERM)
        # when another comes
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10_000))
        # then only the first stops the slot, at its next point
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        with pytest.raises(KeyboardInterrupt):
            stops.raise_dropped()
        stops.raise_dropped()


def test_a_stop_still_held_at_the_end_of_the_block_is_raised_there() -> None:
    ran = []
    with pytest.raises(KeyboardInterrupt), sigterm_interrupts():
        _dropped(signal.SIGTERM)  # after the slot's last point
        ran.append("the rest of the block")
    assert ran == ["the rest of the block"]
    stops.raise_dropped()  # gone with the block


def test_an_error_leaving_the_block_is_not_replaced_by_a_held_stop() -> None:
    with pytest.raises(OSError), sigterm_interrupts():
        _dropped(signal.SIGINT)
        raise OSError("disk full")


def test_another_finalizer_error_still_goes_to_the_previous_hook() -> None:
    class Broken:
        def __del__(self) -> None:
            raise ValueError("broken finalizer")

    seen: list[BaseException | None] = []
    before = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: seen.append(unraisable.exc_value)
    try:
        with sigterm_interrupts():
            Broken()  # collected at once
            inside = sys.unraisablehook
        after = sys.unraisablehook
    finally:
        sys.unraisablehook = before
    assert [type(e) for e in seen] == [ValueError]
    assert inside is not after and after is not before  # ours inside, theirs back after
    assert after.__name__ == "<lambda>"  # type: ignore[attr-defined]


def test_nested_blocks_share_one_hook_and_one_wake() -> None:
    with stops.dropped_stops_kept():
        outer = stops.wake_fd()
        with stops.dropped_stops_kept():
            assert stops.wake_fd() == outer
        assert stops.wake_fd() == outer
    assert stops.wake_fd() is None


def _stuck() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.stdin.close()  # type: ignore[union-attr]
    proc.wait()


def test_a_dropped_stop_wakes_the_workload_wait_without_raising_in_it() -> None:
    proc = _stuck()
    try:
        with sigterm_interrupts():
            _dropped(signal.SIGTERM)
            fd = stops.wake_fd()
            assert fd is not None and _readable(fd)
            # when the wait starts after the stop was taken back
            wait_any([proc], 60)
            # then it returned at once (the wake, read: the child has not exited) and
            # left the stop to its caller
            assert proc.poll() is None and not _readable(fd)
            with pytest.raises(KeyboardInterrupt):
                stops.raise_dropped()
    finally:
        _end(proc)


def test_a_stop_dropped_while_the_wait_blocks_ends_it() -> None:
    """The child signals this process once it runs, while (or just before) the agent
    waits for it: the SIGUSR1 handler drops a SIGTERM in a finalizer, and Python
    resumes the poll(2) right after that handler, with no other code between them."""
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: _dropped(signal.SIGTERM))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, signal, sys; os.kill(os.getppid(), signal.SIGUSR1); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        with sigterm_interrupts(), pytest.raises(KeyboardInterrupt):
            wait_until(proc, time.monotonic() + 60)
        assert proc.poll() is None  # the stop ended the wait, not the child
    finally:
        signal.signal(signal.SIGUSR1, previous)
        _end(proc)


def test_a_workload_that_ended_is_kept_and_the_stop_raised_after() -> None:
    # given a workload child that has exited (seen, not reaped), then a dropped stop
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    with sigterm_interrupts(), outputs_kept() as kept:
        _dropped(signal.SIGTERM)
        # when its wait comes: its status is returned, for its output to be saved
        assert wait_until(proc, time.monotonic() + 600) == 0
        # then the stop is raised once the output is taken
        with pytest.raises(KeyboardInterrupt):
            kept.release()


def test_a_stop_dropped_before_a_workload_starts_starts_nothing(tmp_path: Path) -> None:
    started = tmp_path / "started"
    with sigterm_interrupts():
        _dropped(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            run_child(["touch", str(started)], cwd=tmp_path, env=os.environ, deadline=1e12)
    assert not started.exists()


def test_a_stop_dropped_while_waiting_at_the_barrier_is_raised_there(tmp_path: Path) -> None:
    # given a start barrier that waits for a party that never comes
    barrier = FileBarrier(tmp_path / "barrier", parties=2, timeout_s=60)
    with sigterm_interrupts():
        _dropped(signal.SIGTERM)
        # when this slot waits there, then the stop is raised at its next poll
        with pytest.raises(KeyboardInterrupt):
            barrier.wait(0)


def test_the_refill_wait_is_ended_by_a_dropped_stop() -> None:
    with sigterm_interrupts():
        _dropped(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            stops.sleep(60)


def test_outside_the_block_the_sleep_is_a_sleep() -> None:
    assert stops.wake_fd() is None
    stops.sleep(0)
    stops.raise_dropped()
