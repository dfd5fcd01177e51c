"""How router runs are kept: decisions as audit events, pauses, ends and stops."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.observability.confirmations import record_confirmation
from app.router.loop import Finished, Paused, RunResult
from app.service.errors import StorageUnavailable
from app.service.runs.reads import receipt_view
from app.store.journal.writer import GroupCommitWriter
from app.store.models import Receipt as StoredReceipt
from app.store.repositories.router_recordings import RouterRecordingRepository
from app.store.repositories.router_runs import RouterRunRepository
from app.store.repositories.runs import RunRepository

# Fields of the read API's receipt view that a router response's receipts do not have.
_STORE_ONLY = ("run_id", "seq", "owner", "created_at", "output_truncated", "output_digest")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class StretchRecording:
    """What a stretch of a run adds to its recording (`recorded.load_recording` reads it back):
    the run's request (kept from the first stretch) and this stretch's replies."""

    request: dict[str, Any]
    replies: list[dict[str, Any]]

    async def keep(self, session: AsyncSession, run_id: str) -> None:
        await RouterRecordingRepository(session).append(run_id, self.request, self.replies)


class AuditDecisions:
    """The router's decisions, as audit events of the run (redacted where the writer
    makes their rows, as every audit row is)."""

    __slots__ = ("_caller", "_run_id", "_writer")

    def __init__(self, writer: GroupCommitWriter, run_id: str | None, caller: str | None) -> None:
        self._writer = writer
        self._run_id = run_id
        self._caller = caller

    def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        tool: str | None = None,
        call_key: str | None = None,
    ) -> None:
        self._writer.emit_row(
            {
                "run_id": self._run_id,
                "at": _now(),
                "kind": kind,
                "caller": self._caller,
                "tool": tool,
                "call_key": call_key,
                "item_key": None,
                "detail": dict(detail),
            }
        )


async def record_router_result(
    sessions: async_sessionmaker[AsyncSession],
    writer: GroupCommitWriter,
    result: RunResult,
    recording: StretchRecording | None = None,
) -> None:
    """Keep how the run ended, or what it needs to be resumed, and the stretch's
    replies; decisions are flushed first."""
    await writer.flush()
    run_id = result.outcome.run_id
    call_count = len(result.stored["receipts"])
    try:
        async with sessions.begin() as session:
            if recording is not None:
                await recording.keep(session, run_id)
            if isinstance(result, Finished):
                await RunRepository(session).finish(
                    run_id,
                    status=result.outcome.status.value,
                    outcome=result.stored,
                    call_count=call_count,
                    finished_at=_now(),
                )
                await RouterRunRepository(session).release(run_id)
            else:
                await RouterRunRepository(session).pause(
                    run_id,
                    outcome=result.stored,
                    call_count=call_count,
                    checkpoint=result.checkpoint.to_json(),
                    confirmations=_confirmation_rows(result),
                )
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's end could not be recorded: {exc}") from exc
    if isinstance(result, Finished):
        writer.run_ended(run_id)
    else:
        record_confirmation("requested", len(result.calls))


async def record_router_stopped(
    sessions: async_sessionmaker[AsyncSession],
    run_id: str,
    *,
    status: str,
    outcome: dict[str, Any],
    call_count: int | None = None,
    recording: StretchRecording | None = None,
    writer: GroupCommitWriter | None = None,
) -> None:
    """Keep the end of a run stopped from outside (cancelled, interrupted, closed);
    the `writer` is told the run ended (`GroupCommitWriter.run_ended`)."""
    try:
        async with sessions.begin() as session:
            if recording is not None:
                await recording.keep(session, run_id)
            await RunRepository(session).finish(
                run_id, status=status, outcome=outcome, call_count=call_count, finished_at=_now()
            )
            await RouterRunRepository(session).release(run_id)
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's end could not be recorded: {exc}") from exc
    if writer is not None:
        writer.run_ended(run_id)


def closed_outcome(
    last_outcome: Mapping[str, Any] | None,
    reason: str,
    *,
    status: str = "incomplete",
    stopped_by: str = "confirmation",
) -> dict[str, Any]:
    """A run's last stored outcome, ended without an answer (by default: a paused run
    closed without resuming, incomplete by confirmation)."""
    outcome = dict(last_outcome or {})
    state = dict(outcome.get("state") or {})
    state["status"] = "abort"
    state["error"] = reason
    outcome.update(
        status=status, stopped_by=stopped_by, text="", final=None, pending=[], state=state
    )
    return outcome


def receipt_from_store(row: StoredReceipt) -> dict[str, Any]:
    """A stored (redacted) receipt, in the shape of a router response's receipts."""
    view = receipt_view(row)
    for key in _STORE_ONLY:
        del view[key]
    return view


def _confirmation_rows(result: Paused) -> list[dict[str, Any]]:
    return [
        {
            "id": call.confirmation_id,
            "call_id": call.call_id,
            "call_key": call.call_key,
            "tool": call.tool,
            "args": dict(call.args),
            "args_digest": call.args_digest,
            "contract_hash": call.contract_hash,
        }
        for call in result.calls
    ]
