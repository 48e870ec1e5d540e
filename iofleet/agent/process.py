"""Run one child process under a guardian, with a deadline.

Output goes to temporary files outside the storage under test (so logging
does not add I/O to the measurement, and a chatty build cannot fill memory).
The child runs below `guard.py` (its own session): at the deadline, or when
the agent is interrupted, the guardian gets SIGTERM and stops every process
the child started (SIGTERM, then SIGKILL after a grace); when the agent dies
by any signal, SIGKILL included, the kernel closes the agent's end of the
guardian's life pipe and the guardian SIGKILLs them all. No workload process
outlives its agent. And none outlives its own guardian: while the agent runs its
workloads (`orphans_killed`) it is a child subreaper, so when something else kills a
guardian (SIGKILL, or a SIGHUP it does not catch), what it leaves (fio's job processes:
their main process dies with the guardian) is reparented to the agent, and run_child
kills it before it returns: it never runs on beside the next workload.

Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from iofleet.agent import stops
from iofleet.testhook import pause

TAIL_CHARS = 4000
KILL_GRACE_S = 5.0  # the guardian's SIGTERM -> SIGKILL grace (guard.KILL_GRACE_S)
GUARD = Path(__file__).with_name("guard.py")
GUARD_EXEC_FAILED = "iofleet-guard: cannot run "  # guard.EXEC_FAILED


class _Held:
    """The workload child whose output is being kept (`run_child(hold_output=True)`):
    its pid from its start until `output_taken`."""

    pid: int | None = None


class _Adopting:
    """Inside `orphans_killed`: the child processes this process had before it, which
    the sweep after each workload leaves alone (None outside)."""

    keep: set[int] | None = None


@contextlib.contextmanager
def orphans_killed() -> Iterator[None]:
    """While inside, this process is a child subreaper and `run_child` kills, once its
    guardian has exited, every process below this one that was not here before: what a
    guardian killed from outside left (it kills its workload's whole tree itself
    whenever it lives to do so). The subreaper flag is restored on leaving."""
    from iofleet.agent.reaper import children, is_subreaper, set_subreaper

    was = is_subreaper()
    _Adopting.keep = children()
    set_subreaper(True)
    try:
        yield
    finally:
        _Adopting.keep = None
        if not was:
            set_subreaper(False)


def _kill_left_behind() -> None:
    """Kill what the workload's guardian left, if anything (inside `orphans_killed`)."""
    keep = _Adopting.keep
    if keep is not None:
        from iofleet.agent.reaper import kill_orphans

        kill_orphans(keep)


def child_ended() -> bool:
    """Whether the workload child of `run_child(hold_output=True)` has ended and its
    output has not been saved yet (`output_taken`): a stop signal now must wait until
    it is (iofleet.agent.slot.outputs_kept). Asks the kernel (waitid WNOWAIT, which
    reaps nothing), so it holds from the instant the child exits."""
    pid = _Held.pid
    if pid is None:
        return False
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped already: it has ended
        return True
    return info is not None


def output_taken() -> None:
    """The held child's output is saved (or given up): stop signals interrupt again."""
    _Held.pid = None


@dataclass(frozen=True)
class ChildResult:
    returncode: int  # negative: killed by that signal
    stdout: str  # full stdout when keep_stdout, else its tail
    stderr_tail: str
    timed_out: bool
    seconds: float  # monotonic wall time
    error: str | None = None  # could not start (missing binary, bad cwd)


def tail(text: str, chars: int = TAIL_CHARS) -> str:
    return text[-chars:]


def _read(handle: IO[bytes], keep_all: bool) -> str:
    handle.seek(0)
    if keep_all:
        data: bytes = handle.read()
    else:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - TAIL_CHARS * 4))
        data = handle.read()
    text = data.decode("utf-8", errors="replace")
    return text if keep_all else tail(text)


