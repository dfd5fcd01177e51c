"""The usage ledger's writes: one row per model request, in its own transaction,
committed before the run goes on (a crash loses no request already answered)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.router.ports import UsageEntry
from app.service.errors import StorageUnavailable
from app.store.repositories.usage import UsageRepository


class StoredUsage:
    """A `UsageLedger` over the database."""

    __slots__ = ("_sessions",)

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def record(self, entry: UsageEntry) -> None:
        at = datetime.now(UTC)
        hour = at.replace(minute=0, second=0, microsecond=0)
        row = {
            "at": at,
            "hour": hour,
            "day": hour.replace(hour=0),
            "run_id": entry.run_id,
            "owner": entry.owner,
            "caller": entry.caller or "",
            "profile": entry.profile,
            "role": entry.role,
            "input_tokens": entry.input_tokens,
            "output_tokens": entry.output_tokens,
            "cost_nanos": entry.cost_nanos,
        }
        try:
            async with self._sessions.begin() as session:
                await UsageRepository(session).add(row)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(
                f"a model request's usage could not be recorded: {exc}"
            ) from exc


class ReplayedUsage:
    """The `UsageLedger` of a replay: its replies come from a recording, no model is
    asked and nothing is spent, so nothing enters the ledger."""

    __slots__ = ()

    async def record(self, entry: UsageEntry) -> None:
        return None
