"""What a plan's workflow, its activities and `serve` pass each other about
confirmations: plain dataclasses, stored in Temporal's history.

A call stopped at the confirmation gate comes back from its activity as a
`WaitingSpec` (the call's exact arguments stay in its `CallSpec`); once every
chain finished or waits, the workflow records the pause (`PauseInput`) and
answers `serve`'s `SETTLED` update with a `Settlement`; a decision's
`RESUME` update lets the waiting chains go on and answers at the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PAUSE_RUN = "toolloop.pause_run"
# Updates of a plan's workflow: wait until the run paused or ended; go on after decisions.
SETTLED = "settled"
RESUME = "resume"


@dataclass
class WaitingSpec:
    """A call stopped at the gate (`engine.WaitingCall` without its arguments)."""

    confirmation_id: str
    seq: int
    call_key: str
    item_key: str | None
    tool: str
    args_digest: str

    def public(self) -> dict[str, Any]:
        """As a plan response lists it."""
        return {
            "confirmation_id": self.confirmation_id,
            "call_key": self.call_key,
            "item_key": self.item_key,
            "tool": self.tool,
            "args_digest": self.args_digest,
        }


@dataclass
class PausedCall:
    waiting: WaitingSpec
    args: dict[str, Any]


@dataclass
class PauseInput:
    run_id: str
    caller: str | None
    contract_hash: str
    planned_calls: int
    calls: list[PausedCall]
    # What the paused run keeps (`pauses.temporal_plan_checkpoint`).
    checkpoint: dict[str, Any]


@dataclass
class Settlement:
    """Where the run stands: `pending` with its waiting calls, or its end's status."""

    status: str
    pending: list[WaitingSpec] = field(default_factory=list)
