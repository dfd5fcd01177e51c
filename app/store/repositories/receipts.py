from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict, Unpack

from sqlalchemy import Row, Select, func, inspect, literal_column, select, update

from app.store.models import RECEIPT_SUCCEEDED, Receipt, Run
from app.store.repositories.base import Repository, rowcount
from app.store.repositories.pagination import (
    Keyset,
    Page,
    created_within,
    newest_first,
    to_page,
)


class ReceiptRepository(Repository):
    async def replace(self, row: Mapping[str, Any]) -> bool:
        """Overwrite the receipt stored at the row's `(run_id, seq)` with `row`, in place
        (a resumed run's new receipt for a call that had not succeeded); False if none."""
        result = await self.session.execute(
            update(Receipt)
            .where(Receipt.run_id == row["run_id"], Receipt.seq == row["seq"])
            .values(dict(row))
            .execution_options(synchronize_session=False)
        )
        return rowcount(result) == 1

    async def get(self, receipt_id: str) -> Receipt | None:
        return await self.session.get(Receipt, receipt_id)

    async def list_for_run(
        self, run_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[Receipt]:
        """The run's receipts in `seq` order (input order), starting after `after_seq`."""
        statement = select(Receipt).where(Receipt.run_id == run_id)
        if after_seq is not None:
            statement = statement.where(Receipt.seq > after_seq)
        statement = statement.order_by(Receipt.seq).limit(limit)
        return list((await self.session.scalars(statement)).all())

    async def list_at(self, run_id: str, seqs: Collection[int]) -> list[Receipt]:
        """The run's receipts at these `seq` numbers, in `seq` order."""
        statement = (
            select(Receipt)
            .where(Receipt.run_id == run_id, Receipt.seq.in_(seqs))
            .order_by(Receipt.seq)
        )
        return list((await self.session.scalars(statement)).all())

    async def seqs_below(self, run_id: str, seq: int) -> set[int]:
        """The `seq` numbers of the run's receipts below `seq`."""
        statement = select(Receipt.seq).where(Receipt.run_id == run_id, Receipt.seq < seq)
        return set((await self.session.scalars(statement)).all())

    async def count_below(self, run_id: str, seq: int) -> int:
        """How many of the run's receipts sit below `seq`."""
        statement = select(func.count()).where(Receipt.run_id == run_id, Receipt.seq < seq)
        return int((await self.session.scalar(statement)) or 0)

    async def count_by_status(self, run_id: str) -> dict[str, int]:
        statement = (
            select(Receipt.status, func.count())
            .where(Receipt.run_id == run_id)
            .group_by(Receipt.status)
        )
        return dict((await self.session.execute(statement)).all())

    async def list_page(
        self, *, limit: int, after: Keyset | None = None, **filters: Unpack[ReceiptPageFilters]
    ) -> Page[Receipt]:
        """Receipts newest first, filtered (`ReceiptPageFilters`)."""
        statement = page_statement(limit=limit, after=after, **filters)
        rows = (await self.session.scalars(statement)).all()
        return to_page(rows, limit, lambda receipt: Keyset(receipt.created_at, receipt.id))

    async def recent_calls(
        self, *, since: datetime, limit: int, run_caller: str | None = None
    ) -> Sequence[Row[str, str, bool, float | None, float, datetime]]:
        """(tool, status, cache_hit, duration_ms, admission_wait_ms, created_at) of the
        newest `limit` receipts created at or after `since`, newest first; with
        `run_caller`, only the receipts of runs that caller created."""
        statement = select(
            Receipt.tool,
            Receipt.status,
            Receipt.cache_hit,
            Receipt.duration_ms,
            Receipt.admission_wait_ms,
            Receipt.created_at,
        ).where(Receipt.created_at >= since)
        if run_caller is not None:
            statement = statement.where(
                Receipt.run_id.in_(select(Run.id).where(Run.caller == run_caller))
            )
        statement = statement.order_by(Receipt.created_at.desc(), Receipt.id.desc()).limit(limit)
        return (await self.session.execute(statement)).all()


class ReceiptPageFilters(TypedDict, total=False):
    """What a page of receipts keeps; `since` is inclusive and `until` exclusive, on
    `created_at`. `run_caller` keeps the receipts of runs that caller created (a
    semi-join on `runs.caller`, served by its index)."""

    run_id: str | None
    tool: str | None
    owner: str | None
    status: str | None
    item_key: str | None
    cache_hit: bool | None
    since: datetime | None
    until: datetime | None
    run_caller: str | None


def page_statement(
    *, limit: int, after: Keyset | None, **filters: Unpack[ReceiptPageFilters]
) -> Select[Receipt]:
    """The query of `ReceiptRepository.list_page`."""
    statement = select(Receipt)
    if (run_id := filters.get("run_id")) is not None:
        statement = statement.where(Receipt.run_id == run_id)
    if (tool := filters.get("tool")) is not None:
        statement = statement.where(Receipt.tool == tool)
    if (owner := filters.get("owner")) is not None:
        statement = statement.where(Receipt.owner == owner)
    if (status := filters.get("status")) is not None:
        statement = statement.where(Receipt.status == status)
        if status != RECEIPT_SUCCEEDED:
            statement = statement.where(_NOT_SUCCEEDED)
    if (item_key := filters.get("item_key")) is not None:
        statement = statement.where(Receipt.item_key == item_key)
    if (cache_hit := filters.get("cache_hit")) is not None:
        statement = statement.where(Receipt.cache_hit == cache_hit)
    if (run_caller := filters.get("run_caller")) is not None:
        statement = statement.where(
            Receipt.run_id.in_(select(Run.id).where(Run.caller == run_caller))
        )
    since, until = filters.get("since"), filters.get("until")
    statement = created_within(statement, Receipt.created_at, since=since, until=until)
    return newest_first(statement, Receipt.created_at, Receipt.id, limit=limit, after=after)


# The status index's own predicate, written as a literal: with it, a query for a
# status other than "succeeded" uses the index even when planned for any status
# (`app.store.models.RECEIPT_NOT_SUCCEEDED`).
_NOT_SUCCEEDED = Receipt.status != literal_column(f"'{RECEIPT_SUCCEEDED}'")


def receipt_row(receipt: Receipt) -> dict[str, Any]:
    """A stored receipt as the writer's rows are: its column values by attribute name."""
    return {column.key: getattr(receipt, column.key) for column in inspect(Receipt).column_attrs}
