from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, or_, select

from app.store.models import CacheEntry
from app.store.repositories.base import Repository, rowcount
from app.store.types import utc_now


class CacheRepository(Repository):
    async def get(self, fingerprint: str, definition_hash: str, now: datetime) -> CacheEntry | None:
        """The entry for this call under this tool definition, unless it has expired."""
        statement = (
            select(CacheEntry)
            .where(
                CacheEntry.fingerprint == fingerprint,
                CacheEntry.definition_hash == definition_hash,
                or_(CacheEntry.expires_at.is_(None), CacheEntry.expires_at > now),
            )
            .execution_options(populate_existing=True)
        )
        return (await self.session.scalars(statement)).one_or_none()

    async def put(
        self,
        *,
        fingerprint: str,
        definition_hash: str,
        tool: str,
        output: Any,
        source_receipt_id: str | None,
        expires_at: datetime | None,
        created_at: datetime | None = None,
    ) -> None:
        """Store the entry, replacing any entry for the same key."""
        await self.put_many(
            [
                {
                    "fingerprint": fingerprint,
                    "definition_hash": definition_hash,
                    "tool": tool,
                    "output": output,
                    "source_receipt_id": source_receipt_id,
                    "created_at": created_at or utc_now(),
                    "expires_at": expires_at,
                }
            ]
        )

    async def put_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Upsert entries in one executemany; for a key given twice the last row wins."""
        latest = {(row["fingerprint"], row["definition_hash"]): row for row in rows}
        if not latest:
            return
        statement = self.dialect_insert(CacheEntry)
        statement = statement.on_conflict_do_update(
            index_elements=[CacheEntry.fingerprint, CacheEntry.definition_hash],
            set_={
                "tool": statement.excluded.tool,
                "output": statement.excluded.output,
                "source_receipt_id": statement.excluded.source_receipt_id,
                "created_at": statement.excluded.created_at,
                "expires_at": statement.excluded.expires_at,
            },
        )
        await self.session.execute(statement, list(latest.values()))

    async def delete_expired(self, now: datetime) -> int:
        result = await self.session.execute(
            delete(CacheEntry)
            .where(CacheEntry.expires_at <= now)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result)
