"""Wire shapes of the router API (`POST /router/runs` and its confirmations)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.plans import ReceiptOut
from app.foundation.money import to_nanos
from app.router.request import Budgets, CompletionRequest, RouterRequest, Step


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BudgetsIn(_Strict):
    max_calls: int | None = Field(
        default=None, gt=0, description="At most the owner's runner_defaults.max_calls."
    )
    max_turns: int | None = Field(default=None, gt=0, description="Router model round trips.")
    deadline_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="Active seconds for the whole run."
    )
    max_tokens: int | None = Field(
        default=None, gt=0, description="Input plus output tokens over every model call."
    )
    max_cost: str | None = Field(
        default=None,
        pattern=r"^[0-9]{1,12}(\.[0-9]{1,9})?$",
        description="Cost over every model call, a decimal string in the unit of the "
        'profiles\' prices (at most 9 decimals), e.g. "0.25". Both profiles must declare '
        "prices. Spent past it, the run stops with `budget:max_cost`.",
        examples=["0.25"],
    )

    @property
    def max_cost_nanos(self) -> int | None:
        return None if self.max_cost is None else to_nanos(Decimal(self.max_cost))


class StepIn(_Strict):
    call_key: str
    tool: str
    args: dict[str, Any]


class CompletionIn(_Strict):
    verify: str = Field(description="A registered verifier, or a built-in: builtin:<name>.")
    max_attempts: int = Field(gt=0, description="Required: bounds the completion retries.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Parameters of a built-in verifier."
    )


class RouterRunIn(_Strict):
    owner: str
    goal: str = Field(min_length=1)
    context: dict[str, Any] = Field(default_factory=dict)
    router_profile: str = Field(description="A profile of the profiles file; never implied.")
    final_profile: str = Field(description="A profile of the profiles file; never implied.")
    final_schema: dict[str, Any] | None = None
    budgets: BudgetsIn = Field(default_factory=BudgetsIn)
    steps: list[StepIn] = Field(default_factory=list)
    allowed_tools: list[str] | None = Field(
        default=None, description="Narrows the owner's allowlist; omitted: all of it."
    )
    guardrails: list[str] = Field(default_factory=list, description="Run in order.")
    completion: CompletionIn | None = None

    def to_request(self) -> RouterRequest:
        budgets = self.budgets
        completion = self.completion
        return RouterRequest(
            owner=self.owner,
            goal=self.goal,
            router_profile=self.router_profile,
            final_profile=self.final_profile,
            context=self.context,
            final_schema=self.final_schema,
            budgets=Budgets(
                max_calls=budgets.max_calls,
                max_turns=budgets.max_turns,
                deadline_s=budgets.deadline_s,
                max_tokens=budgets.max_tokens,
                max_cost_nanos=budgets.max_cost_nanos,
            ),
            steps=tuple(Step(s.call_key, s.tool, s.args) for s in self.steps),
            allowed_tools=None if self.allowed_tools is None else tuple(self.allowed_tools),
            guardrails=tuple(self.guardrails),
            completion=None
            if completion is None
            else CompletionRequest(completion.verify, completion.max_attempts, completion.params),
        )


class PendingOut(BaseModel):
    confirmation_id: str
    call_id: str
    call_key: str
    tool: str
    args_digest: str
    fingerprint: str
    contract_hash: str


class ReplayDifferenceOut(BaseModel):
    kind: Literal[
        "call_refused",
        "call_admitted",
        "decision_changed",
        "tool_changed",
        "call_missing",
        "call_added",
        "receipt_changed",
        "check_changed",
        "stop_changed",
        "turns_changed",
        "reply_missing",
        "replies_unused",
        "reply_role_changed",
    ]
    call_key: str | None
    recorded: Any
    replayed: Any
    message: str


class ReplayRepliesOut(BaseModel):
    recorded: int
    asked: int


class ReplayOut(BaseModel):
    source: str = Field(description="`cassette <file name>` or `run <run id>`.")
    recorded_run_id: str
    same_request: bool = Field(description="The request is the recorded one (profiles aside).")
    same_contract: bool = Field(description="The registries hash as when it was recorded.")
    replies: ReplayRepliesOut
    matches: bool = Field(description="No difference: every decision was taken again.")
    differences: list[ReplayDifferenceOut]
    paused_at: list[str] = Field(
        default_factory=list,
        description="The call keys the replay paused at for confirmation, as the recording "
        "did: the replay ends there and is compared with the recording up to that pause.",
    )


class RouterRunOut(BaseModel):
    run_id: str
    status: Literal["done", "incomplete", "pending", "error", "cancelled", "interrupted"]
    stopped_by: str = Field(
        description="Empty only when status is done; a stopped run's is its status."
    )
    text: str
    final: Any
    attempts: int
    turns: int
    state: dict[str, Any]
    receipts: list[ReceiptOut]
    pending: list[PendingOut]
    replay: ReplayOut | None = Field(
        default=None, description="Only when both profiles are a replay profile: what differs."
    )


class ConfirmationIn(_Strict):
    approve: bool
    reason: str = Field(default="", max_length=2000)
