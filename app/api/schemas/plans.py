"""Wire shapes of the plans API (DESIGN.md section 4)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.engine import Lane, ParallelPlan, PlannedCall, SequentialPlan


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CallIn(_Strict):
    call_key: str = Field(description="Opaque key, unique within a sequential plan or a lane.")
    tool: str
    args: dict[str, Any] | None = Field(
        default=None, description="Exact arguments, validated against the input schema."
    )
    payload: dict[str, Any] | None = Field(
        default=None,
        description="A larger payload projected onto a closed input schema before validation.",
    )

    def to_plan(self) -> PlannedCall:
        return PlannedCall(
            call_key=self.call_key, tool=self.tool, args=self.args, payload=self.payload
        )


class SequentialPlanIn(_Strict):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "owner": "worker-a",
                    "calls": [{"call_key": "c1", "tool": "transform", "args": {"text": "x"}}],
                    "context": {"trace_id": "t-1"},
                }
            ]
        }
    )

    owner: str
    calls: list[CallIn]
    context: dict[str, Any] = Field(default_factory=dict)
    deadline_s: float | None = None

    def to_plan(self) -> SequentialPlan:
        return SequentialPlan(
            owner=self.owner,
            calls=tuple(call.to_plan() for call in self.calls),
            context=self.context,
            deadline_s=self.deadline_s,
        )


class LaneIn(_Strict):
    item_key: str = Field(description="Opaque key, unique within the plan.")
    calls: list[CallIn]


class ParallelPlanIn(_Strict):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "owner": "worker-a",
                    "max_concurrency": 8,
                    "lanes": [
                        {
                            "item_key": "a",
                            "calls": [
                                {"call_key": "1", "tool": "transform", "args": {"text": "x"}}
                            ],
                        }
                    ],
                }
            ]
        }
    )

    owner: str
    max_concurrency: int
    lanes: list[LaneIn]
    context: dict[str, Any] = Field(default_factory=dict)
    deadline_s: float | None = None

    def to_plan(self) -> ParallelPlan:
        return ParallelPlan(
            owner=self.owner,
            max_concurrency=self.max_concurrency,
            lanes=tuple(
                Lane(item_key=lane.item_key, calls=tuple(c.to_plan() for c in lane.calls))
                for lane in self.lanes
            ),
            context=self.context,
            deadline_s=self.deadline_s,
        )


class CallErrorOut(BaseModel):
    kind: str
    message: str
    outcome_unknown: bool = False


class ReceiptOut(BaseModel):
    receipt_id: str
    plan_id: str
    call_key: str
    item_key: str | None
    parallel_batch_id: str | None
    tool: str
    status: Literal["succeeded", "failed", "timed_out", "skipped", "denied"]
    output: Any
    error: CallErrorOut | None
    attempts: int
    cache_hit: bool
    cache_source_receipt_id: str | None
    fingerprint: str
    idempotency_key: str
    parent_receipt_id: str | None
    control: dict[str, Any] | None
    admission_wait_ms: float
    started_at: str
    finished_at: str
    duration_ms: float


# `cancelled` and `interrupted`: the run was stopped part-way; its receipts are the stored copies.
PlanStatus = Literal["succeeded", "failed", "pending", "cancelled", "interrupted"]


class PendingCallOut(BaseModel):
    """A call the plan waits on for a person's decision (`POST /runs/{id}/confirmations/...`)."""

    confirmation_id: str
    call_key: str
    item_key: str | None
    tool: str
    args_digest: str


class SequentialPlanOut(BaseModel):
    plan_id: str
    kind: Literal["sequential"]
    status: PlanStatus
    contract_hash: str
    receipts: list[ReceiptOut]
    dispatched: list[ReceiptOut]
    # Only while the plan waits (`status: pending`).
    pending: list[PendingCallOut] | None = None


class LaneOut(BaseModel):
    item_key: str
    status: Literal["succeeded", "failed", "pending"]
    receipts: list[ReceiptOut]


class ParallelPlanOut(BaseModel):
    plan_id: str
    kind: Literal["parallel"]
    status: PlanStatus
    contract_hash: str
    parallel_batch_id: str
    lanes: list[LaneOut]
    dispatched: list[ReceiptOut]
    # Only while the plan waits (`status: pending`).
    pending: list[PendingCallOut] | None = None


# The common case without pydantic: a body that is exactly well-formed becomes its
# plan in one pass. Anything else (a missing or unknown key, a wrong type) returns
# None and goes through the models, whose answer (every problem, with its pointer)
# is the one clients see. What is accepted here is a subset of what the models
# accept, and yields the same plan.
_CALL_KEYS = frozenset({"call_key", "tool", "args", "payload"})
_SEQUENTIAL_KEYS = frozenset({"owner", "calls", "context", "deadline_s"})
_PARALLEL_KEYS = frozenset({"owner", "max_concurrency", "lanes", "context", "deadline_s"})
_LANE_KEYS = frozenset({"item_key", "calls"})


def _calls(data: Any) -> tuple[PlannedCall, ...] | None:
    if type(data) is not list:
        return None
    calls = []
    for call in data:
        if type(call) is not dict or not call.keys() <= _CALL_KEYS:
            return None
        call_key, tool = call.get("call_key"), call.get("tool")
        args, payload = call.get("args"), call.get("payload")
        if (
            type(call_key) is not str
            or type(tool) is not str
            or (args is not None and type(args) is not dict)
            or (payload is not None and type(payload) is not dict)
        ):
            return None
        calls.append(PlannedCall(call_key, tool, args, payload))
    return tuple(calls)


def _common(data: Any, keys: frozenset[str]) -> tuple[str, dict[str, Any], float | None] | None:
    """(owner, context, deadline_s) of a well-formed plan body, else None."""
    if type(data) is not dict or not data.keys() <= keys:
        return None
    owner, context, deadline_s = data.get("owner"), data.get("context", {}), data.get("deadline_s")
    if (
        type(owner) is not str
        or type(context) is not dict
        or (deadline_s is not None and type(deadline_s) is not float)
    ):
        return None
    return owner, context, deadline_s


def sequential_plan(data: Any) -> SequentialPlan | None:
    """The plan of a well-formed `SequentialPlanIn` body; None: validate with the model."""
    common = _common(data, _SEQUENTIAL_KEYS)
    calls = None if common is None else _calls(data.get("calls"))
    if common is None or calls is None:
        return None
    owner, context, deadline_s = common
    return SequentialPlan(owner=owner, calls=calls, context=context, deadline_s=deadline_s)


def parallel_plan(data: Any) -> ParallelPlan | None:
    """The plan of a well-formed `ParallelPlanIn` body; None: validate with the model."""
    common = _common(data, _PARALLEL_KEYS)
    if common is None:
        return None
    max_concurrency, raw_lanes = data.get("max_concurrency"), data.get("lanes")
    if type(max_concurrency) is not int or type(raw_lanes) is not list:
        return None
    lanes = []
    for lane in raw_lanes:
        if type(lane) is not dict or not lane.keys() <= _LANE_KEYS:
            return None
        item_key, calls = lane.get("item_key"), _calls(lane.get("calls"))
        if type(item_key) is not str or calls is None:
            return None
        lanes.append(Lane(item_key=item_key, calls=calls))
    owner, context, deadline_s = common
    return ParallelPlan(
        owner=owner,
        max_concurrency=max_concurrency,
        lanes=tuple(lanes),
        context=context,
        deadline_s=deadline_s,
    )
