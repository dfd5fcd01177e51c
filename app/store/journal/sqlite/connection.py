"""A batch written on a SQLite connection of the service's own.

aiosqlite runs each call in its own thread, one round trip each; its `_execute`
runs one function there (as SQLAlchemy's adapter does for the isolation
level): every statement of the batch goes in one round trip. The batch that
ends a lone run may instead be written on the event loop's thread
(`write_on(here=True)`): its request waits for it, the loop has nothing else to
run meanwhile, and a hand-off to that thread and back costs two thread
wake-ups. Driver errors are raised as SQLAlchemy's `DBAPIError`, as any other
statement's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import aiosqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.journal.batch import Batch
from app.store.journal.sqlite import statements as program
from app.store.journal.sqlite.encoding import statements
from app.store.journal.sqlite.statements import CLAIM_STATEMENT, SqliteClaims, SqliteStatement

# The most rows of a batch written on the event loop's thread: room for a
# ten-call plan's start, receipts, events and end, and a bound on how long the
# loop waits for SQLite.
HERE_MAX_ROWS = 64


async def write_on(
    connection: AsyncConnection, batch: Batch, *, commit: bool, here: bool = False
) -> set[str]:
    """Write the batch in the connection's transaction; with `commit`, commit it
    too. `here` (with `commit`): on the calling thread (the event loop's) instead
    of aiosqlite's when the batch holds at most `HERE_MAX_ROWS` rows and no other
    connection holds the write lock. The ids of the runs whose key was claimed."""
    claimed: set[str] = set()
    found = statements(batch, claimed)
    if not found:
        return claimed
    here = here and commit and _rows(found) <= HERE_MAX_ROWS
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, aiosqlite.Connection)
    failed: list[str] = []
    try:
        if not (here and _executemany_here(driver._conn, found, failed)):
            await driver._execute(  # type: ignore[no-untyped-call]
                program.execute_all, driver._conn, found, failed, commit
            )
    except sqlite3.Error as exc:
        raise DBAPIError.instance(
            failed[0] if failed else CLAIM_STATEMENT,
            None,
            exc,
            sqlite3.Error,
            dialect=connection.dialect,
        ) from exc
    if commit:
        # Listeners of SQLAlchemy's `commit` event (commit counters) still see a
        # commit the driver made itself.
        sync = connection.sync_connection
        if sync is not None:
            sync.dispatch.commit(sync)
    return claimed


def _rows(found: Sequence[SqliteStatement]) -> int:
    return sum(
        len(statement.keys) if isinstance(statement, SqliteClaims) else len(statement[1])
        for statement in found
    )


def _executemany_here(
    conn: sqlite3.Connection, statements: Sequence[SqliteStatement], failed: list[str]
) -> bool:
    """`execute_all` with its commit on the calling thread, never waiting for
    another connection's lock: False, with the transaction rolled back and nothing
    written, when one holds it (the caller then goes through aiosqlite's thread,
    which waits as long as the connection's busy timeout says).

    The connection is the caller's alone while it runs: the pool gave it to the
    caller, whose every earlier call on it has returned, and it was opened with
    `check_same_thread=False` (`app.store.database`)."""
    patience = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        program.execute_all(conn, statements, failed, True)
    except sqlite3.OperationalError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
        if code not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise
        for statement in statements:
            if isinstance(statement, SqliteClaims):
                statement.won.clear()  # claimed in the transaction rolled back
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(patience)}")
    return True
