"""Wire shape of `GET /runs/{run_id}/proof`: a run's hash chain, rechecked."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ChainEntryOut(BaseModel):
    position: int = Field(description="The row's place in the run's chain, from 1.")
    table: Literal["receipts", "audit_events"]
    row_id: str = Field(
        description="The receipt's id, or the audit row's id (a row may hold several "
        "events: their ids in `GET /runs/{run_id}/audit` start at row_id * 64)."
    )
    digest: str = Field(description="sha256 (hex) of the row's canonical content, recomputed.")
    link: str = Field(description="The stored link: sha256 of the previous link and the digest.")


class SupersededEntryOut(BaseModel):
    position: int
    digest: str
    link: str


class CheckpointOut(BaseModel):
    seq: int
    created_at: str
    runs: list[dict[str, Any]] = Field(description="Each run's `run_id`, `length` and `head`.")
    prev: str
    link: str
    signature: str | None = Field(description="Ed25519 over the link, when the key is configured.")
    key_id: str | None


class ChainCheckOut(BaseModel):
    intact: bool
    problems: list[str]
    notes: list[str] = Field(description="What the chain cannot vouch for (nothing is wrong).")


class ProofOut(BaseModel):
    run_id: str
    length: int = Field(description="Entries in the chain.")
    head: str = Field(description="The last entry's link (the chain's genesis when empty).")
    unchained: int = Field(description="Rows written before the chain existed.")
    entries: list[ChainEntryOut]
    superseded: list[SupersededEntryOut] = Field(
        description="Entries of receipts replaced since (a resumed call), as recorded."
    )
    checkpoint: CheckpointOut | None = Field(
        description="The first checkpoint that holds the run; null until one is written."
    )
    checkpoints: list[CheckpointOut] = Field(description="From `checkpoint` to the latest.")
    check: ChainCheckOut
