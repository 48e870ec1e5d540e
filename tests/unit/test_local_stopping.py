"""How `iofleet local` takes SIGINT, SIGTERM and SIGHUP (`iofleet.local.stopping`).

Real signals sent to this process; a Python handler runs at the next bytecode, so
each `os.kill` below is handled before the following line runs. The runs these rules
make are in tests/integration/test_local_signals.py.
"""

from __future__ import annotations

import os
import signal

import pytest

from iofleet.local.stopping import Interrupted, StopSignals


@pytest.mark.parametrize(
    ("signum", "status"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_the_first_signal_interrupts_and_names_its_exit_status(
    signum: signal.Signals, status: int
) -> None:
    with StopSignals(), pytest.raises(Interrupted) as caught:
        os.kill(os.getpid(), signum)
    assert (caught.value.signum, caught.value.exit_status, caught.value.name) == (
        signum,
        status,
        signum.name,
    )


def test_later_signals_only_make_the_cleanup_hurry() -> None:
    with StopSignals() as stops:
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
        assert not stops.hurry
        # the cleanup: a second and a third signal do not cut it
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stops.hurry
        assert stops.received == [signal.SIGINT, signal.SIGINT, signal.SIGTERM]


def test_a_signal_while_shielded_is_raised_once_the_run_can_take_it() -> None:
    with StopSignals() as stops:
        with stops.shielded():
            os.kill(os.getpid(), signal.SIGTERM)  # e.g. while run.json is written
        with pytest.raises(Interrupted) as caught:
            stops.deliver()
        assert caught.value.signum == signal.SIGTERM
        stops.deliver()  # once only


def test_while_ingesting_every_signal_interrupts() -> None:
    with StopSignals() as stops:
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(Interrupted) as caught, stops.interruptible():
            os.kill(os.getpid(), signal.SIGHUP)
        assert caught.value.signum == signal.SIGHUP


def test_an_error_that_ends_an_interrupted_statement_is_the_signal() -> None:
    # DuckDB turns an exception raised by a signal handler during a statement into its
    # own RuntimeError("Query interrupted"): after a signal, that is the interrupt
    with StopSignals() as stops:
        with pytest.raises(Interrupted) as caught, stops.interruptible():
            stops.received.append(signal.SIGTERM)  # as the handler records it
            raise RuntimeError("Query interrupted")
    assert caught.value.signum == signal.SIGTERM
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_an_error_with_no_signal_stays_what_it_is() -> None:
    with StopSignals() as stops, pytest.raises(OSError), stops.interruptible():
        raise OSError("disk full")


def test_the_previous_handlers_come_back() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with StopSignals():
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before
