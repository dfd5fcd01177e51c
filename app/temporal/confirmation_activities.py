"""The confirmation side of a plan's activities: a call's decision, read from the
store as a local continuation reads it, and the run's pause, recorded by the
local executor's code (`plans.pause`) with a checkpoint of its own (`pauses`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from app.engine import CallRejected, ConfirmationDecision, WaitingCall
from app.engine.confirmation import ConfirmationRequired
from app.service.errors import StorageUnavailable
from app.service.plans.continuation import decision_of
from app.service.plans.pause import record_plan_pause
from app.service.runs.records import stored_receipts
from app.service.runtime import Runtime
from app.store.repositories.router_runs import PENDING, RouterRunRepository
from app.store.repositories.runs import RunRepository
from app.temporal.confirmation_messages import PAUSE_RUN, PauseInput, WaitingSpec
from app.temporal.standing import RUN_STANDING


def waiting_of(exc: CallRejected) -> WaitingSpec | None:
    """The call a refusal stopped at the confirmation gate (None: refused otherwise)."""
    cause = exc.__cause__
    if not isinstance(cause, ConfirmationRequired):
        return None
    call = cause.waiting
    return WaitingSpec(
        call.confirmation_id, call.seq, call.call_key, call.item_key, call.tool, call.args_digest
    )


class ConfirmationActivities:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def all(self) -> list[Callable[..., Any]]:
        return [self.pause_run, self.run_standing]

    async def decision(
        self, run_id: str, item_key: str | None, call_key: str
    ) -> ConfirmationDecision | None:
        """The latest decision on the run's call (None: it was never decided)."""
        try:
            async with self._runtime.sessions() as session:
                rows = await RouterRunRepository(session).confirmations(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run's confirmations could not be read: {exc}") from exc
        decided = [
            row
            for row in rows
            if row.item_key == item_key and row.call_key == call_key and row.status != PENDING
        ]
        return decision_of(decided[-1]) if decided else None

    @activity.defn(name=PAUSE_RUN)
    async def pause_run(self, given: PauseInput) -> None:
        """Move the run to `pending` with one confirmation per waiting call, audited."""
        runtime = self._runtime
        rows = await stored_receipts(runtime.sessions, given.run_id)
        waiting = [
            WaitingCall(
                call.waiting.confirmation_id,
                call.waiting.seq,
                call.waiting.call_key,
                call.waiting.item_key,
                call.waiting.tool,
                call.args,
                call.waiting.args_digest,
            )
            for call in given.calls
        ]
        await record_plan_pause(
            runtime.sessions,
            runtime.writer,
            runtime.engine.contract,
            run_id=given.run_id,
            caller=given.caller,
            call_count=sum(1 for row in rows if row.seq < given.planned_calls),
            checkpoint=given.checkpoint,
            waiting=waiting,
        )

    @activity.defn(name=RUN_STANDING)
    async def run_standing(self, run_id: str) -> str:
        """The run's status in the store (a paused run's workflow asks it)."""
        try:
            async with self._runtime.sessions() as session:
                run = await RunRepository(session).get(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be read: {exc}") from exc
        if run is None:
            raise ApplicationError(f"run {run_id} is not recorded", non_retryable=True)
        return run.status
