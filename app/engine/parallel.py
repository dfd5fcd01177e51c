"""Governed parallel batches: lanes run concurrently, calls inside a lane serially.

At most `max_concurrency` worker tasks pull lanes from one shared iterator, so
10,000 lanes cost `max_concurrency` tasks, not 10,000. Results are assembled
by lane index: input order, whatever the completion order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
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
    settled: Callable[[list[list[Receipt]]], None] | None = None,
) -> list[list[Receipt]]:
    """Every lane's receipts, in lane order; sequence numbers follow input order.

    `done[i]`: receipts of lane i's leading calls a resumed run already completed.
    `settled` is called with them by the worker that ends last, in the step that
    ran the plan's last call: what it queues on the receipt sink comes before the
    loop turns again, so it can join that call's transaction (the workers' group
    would wake this task only some turns later). Not called when a worker fails.
    """
    lanes = plan.lanes
    finished: Sequence[Sequence[Receipt]] = done if done is not None else [()] * len(lanes)
    first_seqs = [0, *accumulate(len(lane.calls) for lane in lanes)]
    results: list[list[Receipt]] = [[] for _ in lanes]
    waiting = iter(range(len(lanes)))
    workers = max(1, min(plan.max_concurrency, len(lanes)))
    running = [workers]

    async def worker() -> None:
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
        running[0] -= 1
        if running[0] == 0 and settled is not None:
            settled(results)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())
    except BaseException:
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
        raise
    return results
