"""What a plan's workflow and its activities pass each other: plain dataclasses.

Temporal's history stores every one of them. A call's exact arguments are
among them (the activity must have them); outputs are not: an activity answers
with the receipt's id and status, and the answer is read from the stored,
redacted receipts (docs/decisions.md, "Plans on Temporal").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.temporal.confirmation_messages import WaitingSpec

PLAN_WORKFLOW = "toolloop.plan"
RUN_CALL = "toolloop.run_call"
SKIP_CALLS = "toolloop.skip_calls"
RECORD_LOST_CALL = "toolloop.record_lost_call"
END_RUN = "toolloop.end_run"


@dataclass
class RunRef:
    """The run's out-of-band identity, as the engine needs it in every activity."""

    run_id: str
    owner: str
    caller: str | None
    contract_hash: str
    kind: str  # "sequential" | "parallel" | "mcp" (an MCP client's one-call run)
    # The caller's context: the execution context's, not the arguments'.
    context: dict[str, Any]
    # The plan's own calls (seq 0 up to it); calls that running tools dispatch follow.
    planned_calls: int
    parallel_batch_id: str | None = None
    # Wall-clock seconds since the epoch when the plan's deadline passes, or None.
    deadline_at: float | None = None


@dataclass
class CallSpec:
    seq: int
    call_key: str
    tool: str
    args: dict[str, Any]
    # Whether a call whose worker was lost may run again (its tool's effect allows).
    rerunnable: bool
    # How long one activity attempt may take at most (the tool's attempts and timeouts).
    attempt_timeout_s: float


@dataclass
class Chain:
    """A sequential plan, or one lane of a parallel plan: calls run in order."""

    item_key: str | None
    calls: list[CallSpec]


@dataclass
class PlanInput:
    run: RunRef
    chains: list[Chain]
    max_concurrency: int
    heartbeat_timeout_s: float


@dataclass
class CallInput:
    run: RunRef
    item_key: str | None
    call: CallSpec


@dataclass
class SkipInput:
    run: RunRef
    # A chain's calls after one that did not succeed, or every chain of a cancelled run.
    chains: list[Chain]
    # The call that did not succeed before them, or None when the run was cancelled.
    after_call_key: str | None


@dataclass
class CallResult:
    receipt_id: str
    status: str
    # The call waits for a confirmation: no receipt (`receipt_id` is empty).
    waiting: WaitingSpec | None = None


@dataclass
class EndInput:
    run: RunRef
    status: str


@dataclass
class PlanResult:
    status: str
    # Each chain's receipts' statuses, in input order.
    statuses: list[list[str]] = field(default_factory=list)
