"""The instance program's task-token signals (iofleet.aws.instance.Signals).

The Step Functions client here is a recorder, a hand-written stand-in: what is
checked is when the program calls it, which no engine reports. The calls'
effect on a real execution is covered by tests/cloud (moto's Step Functions).
"""

from __future__ import annotations

import threading
from typing import Any

from iofleet.aws.instance import Signals


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.beat = threading.Event()

    def send_task_heartbeat(self, **kw: Any) -> None:
        self.calls.append(("heartbeat", kw))
        self.beat.set()

    def send_task_success(self, **kw: Any) -> None:
        self.calls.append(("success", kw))

    def send_task_failure(self, **kw: Any) -> None:
        self.calls.append(("failure", kw))


def test_first_heartbeat_is_sent_at_once_not_after_a_period() -> None:
    # given: an hour between beats (the task's heartbeat clock started at launch)
    sfn = Recorder()
    signals = Signals(sfn, "token-1")
    # when
    signals.heartbeat_every(3600)
    # then: one beat without waiting for the period
    assert sfn.beat.wait(timeout=30)
    signals.success({"exit_code": 0})
    assert sfn.calls == [
        ("heartbeat", {"taskToken": "token-1"}),
        ("success", {"taskToken": "token-1", "output": '{"exit_code": 0}'}),
    ]


def test_only_the_first_final_signal_is_sent() -> None:
    sfn = Recorder()
    signals = Signals(sfn, "token-2")
    signals.failure("AgentFailed", "x" * 40000)
    signals.success({"exit_code": 0})
    ((kind, kw),) = sfn.calls
    assert kind == "failure" and kw["error"] == "AgentFailed" and len(kw["cause"]) == 32000


def test_without_a_token_nothing_is_sent() -> None:
    sfn = Recorder()
    signals = Signals(sfn, None)
    signals.heartbeat_every(0.01)
    signals.failure("AgentFailed", "no token")
    assert sfn.calls == []
