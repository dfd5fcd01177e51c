"""Wire shapes of the plans API (DESIGN.md section 4)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.engine.plan import Lane, ParallelPlan, PlannedCall, SequentialPlan


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
PlanStatus = Literal["succeeded", "failed", "cancelled", "interrupted"]


class SequentialPlanOut(BaseModel):
    plan_id: str
    kind: Literal["sequential"]
    status: PlanStatus
    contract_hash: str
    receipts: list[ReceiptOut]
    dispatched: list[ReceiptOut]


class LaneOut(BaseModel):
    item_key: str
    status: Literal["succeeded", "failed"]
    receipts: list[ReceiptOut]


class ParallelPlanOut(BaseModel):
    plan_id: str
    kind: Literal["parallel"]
    status: PlanStatus
    contract_hash: str
    parallel_batch_id: str
    lanes: list[LaneOut]
    dispatched: list[ReceiptOut]
