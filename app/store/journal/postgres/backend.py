"""PostgreSQL's backends: batches on a connection held from one batch to the
next, or in the PostgreSQL writer process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from app.engine.receipt import Receipt
from app.store.journal.batch import Batch
from app.store.journal.postgres.connection import steps, write_on
from app.store.journal.postgres.process import PostgresStatementFailed, PostgresWriterProcess
from app.store.journal.process import WriterProcessGone
from app.store.journal.records import receipt_values
from app.store.journal.rows import RenderedTimes
from app.store.journal.session import committed, read_heads, write_replacing


class PostgresConnection:
    """Each batch on the writer engine's connection (`create_writer_engine`), kept
    from one batch to the next instead of a session per batch; given back before
    any session of the writer's (its pool holds one connection) and on failure."""

    process: PostgresWriterProcess | None = None

    def __init__(self, sessions: async_sessionmaker[AsyncSession], engine: AsyncEngine) -> None:
        self._sessions = sessions
        self._engine = engine
        self._held: AsyncConnection | None = None

    def receipt_values(
        self, receipt: Receipt, max_output_bytes: int, rendered: RenderedTimes
    ) -> tuple[Any, ...]:
        return receipt_values(receipt, max_output_bytes, None)

    async def write(self, batch: Batch) -> set[str]:
        if batch.through_session:
            await self.aclose()
            return await write_replacing(self._sessions, batch)
        try:
            return await write_on(await self._connection(), batch, commit=True)
        except BaseException:
            await self.aclose()
            raise

    async def committed(self, batch: Batch) -> set[str] | None:
        await self.aclose()
        return await committed(self._sessions, batch)

    async def read_heads(self, run_ids: Iterable[str]) -> dict[str, tuple[int, str]]:
        await self.aclose()
        return await read_heads(self._sessions, run_ids)

    async def _connection(self) -> AsyncConnection:
        """The held connection, connected anew when there is none."""
        held = self._held
        if held is None or held.closed or held.invalidated:
            held = self._held = await self._engine.connect()
        return held

    async def aclose(self) -> None:
        """Return the held connection to the pool (an invalidated one is dropped)."""
        held, self._held = self._held, None
        if held is not None:
            await held.close()


class PostgresProcess:
    """Each batch in the PostgreSQL writer process
    (`app.store.journal.postgres.process`): every table's rows as driver tuples,
    written there by binary COPY. A batch that replaces stored receipts or writes
    cache entries goes through a session here."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], process: PostgresWriterProcess
    ) -> None:
        self._sessions = sessions
        self.process = process

    def receipt_values(
        self, receipt: Receipt, max_output_bytes: int, rendered: RenderedTimes
    ) -> tuple[Any, ...]:
        return receipt_values(receipt, max_output_bytes, None)

    async def write(self, batch: Batch) -> set[str]:
        if batch.through_session:
            return await write_replacing(self._sessions, batch)
        claimed: set[str] = set()
        # Every row is encoded here, before anything is sent: a row that cannot be
        # stored sends nothing.
        operations = [step.operation() for step in steps(batch, claimed, audit_tuples=True)]
        try:
            won = await self.process.execute(operations)
        except PostgresStatementFailed as exc:
            raise DBAPIError.instance(
                exc.statement, None, exc.error, psycopg.Error,
                connection_invalidated=exc.connection_lost,
            ) from exc  # fmt: skip
        except WriterProcessGone as exc:
            # Ended with the batch in flight: as a dropped connection, it may have committed.
            raise DBAPIError.instance(
                "COMMIT", None, psycopg.OperationalError(str(exc)), psycopg.Error,
                connection_invalidated=True,
            ) from exc  # fmt: skip
        for ids in won:
            claimed.update(ids)
        return claimed

    async def committed(self, batch: Batch) -> set[str] | None:
        return await committed(self._sessions, batch)

    async def read_heads(self, run_ids: Iterable[str]) -> dict[str, tuple[int, str]]:
        return await read_heads(self._sessions, run_ids)

    async def aclose(self) -> None:
        return None
