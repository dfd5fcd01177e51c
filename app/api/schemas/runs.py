"""Wire shapes of the read API: runs, stored receipts, audit events, and their query parameters."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, Field

from app.api.problems import PROBLEM_MEDIA_TYPE, ProblemOut
from app.api.schemas.plans import CallErrorOut

RunKind = Literal["sequential", "parallel", "router", "mcp"]
RunStatus = Literal[
    "running",
    "succeeded",
    "failed",
    "interrupted",
    "cancelled",
    "done",
    "incomplete",
    "pending",
    "error",
]
ReceiptStatus = Literal["succeeded", "failed", "timed_out", "skipped", "denied"]

DEFAULT_PAGE = 50
MAX_PAGE = 500
DEFAULT_RUN_PAGE = 500
MAX_RUN_PAGE = 1000
MAX_FILTER_CHARS = 4096


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ProblemOut, "content": {PROBLEM_MEDIA_TYPE: {}}} for s in statuses}


LIST_PROBLEMS = _problems(401, 403, 422, 429, 503)
RUN_PROBLEMS = _problems(401, 403, 404, 422, 429, 503)


def _text(value: str) -> str:
    if len(value) > MAX_FILTER_CHARS:
        raise ValueError(f"must be at most {MAX_FILTER_CHARS} characters")
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


# RFC 3339 `date-time`: the date, `T`, the time to the second (a fraction allowed),
# and `Z` or a `+hh:mm`/`-hh:mm` offset. Pydantic alone also takes other ISO 8601
# forms and bare Unix timestamps.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _rfc3339(value: Any) -> Any:
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2026-01-01T00:00:00Z")
    return value


def _utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range") from None


Text = Annotated[str, AfterValidator(_text)]
UtcTime = Annotated[AwareDatetime, BeforeValidator(_rfc3339), AfterValidator(_utc)]

FilterText = Text | None
_OFFSET = " (RFC 3339 with a UTC offset: `Z`, or `+hh:mm` with `+` sent as `%2B`)."
Since = Annotated[UtcTime | None, Query(description="Created at or after this time" + _OFFSET)]
Until = Annotated[UtcTime | None, Query(description="Created strictly before this time" + _OFFSET)]
Cursor = Annotated[
    str | None,
    Query(description="The `next_cursor` of the previous page; omit it for the first page."),
]
# `limit` of listings across runs, and of a run's own (its receipts, its audit).
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
RunPageLimit = Annotated[int, Query(ge=1, le=MAX_RUN_PAGE)]


class RunSummaryOut(BaseModel):
    run_id: str
    kind: RunKind
    owner: str
    status: RunStatus
    caller: str | None = Field(description="The API key name that created the run.")
    contract_hash: str
    parallel_batch_id: str | None
    trace_id: str | None = Field(
        default=None,
        description="The W3C trace id (32 hex digits) of the request that started the run, "
        "when the service exports traces.",
    )
    call_count: int
    created_at: datetime
    started_at: datetime
    finished_at: datetime | None
    duration_ms: float | None


class RunOut(RunSummaryOut):
    receipt_counts: dict[str, int] = Field(description="Stored receipts by status.")
    receipt_count: int
    outcome: dict[str, Any] | None = Field(description="A router run's stored outcome.")
    context: dict[str, Any] | None = Field(
        description="The plan's `context` (e.g. `trace_id`), redacted; null without one."
    )


class StoredReceiptOut(BaseModel):
    receipt_id: str
    run_id: str
    plan_id: str
    seq: int = Field(description="Position in the run (input order).")
    owner: str
    call_key: str
    item_key: str | None
    parallel_batch_id: str | None
    tool: str
    status: ReceiptStatus
    output: Any = Field(
        description="The redacted output; past the stored-size cap, a marker object "
        "(`truncated`, `size_bytes`, `digest`, `preview`)."
    )
    output_truncated: bool = Field(description="The stored output is a truncation marker.")
    output_digest: str | None = Field(
        description="sha256 of the canonical JSON of the full redacted output, when truncated."
    )
    error: CallErrorOut | None
    attempts: int
    cache_hit: bool
    cache_source_receipt_id: str | None
    fingerprint: str
    idempotency_key: str
    parent_receipt_id: str | None
    control: dict[str, Any] | None
    admission_wait_ms: float
    started_at: datetime
    finished_at: datetime | None
    duration_ms: float | None
    created_at: datetime = Field(description="When the receipt was stored.")
    trace_id: str | None = Field(
        default=None, description="Its run's W3C trace id, when the service exports traces."
    )


class AuditEventOut(BaseModel):
    id: int
    run_id: str | None
    at: datetime
    kind: str
    caller: str | None
    tool: str | None
    call_key: str | None
    item_key: str | None
    detail: dict[str, Any]


class RunPage(BaseModel):
    items: list[RunSummaryOut]
    next_cursor: str | None


class ReceiptPage(BaseModel):
    items: list[StoredReceiptOut]
    next_cursor: str | None


class AuditPage(BaseModel):
    items: list[AuditEventOut]
    next_cursor: str | None
