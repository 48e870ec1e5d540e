"""Between the start barrier's release instant and a workload's start the agent imports
nothing: what a workload's run imports (fio's job library and option tables, the ioping
parser) is loaded before the barrier (`slot.load_workload_modules`). Shown in a fresh
interpreter running a real slot, whose barrier records the modules loaded as it
releases and whose `run_child` records them as the workload would start (it runs
nothing: the modules are the evidence, not fio)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iofleet.agent.slot import __file__ as SLOT_FILE

ROOT = Path(SLOT_FILE).resolve().parents[2]

SCRIPT = """
import json, sys
from iofleet.agent import slot

seen = []
real_from_config = slot.barrier_from_config

def from_config(config):
    barrier = real_from_config(config)
    real_wait = barrier.wait

    def wait(*args, **kwargs):
        passage = real_wait(*args, **kwargs)
        seen.append(set(sys.modules))
        return passage

    barrier.wait = wait
    return barrier

def run_child(argv, **kwargs):
    seen.append(set(sys.modules))
    return slot.ChildResult(1, "", "", False, 0.0)

slot.barrier_from_config = from_config
slot.run_child = run_child
slot.run_slot(json.loads(sys.argv[1]))
print(json.dumps(sorted(seen[1] - seen[0])))
"""

FIO = {"kind": "fio", "name": "latency-4k-qd1-randread", "params": {"RUNTIME": "1"}}
IOPING = {"kind": "ioping", "count": 5, "interval_ms": 0, "write": False}


@pytest.mark.parametrize("workload", [FIO, IOPING], ids=["fio", "ioping"])
def test_nothing_is_imported_between_the_release_and_the_first_workload(
    tmp_path: Path, workload: dict
) -> None:
    # given a slot whose first workload is of this kind
    target = tmp_path / "target"
    target.mkdir()
    payload = {
        "version": 1,
        "run_id": "itest-20261127t000000z",
        "cell": {"cell_id": "c000-local-tmp-x1-r1", "cell_index": 0, "fleet_size": 1},
        "slot_index": 0,
        "target": {"kind": "directory", "path": str(target)},
        "workloads": [workload],
        "barrier": {"kind": "none"},
        "results": {"kind": "directory", "root": str(tmp_path / "raw")},
        "time_limit_s": 120,
    }
    # when a fresh agent runs it
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(payload)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # then no module was loaded after the barrier released it and before the workload
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
