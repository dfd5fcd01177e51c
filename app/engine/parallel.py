"""Governed parallel batches: lanes run concurrently, calls inside a lane serially.

At most `max_concurrency` worker tasks pull lanes from one shared iterator, so
10,000 lanes cost `max_concurrency` tasks, not 10,000. Results are assembled
by lane index: input order, whatever the completion order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from app.engine.confirmation import WaitingCall
from app.engine.failures import NOT_RUN_CANCELLED
from app.engine.pipeline import CallPipeline
from app.engine.plan import ParallelPlan
from app.engine.receipt import Receipt
from app.engine.run import RunState
from app.engine.sequential import PlanStatus, chain_status, run_chain


@dataclass(frozen=True, slots=True)
class LaneOutcome:
    item_key: str
    receipts: tuple[Receipt, ...]
    # The call the lane waits on for a confirmation (its receipts stop before it).
    waiting: WaitingCall | None = None

    @property
    def status(self) -> PlanStatus:
        return "pending" if self.waiting is not None else chain_status(self.receipts)


@dataclass(frozen=True, slots=True)
class ParallelOutcome:
    run_id: str
    contract_hash: str
    parallel_batch_id: str
    lanes: tuple[LaneOutcome, ...]
    # Receipts of calls that running tools dispatched, in completion order.
    dispatched: tuple[Receipt, ...]

    @property
    def waiting(self) -> tuple[WaitingCall, ...]:
        return tuple(lane.waiting for lane in self.lanes if lane.waiting is not None)

    @property
    def status(self) -> PlanStatus:
        if any(lane.waiting is not None for lane in self.lanes):
            return "pending"
        return "succeeded" if all(lane.status == "succeeded" for lane in self.lanes) else "failed"

    def to_response(self) -> dict[str, Any]:
        response = {
            "plan_id": self.run_id,
            "kind": "parallel",
            "status": self.status,
            "contract_hash": self.contract_hash,
            "parallel_batch_id": self.parallel_batch_id,
            "lanes": [
                {
                    "item_key": lane.item_key,
                    "status": lane.status,
                    "receipts": [receipt.to_response() for receipt in lane.receipts],
                }
                for lane in self.lanes
            ],
            "dispatched": [receipt.to_response() for receipt in self.dispatched],
        }
        waiting = self.waiting
        if waiting:
            response["pending"] = [call.public() for call in waiting]
        return response


async def run_lanes(
    pipeline: CallPipeline,
    state: RunState,
    plan: ParallelPlan,
    args: Sequence[Sequence[Mapping[str, Any]]],
    done: Sequence[Sequence[Receipt]] | None = None,
) -> list[list[Receipt]]:
    """Every lane's receipts, in lane order; sequence numbers follow input order.

    `done[i]`: receipts of lane i's leading calls a resumed run already completed.
    The worker that ends last wakes this task directly, so it returns one turn of
    the loop after the plan's last receipt was submitted: a task group would wake
    it turns later, after the receipt sink took that receipt's transaction without
    what the caller adds to it (a run's end). A worker's failure cancels the
    others and is raised, as a task group raises it, once they all ended.
    """
    lanes = plan.lanes
    finished: Sequence[Sequence[Receipt]] = done if done is not None else [()] * len(lanes)
    first_seqs = [0, *accumulate(len(lane.calls) for lane in lanes)]
    results: list[list[Receipt]] = [[] for _ in lanes]
    waiting = iter(range(len(lanes)))
    workers = max(1, min(plan.max_concurrency, len(lanes)))
    running = [workers]
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def worker() -> None:
        try:
            for index in waiting:
                lane = lanes[index]
                await run_chain(
                    pipeline,
                    state,
                    lane.calls,
                    args[index],
                    first_seqs[index],
                    lane.item_key,
                    results[index],
                    finished[index],
                )
        except BaseException:
            if not ended.done():
                ended.set_result(None)
            raise
        running[0] -= 1
        if running[0] == 0 and not ended.done():
            ended.set_result(None)

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    try:
        await ended
        failed = _failures(tasks)
    except asyncio.CancelledError:
        failed = []
        cancelled = True
    else:
        cancelled = False
    if not failed and not cancelled:
        return results
    for task in tasks:
        task.cancel()
    await _all_ended(tasks)
    failed = _failures(tasks)
    # Lanes no worker took still get their receipts before the error propagates.
    tools = pipeline.contract.tools
    for index in waiting:
        lane = lanes[index]
        results[index].extend(finished[index])
        for offset in range(len(finished[index]), len(lane.calls)):
            call = lane.calls[offset]
            pipeline.skip(
                state,
                tools[call.tool],
                args[index][offset],
                first_seqs[index] + offset,
                call.call_key,
                lane.item_key,
                NOT_RUN_CANCELLED,
                results[index],
            )
    if failed:
        raise BaseExceptionGroup("unhandled errors in a TaskGroup", failed)
    raise asyncio.CancelledError


def _failures(tasks: Sequence[asyncio.Task[None]]) -> list[BaseException]:
    """What the ended workers raised (their cancellation excepted)."""
    return [
        error
        for task in tasks
        if task.done() and not task.cancelled()
        for error in (task.exception(),)
        if error is not None
    ]


async def _all_ended(tasks: Sequence[asyncio.Task[None]]) -> None:
    """Wait until every task ended, however often this task is cancelled meanwhile."""
    while not all(task.done() for task in tasks):
        with suppress(asyncio.CancelledError):
            await asyncio.wait(tasks)
