"""The digest that identifies a plan: stored with its run, checked when the run is resumed.

It covers the plan as admitted (the parsed request with its defaults filled in),
so a resend of the same plan matches whatever its key order, whitespace or
omitted defaults. The plan itself is never stored (DESIGN invariant 8).
"""

from __future__ import annotations

from typing import Any

from app.engine import ParallelPlan, PlannedCall, SequentialPlan
from app.foundation.canonical import canonical_json, sha256_digest


def plan_digest(plan: SequentialPlan | ParallelPlan) -> str:
    document: dict[str, Any] = {
        "owner": plan.owner,
        "context": dict(plan.context),
        "deadline_s": plan.deadline_s,
    }
    if isinstance(plan, SequentialPlan):
        document["kind"] = "sequential"
        document["calls"] = [_call(call) for call in plan.calls]
    else:
        document["kind"] = "parallel"
        document["max_concurrency"] = plan.max_concurrency
        document["lanes"] = [
            {"item_key": lane.item_key, "calls": [_call(call) for call in lane.calls]}
            for lane in plan.lanes
        ]
    return sha256_digest(canonical_json(document))


def _call(call: PlannedCall) -> dict[str, Any]:
    return {
        "call_key": call.call_key,
        "tool": call.tool,
        "args": None if call.args is None else dict(call.args),
        "payload": None if call.payload is None else dict(call.payload),
    }
