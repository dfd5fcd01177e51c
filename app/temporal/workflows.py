"""The plan workflow: orders a plan's calls, one activity each; deterministic and small.

A sequential plan is one chain, a parallel plan one chain per lane, at most
`max_concurrency` lanes at a time (as the local engine pulls them). A call that
does not succeed stops its chain: the calls after it get `skipped` receipts. The
workflow decides no outcome itself: every receipt is written by a worker's
engine, so the gates, fingerprints, cache, redaction and audit are the local
ones. A call whose worker was lost is retried only when its tool's effect
allows (`CallSpec.rerunnable`); otherwise, or once those attempts are spent, it
gets a `failed` receipt (kind interrupted). A cancelled workflow lets the call
in flight end `cancelled`, skips the rest and ends the run `cancelled`.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from app.temporal.messages import (
        END_RUN,
        PLAN_WORKFLOW,
        RECORD_LOST_CALL,
        RUN_CALL,
        SKIP_CALLS,
        CallInput,
        CallResult,
        CallSpec,
        Chain,
        EndInput,
        PlanInput,
        PlanResult,
        SkipInput,
    )

SUCCEEDED = "succeeded"
# Attempts of a call whose tool may run again when its worker is lost.
RERUN_ATTEMPTS = 3
# The bookkeeping activities (skips, a lost call's receipt, the run's end) check
# what is stored before they write, so they may run again until they succeed.
BOOKKEEPING_TIMEOUT = timedelta(seconds=60)
BOOKKEEPING_RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200))


@workflow.defn(name=PLAN_WORKFLOW)
class PlanWorkflow:
    @workflow.run
    async def run(self, plan: PlanInput) -> PlanResult:
        lanes = asyncio.Semaphore(plan.max_concurrency)
        try:
            statuses = await asyncio.gather(
                *(self._chain(plan, chain, lanes) for chain in plan.chains)
            )
        except asyncio.CancelledError:
            await self._skip_all(plan)
            await self._end(plan, "cancelled")
            raise
        ok = all(status == SUCCEEDED for chain in statuses for status in chain)
        status = SUCCEEDED if ok else "failed"
        await self._end(plan, status)
        return PlanResult(status, list(statuses))

    async def _chain(self, plan: PlanInput, chain: Chain, lanes: asyncio.Semaphore) -> list[str]:
        async with lanes:
            statuses: list[str] = []
            for index, call in enumerate(chain.calls):
                result = await self._call(plan, chain.item_key, call)
                statuses.append(result.status)
                if result.status == SUCCEEDED:
                    continue
                rest = chain.calls[index + 1 :]
                if rest:
                    await _bookkeeping(
                        SKIP_CALLS, SkipInput(plan.run, chain.item_key, rest, call.call_key)
                    )
                    statuses.extend("skipped" for _ in rest)
                break
            return statuses

    async def _call(self, plan: PlanInput, item_key: str | None, call: CallSpec) -> CallResult:
        given = CallInput(plan.run, item_key, call)
        try:
            result: CallResult = await workflow.execute_activity(
                RUN_CALL,
                given,
                result_type=CallResult,
                activity_id=f"{plan.run.run_id}:{call.seq}",
                start_to_close_timeout=timedelta(seconds=call.attempt_timeout_s),
                heartbeat_timeout=timedelta(seconds=plan.heartbeat_timeout_s),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=200),
                    maximum_attempts=RERUN_ATTEMPTS if call.rerunnable else 1,
                ),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            return result
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise asyncio.CancelledError() from exc
        lost: CallResult = await _bookkeeping(RECORD_LOST_CALL, given, CallResult)
        return lost

    async def _skip_all(self, plan: PlanInput) -> None:
        """Skip every call of the cancelled plan that has no receipt (the activity
        checks what is stored)."""
        for chain in plan.chains:
            await _bookkeeping(SKIP_CALLS, SkipInput(plan.run, chain.item_key, chain.calls, None))

    async def _end(self, plan: PlanInput, status: str) -> None:
        await _bookkeeping(END_RUN, EndInput(plan.run, status))


async def _bookkeeping(activity: str, given: object, result_type: type | None = None) -> Any:
    return await workflow.execute_activity(
        activity,
        given,
        result_type=result_type,
        start_to_close_timeout=BOOKKEEPING_TIMEOUT,
        retry_policy=BOOKKEEPING_RETRIES,
    )
