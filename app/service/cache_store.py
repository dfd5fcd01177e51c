"""Cache lookups for the engine; entries are written with their receipts (see writer)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine import CachedOutput
from app.store.repositories.cache import CacheRepository


class DatabaseCacheStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def get(self, fingerprint: str, definition_hash: str) -> CachedOutput | None:
        async with self._sessions() as session:
            entry = await CacheRepository(session).get(
                fingerprint, definition_hash, datetime.now(UTC)
            )
        if entry is None:
            return None
        return CachedOutput(
            fingerprint=entry.fingerprint,
            definition_hash=entry.definition_hash,
            tool=entry.tool,
            output=entry.output,
            source_receipt_id=entry.source_receipt_id or "",
            created_at=entry.created_at,
            expires_at=entry.expires_at,
        )
