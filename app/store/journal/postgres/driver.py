"""psycopg below SQLAlchemy: the driver calls the journal makes on a connection,
with driver errors raised as SQLAlchemy's `DBAPIError`, as any other statement's
(`app.store.journal.outage` tells transient ones by that)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn, cast

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.journal.rows import Layout


async def driver_of(connection: AsyncConnection) -> tuple[Any, psycopg.AsyncConnection[Any]]:
    """(SQLAlchemy's raw connection, psycopg's connection under it)."""
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, psycopg.AsyncConnection)
    return raw, driver


async def copy_rows(
    driver: psycopg.AsyncConnection[Any], layout: Layout, encoded: Sequence[tuple[Any, ...]]
) -> None:
    """The rows (driver tuples) by binary COPY."""
    async with driver.cursor() as cursor, cursor.copy(layout.copy_sql) as copy:
        copy.set_types(layout.copy_types)
        for row in encoded:
            await copy.write_row(row)


async def insert(
    connection: AsyncConnection,
    layout: Layout,
    batch: str | None,
    encoded: Sequence[tuple[Any, ...]] | None,
) -> None:
    """Insert the rows as one JSON batch (`batch`) or, without one, by COPY."""
    raw, driver = await driver_of(connection)
    statement = layout.json_sql if batch is not None else layout.copy_sql
    try:
        if batch is not None:
            async with driver.cursor() as cursor:
                await cursor.execute(layout.json_sql, (batch,))
        else:
            assert encoded is not None
            await copy_rows(driver, layout, encoded)
    except psycopg.Error as exc:
        await raise_postgres(connection, raw, statement, exc)


async def execute_rows(
    connection: AsyncConnection, statement: str, rows: Sequence[tuple[Any, ...]]
) -> None:
    """`statement` once per row of parameters (`executemany`)."""
    raw, driver = await driver_of(connection)
    try:
        async with driver.cursor() as cursor:
            await cursor.executemany(statement, rows)
    except psycopg.Error as exc:
        await raise_postgres(connection, raw, statement, exc)


async def commit(connection: AsyncConnection) -> None:
    raw, driver = await driver_of(connection)
    try:
        await driver.commit()
    except psycopg.Error as exc:
        await raise_postgres(connection, raw, "COMMIT", exc)


async def end_own_transaction(connection: AsyncConnection, driver: psycopg.AsyncConnection) -> None:
    """After a transaction sent whole in autocommit: roll back what a failed statement
    left open (the server skipped the rest, COMMIT included; nothing when it
    committed), and put the connection out of autocommit again; a connection that
    cannot be put back is never reused."""
    try:
        # `rollback()`, not a ROLLBACK statement: psycopg then also forgets the
        # statements it prepared in the transaction.
        await driver.rollback()
        await driver.set_autocommit(False)
    except psycopg.Error as exc:
        if not connection.invalidated:
            await connection.invalidate(exc)


async def raise_postgres(
    connection: AsyncConnection, raw: Any, statement: str, exc: psycopg.Error
) -> NoReturn:
    disconnected = connection.dialect.is_disconnect(cast(Any, exc), raw.dbapi_connection, None)
    if disconnected:
        await connection.invalidate(exc)
    raise DBAPIError.instance(
        statement,
        None,
        exc,
        psycopg.Error,
        connection_invalidated=disconnected,
        dialect=connection.dialect,
    ) from exc
