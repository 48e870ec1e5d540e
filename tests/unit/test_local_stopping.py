"""How `iofleet local` takes SIGINT, SIGTERM and SIGHUP (`iofleet.local.stopping`).

Real signals sent to this process; a Python handler runs at the next bytecode, so
each `os.kill` below is handled before the following line runs. The runs these rules
make are in tests/integration/test_local_signals.py.
"""

from __future__ import annotations

import json
import os
import signal
import sys

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


class _SignalsItselfWhenCollected:
    """A finalizer in which the run's signal handler runs: it sends the signal and goes
    on running Python code, where the handler is called."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        sum(range(10_000))  # the handler runs between these bytecodes


@pytest.mark.parametrize("deferred", [False, True], ids=["startup", "in-a-cell"])
def test_a_signal_that_lands_in_a_finalizer_still_interrupts_the_run_once(
    capsys: pytest.CaptureFixture[str], deferred: bool
) -> None:
    # given a run whose signal comes while a finalizer runs (Python drops what a
    # finalizer raises, after printing a traceback)
    with StopSignals(deferred=deferred) as stops, stops.opened():
        # when
        _SignalsItselfWhenCollected(signal.SIGTERM)  # collected at once
        sum(range(10_000))
        # then the run's next point (the slots' wait checks) is interrupted by it, once
        with pytest.raises(Interrupted) as caught:
            stops.deliver()
        stops.deliver()
    # and nothing is printed
    assert caught.value.signum == signal.SIGTERM
    assert stops.received == [signal.SIGTERM]
    assert not stops.hurry
    assert capsys.readouterr().err == ""


def test_an_error_in_a_finalizer_is_still_reported() -> None:
    # given the run's hook for what finalizers raise
    class Broken:
        def __del__(self) -> None:
            raise ValueError("broken finalizer")

    seen: list[BaseException | None] = []
    before = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: seen.append(unraisable.exc_value)
    try:
        with StopSignals():
            Broken()  # when a finalizer fails for another reason
    finally:
        sys.unraisablehook = before
    # then it goes to the hook that was there before, as it would have
    assert [type(e) for e in seen] == [ValueError]


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


def test_once_the_ingest_is_cut_later_signals_leave_its_cleanup_alone() -> None:
    cleaned = []
    with StopSignals() as stops:
        with pytest.raises(Interrupted) as caught, stops.interruptible():
            try:
                os.kill(os.getpid(), signal.SIGINT)
            finally:  # the rollback, the removal of the ingest's temp files
                os.kill(os.getpid(), signal.SIGTERM)
                cleaned.append("temp files removed")
        assert cleaned == ["temp files removed"]
        assert caught.value.signum == signal.SIGINT  # the one that cut it names the exit
        assert stops.received == [signal.SIGINT, signal.SIGTERM]
        # a later interruptible block is cut again
        with pytest.raises(Interrupted) as again, stops.interruptible():
            os.kill(os.getpid(), signal.SIGHUP)
        assert again.value.signum == signal.SIGHUP


def test_an_error_that_ends_an_interrupted_statement_is_the_signal() -> None:
    # DuckDB turns an exception raised by a signal handler during a statement into its
    # own RuntimeError("Query interrupted"): after a signal, that is the interrupt
    with StopSignals() as stops:
        with pytest.raises(Interrupted) as caught, stops.interruptible():
            stops.received.append(signal.SIGTERM)  # as the handler records it
            raise RuntimeError("Query interrupted")
    assert caught.value.signum == signal.SIGTERM
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_signal_handled_as_duckdbs_interrupt_error_unwinds_does_not_cut_its_cleanup() -> None:
    # The first signal's watcher calls the connection's interrupt() at once; the Python
    # handler runs in the main thread only after DuckDB has returned, while its
    # InterruptException unwinds (in an import: inside the removal of the temp
    # directory of the rows being loaded, which was left in --out)
    import duckdb

    cleaned = []
    with StopSignals() as stops:
        with pytest.raises(Interrupted) as caught, stops.interruptible():
            try:
                raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
            except duckdb.InterruptException:
                os.kill(os.getpid(), signal.SIGTERM)  # its handler runs here
                cleaned.append("temp directory removed")
                raise
        # then: the cleanup ran whole, and the block still ends as that signal
        assert cleaned == ["temp directory removed"]
        assert caught.value.signum == signal.SIGTERM
        assert isinstance(caught.value.__cause__, duckdb.InterruptException)
        # and a signal with no such error in flight still cuts a later block at once
        with pytest.raises(Interrupted) as again, stops.interruptible():
            os.kill(os.getpid(), signal.SIGHUP)
            cleaned.append("not reached")
        assert again.value.signum == signal.SIGHUP
        assert cleaned == ["temp directory removed"]


def test_an_error_with_no_signal_stays_what_it_is() -> None:
    with StopSignals() as stops, pytest.raises(OSError), stops.interruptible():
        raise OSError("disk full")


def test_the_previous_handlers_come_back() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with StopSignals():
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before


def test_held_raises_a_signal_at_its_end_under_startup_stops() -> None:
    from iofleet.local.stopping import held, startup_stops

    done = []
    with startup_stops(), pytest.raises(Interrupted) as caught:
        with held():
            os.kill(os.getpid(), signal.SIGTERM)  # between a fork and its record
            done.append("recorded")
    # the block ran to its end, then the signal was raised
    assert done == ["recorded"]
    assert caught.value.signum == signal.SIGTERM


def test_held_leaves_a_deferred_runs_signal_for_its_next_point() -> None:
    from iofleet.local.stopping import held

    with StopSignals(deferred=True) as stops:
        with held():
            os.kill(os.getpid(), signal.SIGHUP)
        # nothing raised here: the run's next point raises it
        with pytest.raises(Interrupted) as caught, stops.opened():
            pass
    assert caught.value.signum == signal.SIGHUP


def test_held_inside_a_command_raises_at_its_end_and_cuts_the_command_once() -> None:
    from iofleet.local.stopping import command_stops, held

    done = []
    with pytest.raises(Interrupted) as caught, command_stops(lambda: None):
        with held():  # DuckDB's module loading (iofleet.cli)
            os.kill(os.getpid(), signal.SIGINT)
            done.append("loaded")
        done.append("not reached")
    assert done == ["loaded"]
    assert caught.value.signum == signal.SIGINT


def test_a_command_to_the_end_leaves_the_stop_signals_ignored() -> None:
    from iofleet.local.stopping import STOP_SIGNALS, command_stops

    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    try:
        with command_stops(lambda: None, to_the_end=True):
            pass
        assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == dict.fromkeys(
            STOP_SIGNALS, signal.SIG_IGN
        )
        os.kill(os.getpid(), signal.SIGTERM)  # the process's exit is not cut
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def test_held_holds_nothing_without_stop_signals() -> None:
    from iofleet.local.stopping import held

    with pytest.raises(KeyboardInterrupt), held():
        os.kill(os.getpid(), signal.SIGINT)  # Python's own handler, at once


def _gone(pid: int) -> bool:
    """No process `pid` in the process table (reaped, not a zombie)."""
    return not os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize("where", ["version-ahead", "version", "parse-only-ahead", "parse-only"])
def test_a_fio_check_started_as_the_signal_comes_is_stopped_with_the_rest(
    tmp_path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The signal is sent to this process right after the real fork (before the child's
    Popen is returned to whoever records it): the moment between the two, made exact."""
    import shutil
    import subprocess

    from iofleet.local.stopping import startup_stops
    from iofleet.plan import fiojobs, fioopts

    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("no fio here")
    started: list[subprocess.Popen[str]] = []
    real = fioopts._version_probe if where.startswith("version") else fiojobs._popen

    def start_then_signal(*args):  # type: ignore[no-untyped-def]
        proc = real(*args)
        started.append(proc)
        os.kill(os.getpid(), signal.SIGTERM)
        return proc

    monkeypatch.setattr(
        fioopts if where.startswith("version") else fiojobs,
        "_version_probe" if where.startswith("version") else "_popen",
        start_then_signal,
    )
    matrix = tmp_path / "m.json"
    doc = {
        "name": "m",
        "storage": [{"label": "d", "type": "local", "path": str(tmp_path)}],
        "workloads": [{"fio": "latency-4k-qd1-randread"}],
        "parallelism": [1],
    }
    matrix.write_text(json.dumps(doc))
    # given `iofleet local`'s early stop signals, and a fio check started just as
    # SIGTERM comes
    with startup_stops(), pytest.raises(Interrupted):
        try:
            if where == "version-ahead":
                fioopts.start_version_ahead(fio)
            elif where == "version":
                fioopts.start_version(fio)()
            elif where == "parse-only-ahead":
                fiojobs.start_parse_only_checks(str(matrix), None)  # reads; no fio
                fiojobs.start_parse_only_checks(str(matrix), fio)
            else:
                fiojobs.parse_only_problem("latency-4k-qd1-randread", {}, str(tmp_path), fio)
        finally:  # as iofleet.cli does however the command ends
            fiojobs.stop_parse_only_checks()
    # then the check it started is stopped and reaped: gone from the process table
    assert started, "the check was started"
    assert all(_gone(p.pid) for p in started)
