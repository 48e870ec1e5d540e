"""kill_orphans: what a dead agent left below the runner is killed and reaped; what the
caller keeps, and what is below it, is left running. Real processes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from iofleet.agent.guard import proc_stat
from iofleet.agent.reaper import children, kill_orphans, set_subreaper


@pytest.fixture
def subreaper() -> Iterator[None]:
    set_subreaper(True)
    try:
        yield
    finally:
        set_subreaper(False)


def _orphan() -> int:
    """A `sleep` whose parent shell has exited: reparented to us (the subreaper)."""
    sh = subprocess.run(
        ["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(sh.stdout)


def test_kill_orphans_kills_and_reaps_what_no_kept_process_holds(subreaper: None) -> None:
    # given a kept child with a process below it, and an orphan reparented to us
    kept = subprocess.Popen(
        ["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!; wait"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert kept.stdout is not None
        below_kept = int(kept.stdout.readline())
        orphan = _orphan()
        assert proc_stat(orphan) is not None and proc_stat(orphan)[0] == os.getpid()  # type: ignore[index]
        assert {orphan, kept.pid} <= children()

        # when the orphans are killed, keeping the child
        killed = kill_orphans({kept.pid})

        # then the orphan is gone from the process table (killed and reaped: no zombie)
        assert killed >= 1
        assert not os.path.exists(f"/proc/{orphan}")
        # and the kept child and what runs below it are untouched
        assert kept.poll() is None
        below = proc_stat(below_kept)
        assert below is not None and below[0] == kept.pid and below[1] not in ("Z", "X")
    finally:
        kept.kill()
        kept.wait()
        kill_orphans(set())  # the kept child's sleep, now ours
        if kept.stdout is not None:
            kept.stdout.close()


def test_kill_orphans_with_nothing_left_sends_nothing(subreaper: None) -> None:
    assert kill_orphans(children()) == 0
