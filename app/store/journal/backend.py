"""What the group commit asks of a database: encode a receipt as it will be
written, write a batch in one transaction, and tell whether a batch already
committed. One backend is chosen when the service starts (`choose_backend`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.engine.receipt import Receipt
from app.store.journal.batch import Batch
from app.store.journal.postgres.backend import PostgresConnection, PostgresProcess
from app.store.journal.postgres.process import PostgresWriterProcess
from app.store.journal.process import WriterProcess
from app.store.journal.rows import RenderedTimes
from app.store.journal.session import Sessions
from app.store.journal.sqlite.backend import SqliteProcess, SqliteThread
from app.store.journal.sqlite.process import SqliteWriterProcess


class Backend(Protocol):
    """One database's way of writing the journal's batches."""

    @property
    def process(self) -> WriterProcess | None:
        """The writer process the batches go to, if any."""

    def receipt_values(
        self, receipt: Receipt, max_output_bytes: int, rendered: RenderedTimes
    ) -> tuple[Any, ...]:
        """The receipt as this backend's driver tuple, all but `created_at`
        (`Batch.encoded`); SQLite's datetimes rendered into `rendered`."""

    async def write(self, batch: Batch) -> set[str]:
        """Write and commit the batch: the ids of the runs whose key was claimed.
        Driver errors are raised as `DBAPIError`; a write whose outcome is unknown
        (a dropped connection, a writer process that ended) has
        `connection_invalidated` set."""

    async def committed(self, batch: Batch) -> set[str] | None:
        """After a write whose outcome was unknown: None when the batch did not
        commit, else the ids of the runs whose key it claimed."""

    async def read_heads(self, run_ids: Iterable[str]) -> dict[str, tuple[int, str]]:
        """The runs' chain heads as committed: (length, last link) each."""

    async def aclose(self) -> None: ...


def choose_backend(
    sessions: async_sessionmaker[AsyncSession],
    *,
    sqlite_process: SqliteWriterProcess | None = None,
    postgres_process: PostgresWriterProcess | None = None,
) -> Backend:
    """The backend for the writer's sessions: a writer process when one is given,
    else the database's own connection (PostgreSQL: one held from batch to batch;
    SQLite: aiosqlite's thread); a session per batch when the sessions name no
    engine."""
    if sqlite_process is not None:
        return SqliteProcess(sessions, sqlite_process)
    if postgres_process is not None:
        return PostgresProcess(sessions, postgres_process)
    bind = sessions.kw.get("bind") if isinstance(sessions, async_sessionmaker) else None
    if not isinstance(bind, AsyncEngine):
        return Sessions(sessions)
    if bind.dialect.name == "postgresql":
        return PostgresConnection(sessions, bind)
    return SqliteThread(sessions)
