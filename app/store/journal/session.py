"""The journal's work through a SQLAlchemy session: a batch written in the
session's transaction, the batches that replace stored receipts or write cache
entries, the look after an attempt whose answer was lost, and the backend that
writes every batch so (`Sessions`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.engine.receipt import Receipt
from app.store.journal.batch import Batch
from app.store.journal.chain import checkpoint_in_session, link_in_session
from app.store.journal.postgres import connection as postgres
from app.store.journal.process import WriterProcess
from app.store.journal.records import receipt_values
from app.store.journal.rows import RenderedTimes
from app.store.journal.sqlite import connection as sqlite
from app.store.repositories.cache import CacheRepository
from app.store.repositories.chain_heads import ChainHeadRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository


async def write_on(
    connection: AsyncConnection, batch: Batch, *, commit: bool, here: bool = False
) -> set[str]:
    """The batch on the connection, by its database (`sqlite.connection.write_on`,
    `postgres.connection.write_on`; `here` is SQLite's): the ids of the runs whose
    key was claimed."""
    name = connection.dialect.name
    if name == "sqlite":
        return await sqlite.write_on(connection, batch, commit=commit, here=here)
    if name == "postgresql":
        return await postgres.write_on(connection, batch, commit=commit)
    raise NotImplementedError(f"the journal does not write to {name}")


async def insert(session: AsyncSession, batch: Batch) -> set[str]:
    """Write the batch in the session's transaction, which commits or rolls back as
    for any other statement; stored receipts are not replaced here (`replaced`)."""
    return await write_on(await session.connection(), batch, commit=False)


async def write_replacing(sessions: async_sessionmaker[AsyncSession], batch: Batch) -> set[str]:
    """Commit a batch that replaces stored receipts, writes cache entries or is
    linked in its transaction (`app.store.journal.chain`): it is linked, then its
    inserts, then the replacements and cache entries through their repositories,
    then the rest, then its checkpoint, in one transaction."""
    async with sessions() as session:
        batch = await link_in_session(session, batch)
        won = await insert(session, batch.head())
        receipts = ReceiptRepository(session)
        for row in batch.replaced:
            if not await receipts.replace(row):
                await insert(session, Batch(receipts=[row]))
        if batch.cache:
            await CacheRepository(session).put_many(batch.cache)
        await insert(session, batch.tail())
        await checkpoint_in_session(session, batch)
        await session.commit()
    return won


async def read_heads(
    sessions: async_sessionmaker[AsyncSession], run_ids: Iterable[str]
) -> dict[str, tuple[int, str]]:
    """The runs' chain heads as committed (`ChainHeadRepository.heads`)."""
    async with sessions() as session:
        return await ChainHeadRepository(session).heads(run_ids, lock=False)


async def committed(sessions: async_sessionmaker[AsyncSession], batch: Batch) -> set[str] | None:
    """Whether an earlier attempt of the batch committed (its first new row is
    stored): the runs its claims inserted, or None when it did not commit."""
    async with sessions() as session:
        runs = RunRepository(session)
        stored = {row["id"] for _, row in batch.claims if await runs.get(row["id"]) is not None}
        if stored:
            return stored
        first = batch.first_receipt_id()
        if first is not None:
            return set() if await ReceiptRepository(session).get(first) is not None else None
        if batch.runs:
            return set() if await runs.get(batch.runs[0]["id"]) is not None else None
    return None


class Sessions:
    """Each batch on a session's connection, whichever the database: on SQLite in
    aiosqlite's thread, and the batch that ends the only open run on the event
    loop's (`sqlite.connection`). Receipts are kept with their datetimes, as
    PostgreSQL takes them; SQLite renders them when the batch is written."""

    process: WriterProcess | None = None

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    def receipt_values(
        self, receipt: Receipt, max_output_bytes: int, rendered: RenderedTimes
    ) -> tuple[Any, ...]:
        return receipt_values(receipt, max_output_bytes, None)

    async def write(self, batch: Batch) -> set[str]:
        if batch.through_session:
            return await write_replacing(self._sessions, batch)
        # Not `sessions.begin()`: the driver commits with the batch's statements;
        # closing the session rolls back nothing.
        async with self._sessions() as session:
            connection = await session.connection()
            return await write_on(connection, batch, commit=True, here=batch.alone)

    async def committed(self, batch: Batch) -> set[str] | None:
        return await committed(self._sessions, batch)

    async def read_heads(self, run_ids: Iterable[str]) -> dict[str, tuple[int, str]]:
        return await read_heads(self._sessions, run_ids)

    async def aclose(self) -> None:
        return None
