"""The plan workflow: orders a plan's calls, one activity each; deterministic and small.

A sequential plan is one chain, a parallel plan one chain per lane, at most
`max_concurrency` lanes at a time (as the local engine pulls them). A call that
does not succeed stops its chain: the calls after it get `skipped` receipts. The
workflow decides no outcome itself: every receipt is written by a worker's
engine, so the gates, fingerprints, cache, redaction and audit are the local
ones. A call whose worker was lost is retried only when its tool's effect
allows (`CallSpec.rerunnable`); otherwise, or once those attempts are spent, it
gets a `failed` receipt (kind interrupted). A cancelled workflow lets the call
in flight end `cancelled`, skips the rest and ends the run `cancelled`. A call
that waits for a confirmation parks its chain until the run's waiting calls
are decided (`waits`); a run closed while it waited ends its workflow with the
status it was closed with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

from app.temporal.waits import ClosedWhileWaiting, Waits

with workflow.unsafe.imports_passed_through():
    from app.temporal.confirmation_messages import (
        PAUSE_RUN,
        RESUME,
        SETTLED,
        PausedCall,
        PauseInput,
        Settlement,
    )
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
    from app.temporal.pauses import temporal_plan_checkpoint

SUCCEEDED = "succeeded"
# Attempts of a call whose tool may run again when its worker is lost.
RERUN_ATTEMPTS = 3
# The bookkeeping activities (skips, a lost call's receipt, the run's end) check
# what is stored before they write, so they may run again until they succeed,
# and run as local activities.
BOOKKEEPING_TIMEOUT = timedelta(seconds=60)
BOOKKEEPING_RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200))
# Lanes that start in one workflow activation at most: scheduling a thousand
# activities at once outlasts the SDK's deadlock detector (2 s) on a loaded host,
# and a workflow it stops cannot be evicted. The next wave starts once a lane's
# call has answered, which only a later activation can bring, and fewer than a
# wave's calls are in flight (with hundreds more answering while one workflow task
# runs, Temporal fails that task and the worker replays the run). A timer is only
# the fallback for waves whose calls all run long: Temporal fires it about a
# second late however short it is.
LANES_PER_ACTIVATION = 100
WAVE_AT_LATEST = timedelta(seconds=2)


# Outside the SDK's sandbox: this module does nothing but order activities (no clock, no
# I/O, no randomness), and the sandbox's proxies made scheduling a wave of lanes'
# activities outlast the deadlock detector on a loaded host.
@workflow.defn(name=PLAN_WORKFLOW, sandboxed=False)
class PlanWorkflow:
    def __init__(self) -> None:
        self._waits = Waits()
        # Calls answered and chains ended, and calls in flight: what lets the next
        # wave of lanes start.
        self._progress = 0
        self._in_flight = 0

    @workflow.run
    async def run(self, plan: PlanInput) -> PlanResult:
        lanes = asyncio.Semaphore(plan.max_concurrency)
        waves = [asyncio.Event() for _ in range(0, len(plan.chains), LANES_PER_ACTIVATION)]
        releasing = asyncio.create_task(self._release_in_turn(waves))
        self._waits.begin(len(plan.chains))
        chains = asyncio.gather(
            *(
                self._chain(plan, chain, lanes, waves[index // LANES_PER_ACTIVATION])
                for index, chain in enumerate(plan.chains)
            )
        )
        try:
            _, statuses = await asyncio.gather(
                self._waits.pauses(plan.run.run_id, lambda calls: self._pause(plan, calls)),
                chains,
            )
        except ClosedWhileWaiting as closed:
            chains.cancel()  # only parked chains are left: none holds a call
            await workflow.wait_condition(workflow.all_handlers_finished)
            return PlanResult(closed.status, [])
        except asyncio.CancelledError:
            releasing.cancel()
            await self._skip_all(plan)
            await self._end(plan, "cancelled")
            raise
        ok = all(status == SUCCEEDED for chain in statuses for status in chain)
        status = SUCCEEDED if ok else "failed"
        await self._end(plan, status)
        return PlanResult(status, list(statuses))

    @workflow.update(name=SETTLED)
    async def settled(self) -> Settlement:
        """Once every chain finished or waits: the run's pause, or its end."""
        return await self._waits.settled()

    @workflow.update(name=RESUME)
    async def resume(self) -> Settlement:
        """The run's waiting calls may have been decided: look in the store now."""
        return await self._waits.resume()

    async def _chain(
        self, plan: PlanInput, chain: Chain, lanes: asyncio.Semaphore, wave: asyncio.Event
    ) -> list[str]:
        await wave.wait()
        await lanes.acquire()
        holds_lane = True
        try:
            statuses: list[str] = []
            for index, call in enumerate(chain.calls):
                result = await self._call(plan, chain.item_key, call)
                self._progress += 1
                while result.waiting is not None:
                    lanes.release()
                    holds_lane = False
                    await self._waits.park(result.waiting, call.args)
                    await lanes.acquire()
                    holds_lane = True
                    result = await self._call(plan, chain.item_key, call)
                statuses.append(result.status)
                if result.status == SUCCEEDED:
                    continue
                rest = chain.calls[index + 1 :]
                if rest:
                    skipped = SkipInput(plan.run, [Chain(chain.item_key, rest)], call.call_key)
                    await _bookkeeping(SKIP_CALLS, skipped)
                    statuses.extend("skipped" for _ in rest)
                break
            return statuses
        finally:
            if holds_lane:
                lanes.release()
            self._progress += 1
            self._waits.finished()

    async def _release_in_turn(self, waves: list[asyncio.Event]) -> None:
        """Let the first wave of lanes start at once, each next one once a call (or a
        chain) of those started has ended, in a later activation than the wave before,
        and fewer than a wave's calls are in flight; or `WAVE_AT_LATEST` after the wave
        before, so lanes whose calls all run long still start up to the plan's
        `max_concurrency`."""
        for index, wave in enumerate(waves):
            if index:
                with suppress(TimeoutError):
                    await workflow.wait_condition(
                        self._progressed_since(self._progress), timeout=WAVE_AT_LATEST
                    )
            wave.set()

    def _progressed_since(self, seen: int) -> Callable[[], bool]:
        return lambda: self._progress > seen and self._in_flight < LANES_PER_ACTIVATION

    async def _pause(self, plan: PlanInput, calls: list[PausedCall]) -> None:
        run = plan.run
        paused = PauseInput(
            run.run_id,
            run.caller,
            run.contract_hash,
            run.planned_calls,
            calls,
            temporal_plan_checkpoint(plan),
        )
        await _bookkeeping(PAUSE_RUN, paused)

    async def _call(self, plan: PlanInput, item_key: str | None, call: CallSpec) -> CallResult:
        run = plan.run
        if run.deadline_at is not None and self._waits.waited_s:
            # The wait for decisions does not count against the plan's deadline.
            run = replace(run, deadline_at=run.deadline_at + self._waits.waited_s)
        given = CallInput(run, item_key, call)
        self._in_flight += 1
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
        finally:
            self._in_flight -= 1
        lost: CallResult = await _bookkeeping(RECORD_LOST_CALL, given, CallResult)
        return lost

    async def _skip_all(self, plan: PlanInput) -> None:
        """Skip every call of the cancelled plan that has no receipt (the activity
        checks what is stored): one activity, whatever the plan's size."""
        await _bookkeeping(SKIP_CALLS, SkipInput(plan.run, plan.chains, None))

    async def _end(self, plan: PlanInput, status: str) -> None:
        await _bookkeeping(END_RUN, EndInput(plan.run, status))
        self._waits.end(status)
        await workflow.wait_condition(workflow.all_handlers_finished)


async def _bookkeeping(activity: str, given: object, result_type: type | None = None) -> Any:
    """A local activity: run by the worker that runs the workflow task, without a round
    trip through the task queue (the worker hosts the plan's activities too)."""
    return await workflow.execute_local_activity(
        activity,
        given,
        result_type=result_type,
        start_to_close_timeout=BOOKKEEPING_TIMEOUT,
        retry_policy=BOOKKEEPING_RETRIES,
    )
