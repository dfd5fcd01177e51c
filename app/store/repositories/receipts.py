from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import insert, select

from app.store.models import Receipt
from app.store.repositories.base import Repository
from app.store.repositories.pagination import Keyset, Page, newest_first, to_page


class ReceiptRepository(Repository):
    async def add_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert receipts in one executemany; keys are `Receipt` column names."""
        if rows:
            await self.session.execute(insert(Receipt), list(rows))

    async def get(self, receipt_id: str) -> Receipt | None:
        return await self.session.get(Receipt, receipt_id)

    async def list_for_run(self, run_id: str) -> list[Receipt]:
        statement = select(Receipt).where(Receipt.run_id == run_id).order_by(Receipt.seq)
        return list((await self.session.scalars(statement)).all())

    async def list_page(
        self,
        *,
        limit: int,
        after: Keyset | None = None,
        run_id: str | None = None,
        tool: str | None = None,
        owner: str | None = None,
        status: str | None = None,
    ) -> Page[Receipt]:
        statement = select(Receipt)
        if run_id is not None:
            statement = statement.where(Receipt.run_id == run_id)
        if tool is not None:
            statement = statement.where(Receipt.tool == tool)
        if owner is not None:
            statement = statement.where(Receipt.owner == owner)
        if status is not None:
            statement = statement.where(Receipt.status == status)
        statement = newest_first(
            statement, Receipt.created_at, Receipt.id, limit=limit, after=after
        )
        rows = (await self.session.scalars(statement)).all()
        return to_page(rows, limit, lambda receipt: Keyset(receipt.created_at, receipt.id))
