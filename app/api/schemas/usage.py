"""Wire shapes of `GET /usage`."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

BucketName = Literal["hour", "day"]


class UsageOut(BaseModel):
    bucket: BucketName
    start: datetime = Field(description="The bucket's first instant (UTC).")
    owner: str
    caller: str | None = Field(description="The API key name that ran the model; null: open mode.")
    profile: str
    requests: int = Field(description="Model requests answered.")
    input_tokens: int
    output_tokens: int
    cost: str | None = Field(
        description="A decimal string in the unit of the profiles' prices (nine decimals); "
        "null when the profile declares no prices."
    )


class UsagePage(BaseModel):
    items: list[UsageOut]
    next_cursor: str | None
