"""A stop while the agent sets up a raw block target leaves nothing in TMPDIR.

Found by `scripts/signal_sweep.py --device` (decision 69): an agent on a raw device
makes a scratch directory (`iofleet-raw-*`, its workloads' cwd) in TMPDIR before it
waits for and claims the device, and a SIGTERM or SIGINT in between left it there;
Python's first look for a temp dir (a probe file written and removed in TMPDIR) could
leave its probe file the same way. Each test runs the real `iofleet agent` on a loop
device and stops it at one exact point: the `raw-target` pause point
(iofleet.testhook), or, inside the standard library where no hook can go, a driver
that sends the agent's own SIGTERM just after the probe file is created. Then it reads
the outcome where it lands: the exit status, TMPDIR, the device (an O_EXCL open) and
the process table.

Needs root and loop devices, like the device guard tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.proctable import alive, reaped, stopped, tree, wait_for
from tests.integration.test_device_guard import _REASON, EBS_LINK, Loops, block_payload

pytestmark = [pytest.mark.device] + ([pytest.mark.skip(reason=_REASON)] if _REASON else [])

RUN_ID = "raw-20261127t000000z"
CELL_ID = "c000-loop-x1-r1"
STOPPED = f"iofleet agent: slot 0 of {CELL_ID} FAILED: slot interrupted by a signal"
FIO = {"kind": "fio", "name": "seq-write-1m-qd32", "params": {"RUNTIME": "1", "SIZE": "4m"}}

# The real agent, with os.open wrapped: just after Python's temp-dir probe file is created
# in TMPDIR (a name of 8 characters, no prefix), the agent sends itself SIGTERM once.
DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    from iofleet.cli import main

    TMP, real_open = os.environ["TMPDIR"], os.open

    def open_(path, flags, mode=0o777, *, dir_fd=None):
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        name = os.path.basename(str(path))
        if flags & os.O_EXCL and os.path.dirname(str(path)) == TMP and len(name) == 8:
            os.open = real_open
            os.kill(os.getpid(), signal.SIGTERM)
        return fd

    os.open = open_
    sys.exit(main(sys.argv[1:]))
    """
)

# The real agent, with os.mkdir wrapped: just after tempfile.mkdtemp has made the raw
# device's scratch directory, inside mkdtemp, the agent sends itself SIGTERM once.
MKDTEMP_DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    from iofleet.cli import main

    real_mkdir = os.mkdir

    def mkdir_(path, mode=0o777, *, dir_fd=None):
        real_mkdir(path, mode, dir_fd=dir_fd)
        if os.path.basename(str(path)).startswith("iofleet-raw-"):
            os.mkdir = real_mkdir
            os.kill(os.getpid(), signal.SIGTERM)

    os.mkdir = mkdir_
    sys.exit(main(sys.argv[1:]))
    """
)


def _slot_file(tmp_path: Path, device: Path) -> Path:
    by_id = tmp_path / "by-id"
    by_id.mkdir()
    (by_id / EBS_LINK).symlink_to(device)
    path = tmp_path / "slot.json"
    path.write_text(json.dumps(block_payload(tmp_path, by_id, [FIO], run_id=RUN_ID)))
    return path


def _stopped_agent(tmp_path: Path, head: list[str], env: dict[str, str]) -> tuple[int, str, Path]:
    """Run the agent on a fresh loop device until it ends: (exit status, stderr, device)."""
    kit = Loops(tmp_path)
    try:
        device = kit.device(size_mib=64)
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        agent = subprocess.Popen(
            [*head, "agent", "--slot", str(_slot_file(tmp_path, device))],
            env=dict(os.environ, TMPDIR=str(tmp), **env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        with reaped(agent):
            if env:  # stopped at the pause point: SIGTERM, then let it go on
                wait_for(lambda: stopped(agent.pid), 60, "the pause")
                procs = tree(agent.pid)
                os.kill(agent.pid, signal.SIGTERM)
                os.kill(agent.pid, signal.SIGCONT)
            else:
                procs = {}
            _, stderr = agent.communicate(timeout=120)
        assert alive(procs) == []
        # the device is free: nobody holds it open exclusively
        os.close(os.open(device, os.O_RDONLY | os.O_EXCL))
        # the slot is recorded as any stopped slot is (before decision 70: no slot.json)
        record = json.loads(
            (tmp_path / "raw" / RUN_ID / CELL_ID / "slot-0000" / "slot.json").read_text()
        )
        assert (record["status"], record["exit_code"], record["error"]) == (
            "FAILED",
            130,
            "slot interrupted by a signal",
        )
        assert [w["status"] for w in record["workloads"]] == ["SKIPPED"]
        return agent.returncode, stderr, tmp
    finally:
        kit.release()


def test_a_stop_before_the_device_is_claimed_removes_the_scratch_directory(
    tmp_path: Path,
) -> None:
    # given an agent stopped by SIGTERM once it made the raw device's scratch directory
    code, stderr, tmp = _stopped_agent(
        tmp_path, [sys.executable, "-m", "iofleet.cli"], {"IOFLEET_TEST_PAUSE_AT": "raw-target"}
    )

    # then it ends as a stopped agent does, and nothing of it is left in TMPDIR
    assert code == 130, stderr
    assert stderr.splitlines() == [STOPPED]
    assert os.listdir(tmp) == []  # before the fix: ['iofleet-raw-XXXXXXXX']


def test_a_stop_in_pythons_temp_dir_probe_leaves_no_probe_file(tmp_path: Path) -> None:
    # given an agent whose SIGTERM comes just after Python created its temp-dir probe file
    code, stderr, tmp = _stopped_agent(tmp_path, [sys.executable, "-c", DRIVER], {})

    # then it ends as a stopped agent does, and the probe file is gone too
    assert code == 130, stderr
    assert stderr.splitlines() == [STOPPED]
    assert os.listdir(tmp) == []  # before the fix: one empty file of 8 random characters


def test_a_stop_inside_mkdtemp_leaves_no_scratch_directory(tmp_path: Path) -> None:
    # given an agent whose SIGTERM comes inside mkdtemp, just after it made the directory
    code, stderr, tmp = _stopped_agent(tmp_path, [sys.executable, "-c", MKDTEMP_DRIVER], {})

    # then it ends as a stopped agent does, and the scratch directory is gone too
    assert code == 130, stderr
    assert stderr.splitlines() == [STOPPED]
    assert os.listdir(tmp) == []  # before the fix: ['iofleet-raw-XXXXXXXX']
