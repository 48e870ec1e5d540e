"""A stop while `iofleet agent` sets up its target, or during its cleanup, is recorded once
and leaves nothing set up; SIGHUP stops it as SIGTERM does.

The agent made its target (a working directory on a directory target; mkfs and mount on
a block target) and wrote the manifest before its stop handling began: a SIGTERM or
SIGINT there ended the agent with no slot.json (the runner, or on EC2 the instance
program, then recorded the slot as a dead agent, without its workloads), and a stop in
or just after the mount left the filesystem mounted. And a second stop while the slot
cleaned up after the first was ignored for SIGTERM but not for SIGINT: a second line,
"iofleet: interrupted", after the slot's FAILED line. SIGHUP (a terminal closed on an
agent run by hand) was not caught: it killed the agent wherever it was.

Each test runs the real agent and stops it at one exact point (iofleet.testhook pause
points: the process stops itself, the test sees it stopped in /proc, signals it and
lets it go on), then reads the outcome where it lands: the mount table, the device (an
O_EXCL open), the target directory, TMPDIR, the process table, slot.json and stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.proctable import alive, files_under, reaped, stopped, tree, wait_for
from tests.integration.test_agent_finalizer_stop import WORKLOADS, _workload_running
from tests.integration.test_agent_slot import CELL_ID, RUN_ID, _payload
from tests.integration.test_device_guard import _REASON, EBS_LINK, Loops, block_payload

AGENT = [sys.executable, "-m", "iofleet.cli", "agent", "--slot"]
IOPING = {"kind": "ioping", "count": 3, "interval_ms": 0, "write": False}
INTERRUPTED = "slot interrupted by a signal"
FAILED_LINE = f"iofleet agent: slot 0 of {CELL_ID} FAILED: {INTERRUPTED}"


def _start(slot: Path, tmp: Path, pause_at: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*AGENT, str(slot)],
        env=dict(os.environ, TMPDIR=str(tmp), IOFLEET_TEST_PAUSE_AT=pause_at),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _record(tmp_path: Path) -> dict:
    slot_dir = tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000"
    return json.loads((slot_dir / "slot.json").read_text())


def _assert_recorded_stop(tmp_path: Path, record: dict, workloads: int) -> None:
    assert (record["status"], record["exit_code"], record["error"]) == ("FAILED", 130, INTERRUPTED)
    assert [w["status"] for w in record["workloads"]] == ["SKIPPED"] * workloads
    assert record["cleanup_problem"] is None


def _write_slot(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "slot-0000.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.device
@pytest.mark.skipif(bool(_REASON), reason=_REASON or "")
@pytest.mark.parametrize("filesystem", ["ext4", "xfs"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_just_after_the_mount_unmounts_and_records_the_slot(
    tmp_path: Path, filesystem: str, stop: signal.Signals
) -> None:
    if not shutil.which(f"mkfs.{filesystem}"):
        pytest.skip(f"mkfs.{filesystem} is not installed (make test installs it)")
    kit = Loops(tmp_path)
    mount_point = tmp_path / "mnt"
    try:
        device = kit.device(size_mib=320)  # mkfs.xfs wants at least 300 MiB
        by_id = tmp_path / "by-id"
        by_id.mkdir()
        (by_id / EBS_LINK).symlink_to(device)
        doc = block_payload(
            tmp_path,
            by_id,
            [IOPING, WORKLOADS["fio"]],
            run_id=RUN_ID,
            cell_id=CELL_ID,
            filesystem=filesystem,
            mount_point=str(mount_point),
            created_by_run=True,
        )
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        # given an agent that has just mounted the filesystem it made on the device
        agent = _start(_write_slot(tmp_path, doc), tmp, "target-mounted")
        with reaped(agent):
            wait_for(lambda: stopped(agent.pid), 120, "the pause after the mount")
            assert os.path.ismount(mount_point)  # the point is the one the test means
            procs = tree(agent.pid)
            # when it is stopped there
            os.kill(agent.pid, stop)
            os.kill(agent.pid, signal.SIGCONT)
            _, stderr = agent.communicate(timeout=120)

        # then the filesystem is unmounted (before: left mounted) and the device is free
        assert os.path.ismount(mount_point) is False
        os.close(os.open(device, os.O_RDONLY | os.O_EXCL))
        # and the slot is recorded (before: no slot.json), with one line on stderr
        assert agent.returncode == 130, stderr
        _assert_recorded_stop(tmp_path, _record(tmp_path), workloads=2)
        assert stderr.splitlines() == [FAILED_LINE]
        assert os.listdir(tmp) == []  # the raw scratch directory went before the mount
        assert alive(procs) == []
    finally:
        if os.path.ismount(mount_point):  # what the agent left: not left on this machine
            subprocess.run(["umount", str(mount_point)], check=False)
        kit.release()


@pytest.mark.parametrize(
    "stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"]
)
def test_a_stop_while_the_workdir_is_made_removes_it_and_records_the_slot(
    tmp_path: Path, stop: signal.Signals
) -> None:
    # given an agent that has made its slot's working directory on a directory target
    slot = _write_slot(tmp_path, _payload(tmp_path, [IOPING]))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    agent = _start(slot, tmp, "workdir-made")
    with reaped(agent):
        wait_for(lambda: stopped(agent.pid), 60, "the pause after the working directory")
        assert list((tmp_path / "target").rglob("slot-0000")) != []  # the point the test means
        # when it is stopped there
        os.kill(agent.pid, stop)
        os.kill(agent.pid, signal.SIGCONT)
        _, stderr = agent.communicate(timeout=60)

    # then the target holds nothing of the run (before: iofleet-<run>/<cell>/slot-0000;
    # SIGHUP killed the agent there, and anywhere else in the slot)
    assert os.listdir(tmp_path / "target") == []
    # and the slot is recorded (before: no slot.json), with one line on stderr
    assert agent.returncode == 130, stderr
    _assert_recorded_stop(tmp_path, _record(tmp_path), workloads=1)
    assert stderr.splitlines() == [FAILED_LINE]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (signal.SIGINT, signal.SIGINT),
        (signal.SIGTERM, signal.SIGINT),
        (signal.SIGINT, signal.SIGTERM),
        (signal.SIGTERM, signal.SIGTERM),
        (signal.SIGHUP, signal.SIGHUP),
    ],
    ids=["SIGINT-SIGINT", "SIGTERM-SIGINT", "SIGINT-SIGTERM", "SIGTERM-SIGTERM", "SIGHUP-SIGHUP"],
)
def test_a_second_stop_while_the_slot_cleans_up_adds_nothing(
    tmp_path: Path, first: signal.Signals, second: signal.Signals
) -> None:
    # given an agent running a long fio workload
    slot = _write_slot(tmp_path, _payload(tmp_path, [WORKLOADS["fio"], IOPING], time_limit_s=600))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    agent = _start(slot, tmp, "slot-cleanup")
    with reaped(agent):
        procs = wait_for(lambda: _workload_running(agent.pid, "fio"), 60, "the fio workload")
        assert isinstance(procs, dict)
        # when a first stop ends the slot, and a second comes while it cleans up
        os.kill(agent.pid, first)
        wait_for(lambda: stopped(agent.pid), 60, "the pause before the cleanup")
        os.kill(agent.pid, second)
        os.kill(agent.pid, signal.SIGCONT)
        _, stderr = agent.communicate(timeout=60)

    # then the slot ends as for one stop: its FAILED line only (before, for a second
    # SIGINT, "iofleet: interrupted" after it), its record, its workload gone
    assert agent.returncode == 130, stderr
    assert stderr.splitlines() == [FAILED_LINE]
    record = _record(tmp_path)
    assert (record["status"], record["error"]) == ("FAILED", INTERRUPTED)
    assert [w["status"] for w in record["workloads"]] == ["FAILED", "SKIPPED"]
    assert alive({p: s for p, s in procs.items() if p != agent.pid}) == []
    assert files_under(tmp_path / "target") == []
