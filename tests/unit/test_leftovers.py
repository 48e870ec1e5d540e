"""Whose mark on a target is a dead runner's: read from this machine's real /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from iofleet.local import leftovers


def test_this_process_is_alive() -> None:
    assert leftovers.runner_alive(leftovers.owner())


def test_a_reused_pid_is_not_the_runner() -> None:
    # given our own pid, but with another start time (the pid reused by someone else)
    doc = leftovers.owner()
    doc["start_time"] += 1
    assert not leftovers.runner_alive(doc)


def test_another_boot_means_the_runner_is_gone() -> None:
    doc = dict(leftovers.owner(), boot_id="00000000-0000-0000-0000-000000000000")
    assert not leftovers.runner_alive(doc)


def test_a_runner_on_another_host_is_left_alone() -> None:
    doc = dict(leftovers.owner(), host="not-" + leftovers.host_name(), pid=-1)
    assert leftovers.runner_alive(doc)


def test_an_exited_process_is_gone(tmp_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = dict(leftovers.owner(), pid=int(child.stdout), start_time=0)
    assert not leftovers.runner_alive(doc)


def test_only_a_dead_runs_directory_and_mark_go(tmp_path: Path) -> None:
    # given a target with a dead run's directory and mark, a live run's, and files of
    # nobody's mark (an unmarked iofleet-* directory, a user's file, an unreadable mark)
    target = tmp_path
    for run in ("dead-1", "live-1", "nomark-1"):
        (target / f"iofleet-{run}" / "c000" / "populate").mkdir(parents=True)
        (target / f"iofleet-{run}" / "c000" / "populate" / "data").write_text("x")
    dead = dict(leftovers.owner(), run_id="dead-1", boot_id="other-boot")
    live = dict(leftovers.owner(), run_id="live-1")
    (target / ".iofleet-run-dead-1.json").write_text(json.dumps(dead))
    (target / ".iofleet-run-live-1.json").write_text(json.dumps(live))
    (target / ".iofleet-run-torn-1.json").write_text("")
    (target / "mine.txt").write_text("keep")
    # when
    lines = leftovers.remove_dead(target)
    # then: one line, and exactly the dead run's directory and mark are gone
    assert len(lines) == 1 and "dead-1" in lines[0] and f"pid {os.getpid()}" in lines[0]
    assert sorted(p.name for p in target.iterdir()) == [
        ".iofleet-run-live-1.json",
        ".iofleet-run-torn-1.json",
        "iofleet-live-1",
        "iofleet-nomark-1",
        "mine.txt",
    ]


def test_a_mark_that_is_a_fifo_or_a_link_is_nobodys(tmp_path: Path) -> None:
    import stat
    import threading

    # given a shared target where someone left, under our marks' names, a fifo that no
    # one writes to, and a link to an endless device, beside a dead run's real mark
    target = tmp_path
    (target / "iofleet-dead-2").mkdir()
    dead = dict(leftovers.owner(), run_id="dead-2", boot_id="other-boot")
    (target / ".iofleet-run-dead-2.json").write_text(json.dumps(dead))
    os.mkfifo(target / ".iofleet-run-fifo-1.json")
    (target / ".iofleet-run-zero-1.json").symlink_to("/dev/zero")
    (target / "iofleet-zero-1").mkdir()
    # when the leftovers are removed (in a thread: a read of the fifo would wait for a
    # writer for ever, and one of /dev/zero would fill memory; the join bounds the test,
    # it does not time it)
    found: list[list[str]] = []
    worker = threading.Thread(target=lambda: found.append(leftovers.remove_dead(target)))
    worker.daemon = True
    worker.start()
    worker.join(120)
    # then it returned, with the dead run's line; the fifo and the link are left as they
    # were, and the directory beside the link (no readable mark: not known dead) stays
    assert found and len(found[0]) == 1 and "dead-2" in found[0][0], found
    assert stat.S_ISFIFO(os.lstat(target / ".iofleet-run-fifo-1.json").st_mode)
    assert os.readlink(target / ".iofleet-run-zero-1.json") == "/dev/zero"
    assert sorted(p.name for p in target.iterdir()) == [
        ".iofleet-run-fifo-1.json",
        ".iofleet-run-zero-1.json",
        "iofleet-zero-1",
    ]
