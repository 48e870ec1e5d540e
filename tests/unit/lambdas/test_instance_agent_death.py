"""The instance program (iofleet.aws.instance.main) when its agent is killed with SIGKILL.

S3 is the moto server; the agent, its app (with a background job and a setsid daemon)
and ioping run for real. Step Functions is a recorder, a hand-written stand-in: what is
checked is the failure the program reports, which no local engine shows (the effect
of SendTaskFailure on an execution is covered by tests/cloud).
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from iofleet.aws.instance import main
from tests.integration.proctable import alive, files_under, pids_with_cmdline, tree, wait_for
from tests.unit.lambdas.conftest import REGION, Cloud

pytestmark = pytest.mark.slow

RUN_ID = "death-20261121t000000z-00000000"
CELL_ID = "c000-efs-x1-r1"


def _our_temps() -> set[str]:
    """iofleet's directories in this process's TMPDIR (shared with other tests)."""
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("iofleet-")}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def send_task_heartbeat(self, **kw: Any) -> None:
        pass

    def send_task_success(self, **kw: Any) -> None:
        self.calls.append(("success", kw))

    def send_task_failure(self, **kw: Any) -> None:
        self.calls.append(("failure", kw))


def test_a_killed_agent_is_recorded_uploaded_and_fails_the_task(
    cloud: Cloud, tmp_path: Path
) -> None:
    # given an instance payload whose agent runs ioping, then an app that leaves a
    # background job and a setsid daemon writing into the (shared, EFS-like) target
    target, ready, release = tmp_path / "target", tmp_path / "ready", tmp_path / "release"
    target.mkdir()
    app = (
        f'sleep 300 & ( setsid sh -c \'while :; do date >> "$IOFLEET_WORKDIR/d.out"; '
        f"sleep 0.05; done' & ); touch {ready}; "
        f"for i in $(seq 1200); do [ -e {release} ] && exit 0; sleep 0.05; done"
    )
    slot = {
        "version": 1,
        "run_id": RUN_ID,
        "cell": {
            "cell_id": CELL_ID,
            "cell_index": 0,
            "instance_type": "m7i.large",
            "storage_label": "efs",
            "storage_type": "efs",
            "storage_detail": "fs-1",
            "fleet_size": 1,
            "repeat": 1,
        },
        "slot_index": 0,
        "target": {"kind": "directory", "path": str(target)},
        "workloads": [
            {"kind": "ioping", "count": 3, "interval_ms": 0},
            {"kind": "app", "name": "daemons", "run": app},
        ],
        "barrier": {"kind": "none"},
        "results": {"kind": "directory", "root": "/unused"},
        "time_limit_s": 300,
    }
    key = f"control/{RUN_ID}/{CELL_ID}/slot-0000.json"
    s3 = cloud.client("s3")
    s3.put_object(
        Bucket=cloud.bucket,
        Key=key,
        Body=json.dumps({"mode": "slot", "task_token": "tok", "slot": slot}),
    )
    sfn = Recorder()
    seen: dict[int, int] = {}

    def kill_the_agent() -> None:
        wait_for(ready.exists, 60, "the app's daemon")
        mine = tree(os.getpid())
        agents = [p for p in pids_with_cmdline("--run-agent") if p in mine]
        assert len(agents) == 1, (agents, pids_with_cmdline("--run-agent"), mine)
        agent = agents[0]
        seen.update(tree(agent))
        os.kill(agent, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_agent)
    temps_before = _our_temps()
    killer.start()
    # when
    try:
        code = main(
            ["--region", REGION, "--bucket", cloud.bucket, "--key", key],
            clients={"s3": s3, "stepfunctions": sfn, "dynamodb": None, "ec2": None},
        )
    finally:
        release.touch()
        killer.join(timeout=120)
    # then: the agent's whole tree is gone, the task failed with the reason
    assert seen and not alive(seen)
    assert code == 1
    ((kind, kw),) = sfn.calls
    assert kind == "failure" and kw["error"] == "AgentKilled"
    assert kw["cause"].startswith("agent killed by SIGKILL")
    # and slot.json (FAILED, the reason) and what was measured were uploaded
    prefix = f"raw/{RUN_ID}/{CELL_ID}/slot-0000/"
    record = json.loads(cloud.text(prefix + "slot.json"))
    assert (record["status"], record["error"]) == ("FAILED", "agent killed by SIGKILL")
    assert prefix + "w00-ioping.json" in cloud.keys(prefix)
    # and nothing of the slot is left in the target, nor in TMPDIR (the killed agent's app
    # had its temp directory there: iofleet-app-0-*, left for good before decision 73)
    assert files_under(target) == []
    assert _our_temps() - temps_before == set()
