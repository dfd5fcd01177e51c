"""What a router run's workflow and its activities pass each other: plain dataclasses.

Temporal's history stores every one of them. The run's request is among them as
admitted (its steps' arguments, like a plan's calls' arguments); between turns
the run travels as the redacted checkpoint a paused run keeps (`Checkpoint`),
so no tool output and no model reply reaches the history unredacted. What must
stay exact (the conversation the model is sent, the arguments of a call in
flight) is kept in the store, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROUTER_WORKFLOW = "toolloop.router"
ROUTER_BEGIN = "toolloop.router_begin"
ROUTER_TURN = "toolloop.router_turn"
ROUTER_LOST = "toolloop.router_lost"
ROUTER_RESUME = "toolloop.router_resume"
# A stretch's status when the run paused for confirmations (its checkpoint: the pause's).
PAUSED = "pending"
# The run's status once the last decision on its pause was committed.
RUNNING = "running"


@dataclass
class RouterRunInput:
    run_id: str
    caller: str | None
    contract_hash: str
    # The admitted request (`RouterRequest.to_json`), its budgets filled in.
    request: dict[str, Any]
    # Whether a turn whose worker was lost may run again: none of the run's tools is
    # `non_idempotent`, so a call the lost turn may have made can be made again.
    rerunnable: bool
    # How long one turn may take at most: the run's deadline and a margin.
    turn_timeout_s: float
    heartbeat_timeout_s: float


@dataclass
class RouterTurnInput:
    run: RouterRunInput
    # `Checkpoint.to_json()` of where the run stands before this turn.
    checkpoint: dict[str, Any]


@dataclass
class RouterResumeInput:
    """The run's pause was decided: the decisions and the calls' exact arguments are
    read from the store (its confirmations), never carried here."""

    run: RouterRunInput
    # The pause's checkpoint (`Checkpoint.to_json()`, redacted).
    checkpoint: dict[str, Any]


@dataclass
class RouterStep:
    """A stretch's end: the checkpoint to go on from, or the run's final status; both
    when the run paused for confirmations (status `PAUSED`, the pause's checkpoint)."""

    checkpoint: dict[str, Any] | None
    status: str | None


@dataclass
class RouterLostInput:
    run: RouterRunInput
    status: str  # "interrupted" | "cancelled"
    reason: str
    # Where the run stood after its last finished stretch (None: before the first).
    checkpoint: dict[str, Any] | None
