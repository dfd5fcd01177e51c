"""How a router run ends: status, the named stop, and the outcome document."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    DONE = "done"
    INCOMPLETE = "incomplete"
    PENDING = "pending"
    ERROR = "error"


class Stop(StrEnum):
    """Every `stopped_by` value except `completion: <reason>`."""

    MAX_CALLS = "budget:max_calls"
    MAX_TURNS = "budget:max_turns"
    DEADLINE = "budget:deadline"
    MAX_TOKENS = "budget:max_tokens"
    MAX_COST = "budget:max_cost"
    DUPLICATE_CALL = "duplicate_call"
    SAME_TOOL_STREAK = "same_tool_streak"
    MALFORMED_OUTPUT = "malformed_output"
    FINAL_SCHEMA = "final_schema"
    CONFIRMATION = "confirmation"
    LLM_ERROR = "llm_error"


def completion_stop(reason: str) -> str:
    return f"completion: {reason}"


def status_of(stopped_by: str) -> RunStatus:
    if stopped_by == Stop.CONFIRMATION:
        return RunStatus.PENDING
    if stopped_by == Stop.LLM_ERROR:
        return RunStatus.ERROR
    return RunStatus.INCOMPLETE


@dataclass(frozen=True, slots=True)
class Outcome:
    """`text` and `final` are set only when `status` is done: a stop never
    fabricates an answer."""

    run_id: str
    status: RunStatus
    stopped_by: str
    text: str
    final: Any
    attempts: int
    turns: int
    state: dict[str, Any]
    receipts: list[dict[str, Any]]
    pending: list[dict[str, Any]] = field(default_factory=list)
    # A replay's report (`app.service.router.replay`); None for any other run.
    replay: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        shown = {
            "run_id": self.run_id,
            "status": self.status.value,
            "stopped_by": self.stopped_by,
            "text": self.text,
            "final": self.final,
            "attempts": self.attempts,
            "turns": self.turns,
            "state": self.state,
            "receipts": self.receipts,
            "pending": self.pending,
        }
        if self.replay is not None:
            shown["replay"] = self.replay
        return shown
