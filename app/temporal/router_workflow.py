"""The router run's workflow: one activity per stretch of the router's loop.

The loop's decisions (guardrails, dedup, budgets, the completion gate,
`max_attempts`, the named outcome) are the router's own code, run inside each
activity by `RouterRun` (app/router/loop.py); the workflow only chains the
stretches: the request's steps, then one turn at a time (one router model
request and what it leads to), each from the redacted checkpoint the previous
one left, until a stretch ends the run. A stretch whose worker was lost runs
again on another worker when the run's tools allow (`RouterRunInput.rerunnable`);
otherwise, or once those attempts are spent, the run ends `interrupted`. A
cancelled workflow cancels the stretch in flight (its calls end `cancelled`)
and ends the run `cancelled`. A stretch that paused the run for confirmations
is followed, once the store says they were decided, by one that settles them
(`router_pauses`); a stretch lost after it recorded the pause leaves the run
waiting there, not ended.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from app.temporal.router_pauses import RouterPauses

with workflow.unsafe.imports_passed_through():
    from app.temporal.confirmation_messages import RESUME, SETTLED, Settlement
    from app.temporal.router_messages import (
        PAUSED,
        ROUTER_BEGIN,
        ROUTER_LOST,
        ROUTER_RESUME,
        ROUTER_TURN,
        ROUTER_WORKFLOW,
        RUNNING,
        RouterLostInput,
        RouterResumeInput,
        RouterRunInput,
        RouterStep,
        RouterTurnInput,
    )

# Attempts of a stretch whose worker was lost, when the run's tools allow another.
RERUN_ATTEMPTS = 3
LOST_TIMEOUT = timedelta(seconds=60)
LOST_RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200))
WORKER_LOST = "the worker running the run was lost"


@workflow.defn(name=ROUTER_WORKFLOW)
class RouterWorkflow:
    def __init__(self) -> None:
        self._pauses = RouterPauses()

    @workflow.run
    async def run(self, given: RouterRunInput) -> str:
        checkpoint: dict[str, Any] | None = None
        activity, name = ROUTER_BEGIN, "begin"
        arg: object = given
        turn = resumes = 0
        try:
            while True:
                try:
                    step = await _stretch(activity, given, arg, name)
                except ActivityError as exc:
                    if isinstance(exc.cause, CancelledError):
                        raise
                    step = await _lost(given, "interrupted", _why_lost(exc), checkpoint)
                    if step.status != PAUSED:
                        assert step.status is not None
                        return await self._end(step.status)
                if step.checkpoint is None:
                    break
                checkpoint = step.checkpoint
                if step.status == PAUSED:
                    status = await self._pauses.decided(given.run_id)
                    if status != RUNNING:  # closed while it waited: the store says how
                        return await self._end(status)
                    resumes += 1
                    activity, arg = ROUTER_RESUME, RouterResumeInput(given, checkpoint)
                    name = f"resume{resumes}"
                    continue
                turn += 1
                activity, arg = ROUTER_TURN, RouterTurnInput(given, checkpoint)
                name = f"turn{turn}"
        except asyncio.CancelledError:
            await _lost(given, "cancelled", "the run was cancelled", checkpoint)
            await self._end("cancelled")
            raise
        except ActivityError as exc:
            if not isinstance(exc.cause, CancelledError):
                raise
            await _lost(given, "cancelled", "the run was cancelled", checkpoint)
            await self._end("cancelled")
            raise asyncio.CancelledError() from exc
        assert step.status is not None
        return await self._end(step.status)

    @workflow.update(name=SETTLED)
    async def settled(self) -> Settlement:
        """The run's pause for confirmations, or its end."""
        return await self._pauses.settled()

    @workflow.update(name=RESUME)
    async def resume(self) -> Settlement:
        """A decision left nothing pending (it is in the store): look now."""
        return await self._pauses.resume()

    async def _end(self, status: str) -> str:
        self._pauses.end(status)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return status


async def _stretch(activity: str, run: RouterRunInput, given: object, name: str) -> RouterStep:
    step: RouterStep = await workflow.execute_activity(
        activity,
        given,
        result_type=RouterStep,
        activity_id=f"{run.run_id}:{name}",
        start_to_close_timeout=timedelta(seconds=run.turn_timeout_s),
        heartbeat_timeout=timedelta(seconds=run.heartbeat_timeout_s),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(milliseconds=200),
            maximum_attempts=RERUN_ATTEMPTS if run.rerunnable else 1,
        ),
        # A cancelled stretch's calls get their `cancelled` receipts before the run ends.
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )
    return step


def _why_lost(exc: ActivityError) -> str:
    """A failure the activity named for good (a worker that cannot run the run) says
    why; anything else is a lost worker."""
    cause = exc.cause
    if isinstance(cause, ApplicationError) and cause.non_retryable:
        return cause.message
    return WORKER_LOST


async def _lost(
    run: RouterRunInput, status: str, reason: str, checkpoint: dict[str, Any] | None
) -> RouterStep:
    """The run's end (`status`, or the one it had already); or, when the lost stretch had
    paused it, the pause to wait in."""
    step: RouterStep = await workflow.execute_activity(
        ROUTER_LOST,
        RouterLostInput(run, status, reason, checkpoint),
        result_type=RouterStep,
        start_to_close_timeout=LOST_TIMEOUT,
        retry_policy=LOST_RETRIES,
    )
    return step
