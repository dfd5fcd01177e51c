"""Wire shapes of starting a run in the background, cancelling it and following its events."""

from __future__ import annotations

from pydantic import BaseModel

from app.api.schemas.runs import RunStatus


class RunAcceptedOut(BaseModel):
    """The 202 of `Prefer: respond-async`; `Location` is `/runs/{run_id}`. A replay
    (`Idempotent-Replayed: true`) says the run's status now, and its `call_count`
    once it ended."""

    run_id: str
    status: RunStatus
    call_count: int | None = None


class RunStatusOut(BaseModel):
    run_id: str
    status: RunStatus
