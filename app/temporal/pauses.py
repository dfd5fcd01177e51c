"""A plan run paused on the temporal executor: what its pause keeps, and its answer.

Its checkpoint keeps only the plan's shape (its chains' call keys and tools):
the exact arguments stay in the workflow's history, so only the workflow
continues the run (`client.TemporalExecutor.continued`), never a local executor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.engine import Lane, ParallelPlan, PlannedCall, SequentialPlan
from app.store.models import Run
from app.temporal.confirmation_messages import WaitingSpec
from app.temporal.messages import PlanInput

TEMPORAL_PLAN_CHECKPOINT = "temporal_plan"
PENDING = "pending"


def temporal_plan_checkpoint(plan: PlanInput) -> dict[str, Any]:
    return {
        "type": TEMPORAL_PLAN_CHECKPOINT,
        "kind": plan.run.kind,
        "max_concurrency": plan.max_concurrency,
        "chains": [
            {
                "item_key": chain.item_key,
                "calls": [[call.call_key, call.tool] for call in chain.calls],
            }
            for chain in plan.chains
        ],
    }


def is_temporal_plan_checkpoint(document: Mapping[str, Any] | None) -> bool:
    return document is not None and document.get("type") == TEMPORAL_PLAN_CHECKPOINT


def plan_shape(run: Run, checkpoint: Mapping[str, Any]) -> SequentialPlan | ParallelPlan:
    """The paused plan as its answer needs it: its calls' keys and tools, in chains."""
    chains = [
        (chain["item_key"], tuple(PlannedCall(key, tool) for key, tool in chain["calls"]))
        for chain in checkpoint["chains"]
    ]
    if checkpoint["kind"] != "parallel":  # a sequential plan, or an MCP call
        ((_, calls),) = chains
        return SequentialPlan(run.owner, calls, {}, None)
    lanes = tuple(Lane(item_key or "", calls) for item_key, calls in chains)
    return ParallelPlan(run.owner, checkpoint["max_concurrency"], lanes, {}, None)


def with_pending(response: dict[str, Any], waiting: Sequence[WaitingSpec]) -> None:
    """A paused plan's answer lists its waiting calls; a lane with one is `pending`."""
    response["pending"] = [call.public() for call in waiting]
    waiting_lanes = {call.item_key for call in waiting}
    for lane in response.get("lanes", []):
        if lane["item_key"] in waiting_lanes:
            lane["status"] = PENDING
