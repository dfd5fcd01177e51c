"""A `toolloop` command's work on the database, run to its end or refused in one line.

Whatever stops the work on the database's side (unreachable, never migrated,
migrated by another release, a table that is not what this release expects)
becomes `CommandFailed` with one line that names the database and the cause:
never a traceback, and never the SQL of the statement that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.store.database import (
    DatabaseUnavailable,
    check_database,
    create_database_engine,
    create_session_factory,
    database_target,
    one_line_reason,
)
from app.store.migrate import SchemaProblem, require_current_schema

T = TypeVar("T")


class CommandFailed(Exception):
    """Why the command could not do its work: one line for stderr."""


def run_on_database(url: str, work: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(work)`, with the database's failures as `CommandFailed`."""
    try:
        return asyncio.run(work)
    except (DatabaseUnavailable, SchemaProblem) as exc:
        raise CommandFailed(str(exc)) from None
    except SQLAlchemyError as exc:
        raise CommandFailed(
            f"database error at {database_target(url)}: {one_line_reason(exc)} "
            "(if its tables are older than this toolloop, run `toolloop db upgrade` first)"
        ) from None


async def read_database(
    url: str, read: Callable[[async_sessionmaker[AsyncSession]], Awaitable[T]]
) -> T:
    """`read` over a database that answers and is at the latest migration; it is
    never migrated here (a read-only command leaves that to `toolloop db upgrade`)."""
    engine = create_database_engine(url)
    try:
        await check_database(engine)
        await require_current_schema(engine)
        return await read(create_session_factory(engine))
    finally:
        await engine.dispose()
