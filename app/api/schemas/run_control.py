"""Wire shapes of starting a run in the background, cancelling it and following its events."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.api.schemas.runs import RunStatus


class RunAcceptedOut(BaseModel):
    """The 202 of `Prefer: respond-async`; `Location` is `/runs/{run_id}`."""

    run_id: str
    status: Literal["running"]


class RunStatusOut(BaseModel):
    run_id: str
    status: RunStatus