def wait_any(procs: Sequence[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """Return once any of `procs` has exited (not reaped), or after `timeout_s`, or
    when a stop a finalizer dropped wakes the wait (iofleet.agent.stops: the caller
    raises it).

    Blocks in poll(2) on each child's pidfd, so it wakes the moment a child exits;
    `Popen.wait(timeout)` polls instead, sleeping up to 50 ms between checks, which
    is up to 50 ms added to every workload and every slot. Without pidfds (Linux
    before 5.3) it falls back to that polling on the first process, for at most
    0.5 s at a time while a dropped stop may come.
    """
    wake = stops.wake_fd()
    fds: list[int] = []
    try:
        try:
            for proc in procs:
                fds.append(os.pidfd_open(proc.pid))
        except (AttributeError, OSError):
            if procs:
                try:
                    limit = timeout_s if wake is None else min(timeout_s, 0.5)
                    procs[0].wait(timeout=max(limit, 0.0))
                except subprocess.TimeoutExpired:
                    pass
            return
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        if wake is not None:
            poller.register(wake, select.POLLIN)
        ready = poller.poll(max(0, round(timeout_s * 1000)))
        if wake is not None and any(fd == wake for fd, _ in ready):
            stops.woken()
    finally:
        for fd in fds:
            os.close(fd)


def wait_until(proc: subprocess.Popen[bytes], deadline: float) -> int:
    """`proc.wait()` until time.monotonic() reaches `deadline` (TimeoutExpired then),
    waking as soon as it exits (`wait_any`). A stop a finalizer dropped is raised
    while it runs (iofleet.agent.stops); once it has exited, it is left for the next
    point, so that its output is kept as for a stop that comes after its end."""
    while proc.poll() is None:
        stops.raise_dropped()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise subprocess.TimeoutExpired(proc.args, 0)
        wait_any([proc], min(remaining, 3600.0))
    return proc.returncode


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the guardian: it stops the child's whole tree, then exits."""
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=KILL_GRACE_S * 2)
    except subprocess.TimeoutExpired:  # a stuck guardian: its group goes the hard way
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_child(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    deadline: float,
    keep_stdout: bool = True,
    hold_output: bool = False,
    stdin: IO[bytes] | None = None,
) -> ChildResult:
    """Run argv until it exits or time.monotonic() reaches deadline.

    `stdin`: the child's standard input (fio's rendered job: fiojobs.job_stdin), else
    /dev/null.

    `hold_output`: a workload whose output must be saved once it has run: from the
    child's exit, `child_ended()` is true until the caller calls `output_taken()`.
    A stop a finalizer dropped before the start is raised here, and nothing starts."""
    stops.raise_dropped()
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        life_r, life_w = os.pipe()  # the agent keeps life_w (close-on-exec) until the end
        try:
            try:
                proc = subprocess.Popen(  # noqa: S603 - our guardian, argv list
                    # -I -S: the guardian is stdlib only; no site (.pth files, site-packages)
                    # to process before each workload starts
                    [sys.executable, "-I", "-S", str(GUARD), str(life_r), "--", *argv],
                    cwd=cwd,
                    env=dict(env),
                    stdin=subprocess.DEVNULL if stdin is None else stdin,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    pass_fds=(life_r,),
                )
            except OSError as exc:
                return ChildResult(
                    127,
                    "",
                    "",
                    False,
                    time.monotonic() - started,
                    error=f"cannot run {argv[0]}: {exc.strerror or exc}",
                )
            finally:
                os.close(life_r)
            if hold_output:
                _Held.pid = proc.pid
            timed_out = False
            try:
                wait_until(proc, deadline)
                if hold_output:
                    pause("workload-ended")
            except subprocess.TimeoutExpired:
                timed_out = True
                _stop(proc)
            except BaseException:
                _Held.pid = None  # interrupted while it ran: there is no output to keep
                _stop(proc)
                raise
        finally:
            os.close(life_w)
            _kill_left_behind()  # before the next workload starts: nothing overlaps it
        seconds = time.monotonic() - started
        stderr_tail = _read(err, False)
        error = None
        if proc.returncode == 127 and stderr_tail.startswith(GUARD_EXEC_FAILED):
            error = "cannot run " + stderr_tail[len(GUARD_EXEC_FAILED) :].strip()
        return ChildResult(
            proc.returncode,
            _read(out, keep_stdout),
            stderr_tail,
            timed_out,
            seconds,
            error=error,
        )
