"""A router run's recording read back: from its rows, or as a stretch keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.foundation.redaction import DEFAULT_REDACTOR, Redactor
from app.llm.replay import Entry, EntryError, parse_entry
from app.router.request_checks import RunPlan
from app.service.errors import StorageUnavailable
from app.service.router.cassette import Recording
from app.service.router.trail import Event, trail_of
from app.store.repositories.audit import AuditRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.router_recordings import RouterRecordingRepository
from app.store.repositories.runs import RunRepository

# A run still going, whose decisions are not all known yet.
_UNFINISHED = ("running", "pending")


class RecordingUnavailable(ValueError):
    """The run cannot be replayed: unknown, not a router run, unfinished, or unrecorded."""


def recorded_request(plan: RunPlan, redactors: Mapping[str, Redactor]) -> dict[str, Any]:
    """The run's request as kept: redacted, its steps' arguments with their tools' rules."""
    request = plan.request
    data: dict[str, Any] = DEFAULT_REDACTOR.redact(request.to_json())
    for kept, step in zip(data["steps"], request.steps, strict=True):
        kept["args"] = redactors.get(step.tool, DEFAULT_REDACTOR).redact(dict(step.args))
    return data


async def load_recording(sessions: async_sessionmaker[AsyncSession], run_id: str) -> Recording:
    """A finished router run's recording, with the decisions it took."""
    try:
        async with sessions() as session:
            run = await RunRepository(session).get(run_id)
            if run is None or run.kind != "router":
                raise RecordingUnavailable(f"no router run {run_id!r}")
            if run.status in _UNFINISHED:
                raise RecordingUnavailable(
                    f"run {run_id!r} is {run.status}: replay it once it ends"
                )
            row = await RouterRecordingRepository(session).get(run_id)
            if row is None:
                raise RecordingUnavailable(f"run {run_id!r} has no recording of its replies")
            events = await AuditRepository(session).list_for_run(run_id)
            receipts = await ReceiptRepository(session).list_for_run(run_id)
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's recording could not be read: {exc}") from exc
    entries: list[Entry] = []
    for index, reply in enumerate(row.replies):
        try:
            entries.append(parse_entry(reply))
        except EntryError as exc:
            raise RecordingUnavailable(f"run {run_id!r}: reply {index + 1}: {exc}") from None
    decisions = [Event(e.kind, e.detail, e.tool, e.call_key) for e in events]
    stored = [
        {"call_key": r.call_key, "status": r.status, "parent_receipt_id": r.parent_receipt_id}
        for r in receipts
    ]
    return Recording(
        source=f"run {run_id}",
        run_id=run_id,
        contract_hash=run.contract_hash,
        request=row.request,
        recorded=trail_of(decisions, stored, run.outcome or {}, row.replies),
        replies=list(row.replies),
        entries=entries,
    )
