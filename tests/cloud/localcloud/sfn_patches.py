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

StopExecution (AWS behaviour that moto delays, then gets wrong)
---------------------------------------------------------------
In AWS, StopExecution ends the execution at once: DescribeExecution says
ABORTED with the stop date, the Map Run's child executions are aborted, and
nothing the stopped work does later (a task token that fails, a heartbeat
that times out) can change that status.

moto 5.2.5 marks the program `ProgramStopped` (`Environment.set_stop`, passed
down to every frame) but sets the execution's status only when the program
thread returns (`BaseExecutionWorkerCommunication._reflect_execution_status`),
and that thread is blocked for as long as a state waits: a Distributed Map
waits on its job pool, a `.waitForTaskToken` task on its callback with no
regard to the stop. So the execution stays RUNNING; and when the wait ends
in an error (the slot's agent calls SendTaskFailure, or its heartbeat times
out), `Environment.set_error` overwrites `ProgramStopped` unconditionally, the
error reaches the top frame and the execution ends FAILED.

The patch makes the stop final, as in AWS: `Execution.stop` sets ABORTED and
the stop date at once (for a RUNNING execution); `Environment.set_error` and
`set_timed_out` leave a stopped environment stopped; and the status reflected
when the program thread finally returns does not replace ABORTED. The
threads that were waiting still end on their own (by callback or heartbeat
timeout); `eval_component` runs no further state on a stopped environment,
so no Catch, cleanup or Lambda runs after the stop. Left as moto does it: the
`ExecutionAborted` history event is written when the program thread ends, not
at the stop.

SendTaskFailure's cause (dropped by moto's HTTP layer)
------------------------------------------------------
`moto/stepfunctions/responses.py`, `StepFunctionResponse.send_task_failure`,
passes the token and `error` to the backend but not `cause`, although the
interpreter's backend takes one: a task failed by SendTaskFailure is caught
as `{"Error": ..., "Cause": null}` instead of AWS's cause. The patch passes
`cause` through when the backend is the interpreter (execution enabled).

Heartbeat timeout's error name
------------------------------
AWS fails a task whose HeartbeatSeconds pass without a heartbeat with
`States.HeartbeatTimeout`, and one past its TimeoutSeconds with
`States.Timeout`. moto 5.2.5 raises `HeartbeatTimeoutError` (a
`TimeoutError`) for the first and `StateTask._from_error` turns every
`TimeoutError` into `States.Timeout`. The patch names the heartbeat case
`States.HeartbeatTimeout` (history event TaskTimedOut, as in AWS).
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


def _states_failure(env: Any, error_type: str, event_type: str, **details: Any) -> Any:
    """moto's FailureEvent for a `States.*` error (`error_type`: a StatesErrorNameType member
    name, `event_type`: a HistoryEventType member name, `details`: EventDetails fields)."""
    from moto.stepfunctions.parser.api import HistoryEventType
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    return FailureEvent(
        env=env,
        error_name=StatesErrorName(typ=StatesErrorNameType[error_type]),
        event_type=HistoryEventType[event_type],
        event_details=EventDetails(**details),
    )


def _fail_past_threshold(original: Any) -> Any:
    from moto.stepfunctions.parser.api import ExecutionFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEventException,
    )
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
            failure_event=_states_failure(
                env,
                "StatesExceedToleratedFailureThreshold",
                "MapRunFailed",
                executionFailedEventDetails=ExecutionFailedEventDetails(
                    error=EXCEEDED_ERROR, cause=EXCEEDED_CAUSE
                ),
            )
        )

    return _eval_job


def _stay_stopped(original: Any) -> Any:
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        with self._state_mutex:  # an RLock: the original takes it again
            if isinstance(self._program_state, ProgramStopped):
                return
            original(self, *args, **kwargs)

    return keep


def _abort_at_stop(original: Any) -> Any:
    from moto.stepfunctions.parser.api import ExecutionStatus

    def stop(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
        original(self, stop_date=stop_date, error=error, cause=cause)
        if self.exec_status == ExecutionStatus.RUNNING:
            self.exec_status = ExecutionStatus.ABORTED
            self.stop_date = stop_date

    return stop


def _keep_aborted(original: Any) -> Any:
    from moto.stepfunctions.parser.api import ExecutionStatus

    def reflect(self: Any) -> None:
        if self.execution.exec_status != ExecutionStatus.ABORTED:
            original(self)

    return reflect


def _send_task_failure_with_cause(original: Any) -> Any:
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    def send_task_failure(self: Any) -> Any:
        backend = self.stepfunction_backend
        if not isinstance(backend, StepFunctionsParserBackend):
            return original(self)
        backend.send_task_failure(
            self._get_param("taskToken"),
            error=self._get_param("error"),
            cause=self._get_param("cause"),
        )
        return EmptyResult()

    return send_task_failure


def _heartbeat_timeout_named(original: Any) -> Any:
    from moto.stepfunctions.parser.api import TaskTimedOutEventDetails
    from moto.stepfunctions.parser.asl.eval.callback.callback import HeartbeatTimeoutError

    def from_error(self: Any, env: Any, ex: Exception) -> Any:
        if not isinstance(ex, HeartbeatTimeoutError):
            return original(self, env, ex)
        return _states_failure(
            env,
            "StatesHeartbeatTimeout",
            "TaskTimedOut",
            taskTimedOutEventDetails=TaskTimedOutEventDetails(error="States.HeartbeatTimeout"),
        )

    return from_error


def install() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.distributed_item_processor_worker import (
        DistributedItemProcessorWorker as Worker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task import StateTask
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.backend.execution import (
        BaseExecutionWorkerCommunication,
        Execution,
    )
    from moto.stepfunctions.responses import StepFunctionResponse

    Worker._eval_job = _fail_past_threshold(Worker._eval_job)  # type: ignore[method-assign]
    Environment.set_error = _stay_stopped(Environment.set_error)  # type: ignore[method-assign]
    Environment.set_timed_out = _stay_stopped(Environment.set_timed_out)  # type: ignore[method-assign]
    Execution.stop = _abort_at_stop(Execution.stop)  # type: ignore[method-assign]
    BaseExecutionWorkerCommunication._reflect_execution_status = _keep_aborted(  # type: ignore[method-assign]
        BaseExecutionWorkerCommunication._reflect_execution_status
    )
    StepFunctionResponse.send_task_failure = _send_task_failure_with_cause(  # type: ignore[method-assign]
        StepFunctionResponse.send_task_failure
    )
    StateTask._from_error = _heartbeat_timeout_named(StateTask._from_error)  # type: ignore[method-assign]
