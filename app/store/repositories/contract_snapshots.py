from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.store.models import ContractSnapshot
from app.store.repositories.base import Repository
from app.store.types import utc_now


class ContractSnapshotRepository(Repository):
    async def save_if_absent(
        self, hash: str, canonical: Mapping[str, Any], tool_count: int
    ) -> bool:
        """Store the snapshot unless one with this hash exists; True when it was stored."""
        statement = (
            self.dialect_insert(ContractSnapshot)
            .values(
                hash=hash, canonical=dict(canonical), tool_count=tool_count, created_at=utc_now()
            )
            .on_conflict_do_nothing(index_elements=[ContractSnapshot.hash])
            .returning(ContractSnapshot.hash)
        )
        result = await self.session.execute(statement)
        return result.first() is not None

    async def get(self, hash: str) -> ContractSnapshot | None:
        return await self.session.get(ContractSnapshot, hash)
