"""A fix to moto 5.2.5's Step Functions interpreter, installed in the moto server process by `hooks.install()`.

Distributed Map failure threshold (AWS behaviour that moto drops)
-----------------------------------------------------------------
In AWS a Distributed Map run fails as soon as its failed (or timed-out)
child executions exceed the tolerated failure threshold: ToleratedFailureCount
and ToleratedFailurePercentage both default to 0, so with neither set, one
failed item fails the Map state with `States.ExceedToleratedFailureThreshold`
("The specified tolerated failure threshold was exceeded"); the state's Catch
then applies, and the Map Run is FAILED.

moto 5.2.5 (a port of LocalStack's interpreter) parses both settings and keeps
them on the `MapRunRecord`, but never checks them:
`moto/stepfunctions/parser/asl/component/state/exec/state_map/iteration/itemprocessor/distributed_item_processor_worker.py`,
`DistributedItemProcessorWorker._eval_job`, counts an item whose child
program ended in `ProgramError` (a task that got SendTaskFailure, a
`States.HeartbeatTimeout`, a `States.Timeout`, a Fail state ...) in
`item_counter.failed`, sets the job's output to `None` and returns normally,
so the job pool sees a success and the Map state always succeeds.

The patch wraps that method: after the original has run, an item whose child
program did not end successfully (neither `ProgramEnded` nor `ProgramStopped`,
the latter being the parent's StopExecution) is a failure; when the map run's
failed + timed-out items exceed the threshold, the job's output becomes the
`FailureEventException` that moto's own job pool treats as the end of the
iteration (the same route an Inline Map's failed iteration takes), so
`DistributedIterationComponent._eval_body` records MapRunFailed and the Map
state's Retry/Catch see `States.ExceedToleratedFailureThreshold`. Items still
running are not waited for (AWS stops the map run at the threshold too).
"""

from __future__ import annotations

from typing import Any

EXCEEDED_ERROR = "States.ExceedToleratedFailureThreshold"
EXCEEDED_CAUSE = "The specified tolerated failure threshold was exceeded"


def threshold_exceeded(
    failed: int, total: int, tolerated_count: int, tolerated_percentage: float
) -> bool:
    """AWS's rule: past either threshold that is set; with neither set (both 0), any failure."""
    if failed <= 0:
        return False
    count_set, percentage_set = tolerated_count > 0, tolerated_percentage > 0
    if not count_set and not percentage_set:
        return True
    if count_set and failed > tolerated_count:
        return True
    return percentage_set and total > 0 and 100.0 * failed / total > tolerated_percentage


def _fail_past_threshold(original: Any) -> Any:
    from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramEnded, ProgramStopped

    def _eval_job(self: Any, env: Any, job: Any) -> None:
        original(self, env, job)
        if isinstance(env.program_state(), ProgramEnded | ProgramStopped):
            return
        record = self._map_run_record
        failed = record.item_counter.failed.get() + record.item_counter.timed_out.get()
        total = self._job_pool._jobs_number
        if not threshold_exceeded(
            failed, total, record.tolerated_failure_count, record.tolerated_failure_percentage
        ):
            return
        job.job_output = FailureEventException(
            failure_event=FailureEvent(
                env=env,
                error_name=StatesErrorName(
                    typ=StatesErrorNameType.StatesExceedToleratedFailureThreshold
                ),
                event_type=HistoryEventType.MapRunFailed,
                event_details=EventDetails(
                    executionFailedEventDetails=ExecutionFailedEventDetails(
                        error=EXCEEDED_ERROR, cause=EXCEEDED_CAUSE
                    )
                ),
            )
        )

    return _eval_job


def install() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.distributed_item_processor_worker import (
        DistributedItemProcessorWorker as Worker,
    )

    Worker._eval_job = _fail_past_threshold(Worker._eval_job)  # type: ignore[method-assign]
