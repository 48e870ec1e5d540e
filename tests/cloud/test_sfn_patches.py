"""The moto fixes of tests/cloud/localcloud/sfn_patches.py: a Distributed Map fails past its failure
threshold; StopExecution aborts at once and for good."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.cloud.localcloud.fixtures import poll
from tests.cloud.localcloud.sfn_patches import EXCEEDED_CAUSE, EXCEEDED_ERROR, threshold_exceeded

ROLE = "arn:aws:iam::123456789012:role/sfn"


def _map_machine(start: str, item_states: dict[str, Any], **map_extra: Any) -> dict[str, Any]:
    """A Distributed Map over `$.items` running `item_states`; a catch keeps the error at `$.error`."""
    return {
        "StartAt": "Fleet",
        "States": {
            "Fleet": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                    "StartAt": start,
                    "States": item_states,
                },
                "ResultPath": None,
                "Catch": [
                    {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}
                ],
                "End": True,
                **map_extra,
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }


def _definition(**map_extra: Any) -> dict[str, Any]:
    """Items equal to 2 fail, the rest pass."""
    return _map_machine(
        "Which",
        {
            "Which": {
                "Type": "Choice",
                "Choices": [{"Variable": "$", "NumericEquals": 2, "Next": "Boom"}],
                "Default": "Fine",
            },
            "Boom": {"Type": "Fail", "Error": "AgentFailed", "Cause": "agent exited with status 1"},
            "Fine": {"Type": "Pass", "End": True},
        },
        **map_extra,
    )


def _run(
    aws_client: Callable[[str], Any], unique: str, items: list[int], **map_extra: Any
) -> dict[str, Any]:
    sfn = aws_client("stepfunctions")
    arn = sfn.create_state_machine(
        name=f"dmap-{unique}", definition=json.dumps(_definition(**map_extra)), roleArn=ROLE
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"items": items}))[
        "executionArn"
    ]
    desc = poll(
        lambda: (d := sfn.describe_execution(executionArn=execution))["status"] != "RUNNING" and d,
        timeout_s=60,
        what="execution",
    )
    assert desc["status"] == "SUCCEEDED", desc
    return dict(json.loads(desc["output"]))


def test_one_failed_item_fails_the_map_with_the_threshold_error(
    aws_client: Callable[[str], Any], unique: str
) -> None:
    # when: item 2 of three fails and no failure is tolerated (the default)
    out = _run(aws_client, unique, [1, 2, 3])
    # then: the Map state failed and its catch got AWS's error
    assert out["error"] == {"Error": EXCEEDED_ERROR, "Cause": EXCEEDED_CAUSE}


def test_items_that_all_succeed_leave_the_map_succeeded(
    aws_client: Callable[[str], Any], unique: str
) -> None:
    out = _run(aws_client, unique, [1, 3, 4])
    assert "error" not in out


def test_a_tolerated_failure_count_lets_the_map_succeed(
    aws_client: Callable[[str], Any], unique: str
) -> None:
    out = _run(aws_client, unique, [1, 2, 3], ToleratedFailureCount=1)
    assert "error" not in out


@pytest.mark.parametrize(
    ("failed", "total", "count", "percentage", "exceeded"),
    [
        (0, 3, 0, 0.0, False),
        (1, 3, 0, 0.0, True),
        (1, 3, 1, 0.0, False),
        (2, 3, 1, 0.0, True),
        (1, 4, 0, 25.0, False),
        (2, 4, 0, 25.0, True),
        (2, 4, 5, 25.0, True),
    ],
)
def test_threshold_rule(
    failed: int, total: int, count: int, percentage: float, exceeded: bool
) -> None:
    assert threshold_exceeded(failed, total, count, percentage) is exceeded


def _token_task(queue_url: str) -> dict[str, Any]:
    """A task that sends its token to a queue and waits for it."""
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl": queue_url, "MessageBody": {"token.$": "$$.Task.Token"}},
        "End": True,
    }


def test_stop_execution_aborts_a_map_waiting_on_task_tokens_for_good(
    aws_client: Callable[[str], Any], unique: str
) -> None:
    # given: an execution whose two map items wait on their task tokens
    sqs, sfn = aws_client("sqs"), aws_client("stepfunctions")
    queue = sqs.create_queue(QueueName=f"tokens-{unique}")["QueueUrl"]
    machine = sfn.create_state_machine(
        name=f"stop-{unique}",
        definition=json.dumps(_map_machine("Slot", {"Slot": _token_task(queue)})),
        roleArn=ROLE,
    )["stateMachineArn"]
    arn = sfn.start_execution(stateMachineArn=machine, input=json.dumps({"items": [1, 2]}))[
        "executionArn"
    ]
    tokens: list[str] = []

    def both_tokens() -> bool:
        got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        tokens.extend(json.loads(m["Body"])["token"] for m in got)
        return len(tokens) == 2

    poll(both_tokens, timeout_s=60, what="both items waiting on their tokens")
    # when: the execution is stopped
    sfn.stop_execution(executionArn=arn, cause="stopped by the test")
    # then: it is ABORTED at once, with its stop date
    desc = sfn.describe_execution(executionArn=arn)
    assert desc["status"] == "ABORTED" and "stopDate" in desc
    # when: the stopped items' tokens then fail (an agent's SendTaskFailure after the stop)
    for token in tokens:
        sfn.send_task_failure(taskToken=token, error="AgentFailed", cause="late")
    # then: once the program has wound down it is still ABORTED and the catch never ran
    history = poll(
        lambda: (
            (events := sfn.get_execution_history(executionArn=arn)["events"])[-1]["type"]
            == "ExecutionAborted"
            and events
        ),
        timeout_s=60,
        what="the ExecutionAborted event",
    )
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    entered = [
        e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e
    ]
    assert "Caught" not in entered


def _caught_task(
    aws_client: Callable[[str], Any], unique: str, **task_extra: Any
) -> tuple[str, dict[str, Any]]:
    """Start a one-task execution waiting on its token (the token goes to a queue); a catch keeps
    the error at `$.error`. Returns the execution arn and the message carrying the token."""
    sqs, sfn = aws_client("sqs"), aws_client("stepfunctions")
    queue = sqs.create_queue(QueueName=f"task-{unique}")["QueueUrl"]
    slot = _token_task(queue)
    definition = {
        "StartAt": "Slot",
        "States": {
            "Slot": {
                **{k: v for k, v in slot.items() if k != "End"},
                **task_extra,
                "Catch": [
                    {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}
                ],
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }
    machine = sfn.create_state_machine(
        name=f"task-{unique}", definition=json.dumps(definition), roleArn=ROLE
    )["stateMachineArn"]
    arn = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
    (message,) = poll(
        lambda: sqs.receive_message(QueueUrl=queue).get("Messages"),
        timeout_s=60,
        what="the task token",
    )
    return arn, message


def _caught_error(aws_client: Callable[[str], Any], arn: str) -> Any:
    sfn = aws_client("stepfunctions")
    desc = poll(
        lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d,
        timeout_s=60,
        what="execution",
    )
    return json.loads(desc["output"])["error"]


def test_send_task_failure_keeps_its_cause(aws_client: Callable[[str], Any], unique: str) -> None:
    # given: a task waiting on its token
    arn, message = _caught_task(aws_client, unique)
    # when: the worker fails the task with an error and a cause
    aws_client("stepfunctions").send_task_failure(
        taskToken=json.loads(message["Body"])["token"],
        error="AgentFailed",
        cause="agent exited with status 1",
    )
    # then: the catch sees both, as in AWS
    assert _caught_error(aws_client, arn) == {
        "Error": "AgentFailed",
        "Cause": "agent exited with status 1",
    }


def test_a_silent_task_fails_with_states_heartbeat_timeout(
    aws_client: Callable[[str], Any], unique: str
) -> None:
    # given/when: a task whose worker never beats within its 1 s heartbeat
    arn, _ = _caught_task(aws_client, unique, HeartbeatSeconds=1, TimeoutSeconds=60)
    # then: AWS's heartbeat error, not the task timeout's
    assert _caught_error(aws_client, arn)["Error"] == "States.HeartbeatTimeout"


def test_a_task_past_its_timeout_still_fails_with_states_timeout(
    aws_client: Callable[[str], Any], unique: str
) -> None:
    arn, _ = _caught_task(aws_client, unique, TimeoutSeconds=1)
    assert _caught_error(aws_client, arn)["Error"] == "States.Timeout"
