"""Wire models of confirmations: the listing's items and a decision's answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

ConfirmationStatus = Literal["pending", "approved", "rejected", "refused", "expired"]


class ConfirmationItemOut(BaseModel):
    confirmation_id: str
    run_id: str
    kind: Literal["sequential", "parallel", "router", "mcp"]
    requested_by: str | None = Field(description="The API key name that created the run.")
    call_key: str
    item_key: str | None
    tool: str
    args_digest: str
    # Redacted as the tool's receipts are; null once the call is decided.
    args: Any
    status: ConfirmationStatus
    requested_at: str
    decided_at: str | None
    decided_by: str | None
    reason: str | None


class ConfirmationPage(BaseModel):
    items: list[ConfirmationItemOut]
    next_cursor: str | None


class DecisionOut(BaseModel):
    run_id: str
    confirmation_id: str
    decision: Literal["approved", "rejected"]
    run_status: Literal["pending", "running"]
