"""`wait_any` / `wait_until`: woken by a child's exit, bounded by the deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from iofleet.agent.process import wait_any, wait_until


def _child(script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)


def test_wait_any_returns_when_one_child_exits_and_leaves_it_unreaped() -> None:
    """The second child only exits when we close its stdin: wait_any returned because
    the first exited (a pidfd readable), not because its timeout ran out."""
    quick = _child("pass")
    stuck = _child("import sys; sys.stdin.read()")
    try:
        wait_any([stuck, quick], timeout_s=600)
        assert stuck.poll() is None
        assert quick.poll() == 0  # reaped only now, by poll()
    finally:
        stuck.stdin.close()  # type: ignore[union-attr]
        stuck.wait()
        quick.stdin.close()  # type: ignore[union-attr]


def test_wait_until_reaps_the_exit_status() -> None:
    proc = _child("import sys; sys.exit(7)")
    assert wait_until(proc, time.monotonic() + 600) == 7
    proc.stdin.close()  # type: ignore[union-attr]


def test_wait_until_raises_at_the_deadline_and_the_child_lives_on() -> None:
    proc = _child("import sys; sys.stdin.read()")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_until(proc, time.monotonic())
        assert proc.poll() is None
        os.kill(proc.pid, 0)  # still in the process table
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait()


def test_without_pidfd_it_falls_back_to_popen_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    proc = _child("pass")
    assert wait_until(proc, time.monotonic() + 600) == 0
    proc.stdin.close()  # type: ignore[union-attr]
