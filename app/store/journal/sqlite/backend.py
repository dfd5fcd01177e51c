"""SQLite's backends: batches in aiosqlite's thread (or the loop's), or in the
SQLite writer process."""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine.receipt import Receipt
from app.store.journal.batch import Batch
from app.store.journal.process import WriterProcessGone
from app.store.journal.records import receipt_values
from app.store.journal.rows import RenderedTimes
from app.store.journal.session import Sessions, write_replacing
from app.store.journal.sqlite.encoding import statements
from app.store.journal.sqlite.process import SqliteWriterProcess, StatementFailed
from app.store.journal.sqlite.statements import CLAIM_STATEMENT


class SqliteThread(Sessions):
    """As `Sessions`, its receipts' datetimes rendered for SQLite as they are queued."""

    def receipt_values(
        self, receipt: Receipt, max_output_bytes: int, rendered: RenderedTimes
    ) -> tuple[Any, ...]:
        return receipt_values(receipt, max_output_bytes, rendered)


class SqliteProcess(SqliteThread):
    """Each batch in the SQLite writer process (`app.store.journal.sqlite.process`),
    which runs the statements and the commit on the other core while the loop
    goes on; a batch that replaces stored receipts or writes cache entries goes
    through a session here."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], process: SqliteWriterProcess
    ) -> None:
        super().__init__(sessions)
        self.process: SqliteWriterProcess | None = process

    async def write(self, batch: Batch) -> set[str]:
        if batch.through_session:
            return await write_replacing(self._sessions, batch)
        assert self.process is not None
        claimed: set[str] = set()
        found = statements(batch, claimed)
        try:
            await self.process.execute(found)
        except StatementFailed as exc:
            raise DBAPIError.instance(
                exc.statement or CLAIM_STATEMENT, None, exc.error, sqlite3.Error
            ) from exc
        except WriterProcessGone as exc:
            # Ended with the batch in flight: as a dropped connection, it may have committed.
            raise DBAPIError.instance(
                "COMMIT", None, sqlite3.OperationalError(str(exc)), sqlite3.Error,
                connection_invalidated=True,
            ) from exc  # fmt: skip
        return claimed
