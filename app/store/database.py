"""Engines, sessions and the reachability check for SQLite and PostgreSQL.

Nothing here connects at import time: the service builds the engine in its
lifespan, checks it with `check_database`, and disposes it on shutdown.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
from sqlalchemy import event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import AsyncAdaptedQueuePool, StaticPool

from app.foundation import serialization
from app.store.journal.sqlite.statements import bind_none_as_is

SQLITE_PRAGMAS = (
    "journal_mode=WAL",
    "synchronous=NORMAL",
    "busy_timeout=5000",
    "foreign_keys=ON",
)
POSTGRES_CONNECT_TIMEOUT_S = 5
CHECK_TIMEOUT_S = 10.0


class UnsupportedDatabaseURL(ValueError):
    """The URL is not `sqlite+aiosqlite://...` or `postgresql+psycopg://...`."""


class DatabaseUnavailable(Exception):
    """The database did not answer; the message is one line naming where and why."""

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"database unavailable at {target}: {reason}")


def create_database_engine(
    url: str | URL,
    *,
    pool_size: int = 10,
    max_overflow: int = 10,
    echo: bool = False,
    sqlite_wal_autocheckpoint: int | None = None,
) -> AsyncEngine:
    """`sqlite_wal_autocheckpoint`: the WAL length (pages) past which a SQLite commit
    checkpoints inside itself; None keeps SQLite's default (1,000). Raised only
    where a `WalCheckpointer` checkpoints in the background."""
    parsed = _parse(url)
    if _is_sqlite(parsed):
        # SQLite takes one writer at a time. Through one connection, writers queue
        # in asyncio; through several, they sleep in SQLite's busy handler and,
        # under load, fail with "database is locked".
        return _sqlite_engine(
            parsed,
            pool_size=1,
            max_overflow=0,
            echo=echo,
            wal_autocheckpoint=sqlite_wal_autocheckpoint,
        )
    if _is_postgres(parsed):
        return _postgres_engine(parsed, pool_size=pool_size, max_overflow=max_overflow, echo=echo)
    raise UnsupportedDatabaseURL(
        f"unsupported database URL {display_url(parsed)}: "
        "use sqlite+aiosqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
    )


def create_writer_engine(url: str | URL, shared: AsyncEngine) -> AsyncEngine:
    """The engine the group-commit writer writes through.

    SQLite: `shared`, whose one connection everyone queues for (see above).
    PostgreSQL: one connection of the writer's own, not pinged before each use.
    The writer retries a transaction that failed on a dropped connection (the
    connection is then replaced), so the ping bought it nothing, and it was one
    more round trip in series with every commit.
    """
    parsed = _parse(url)
    if _is_postgres(parsed):
        return _postgres_engine(
            parsed, pool_size=1, max_overflow=0, echo=bool(shared.echo), pre_ping=False
        )
    return shared


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


async def check_database(engine: AsyncEngine, *, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Open one connection and run `SELECT 1`, or raise `DatabaseUnavailable`."""
    target = database_target(engine.url)
    if missing := _missing_sqlite_directory(engine.url):
        raise DatabaseUnavailable(target, f"directory {missing} does not exist")
    try:
        async with asyncio.timeout(timeout_s), engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except TimeoutError:
        raise DatabaseUnavailable(target, f"no answer within {timeout_s:g} s") from None
    except (SQLAlchemyError, OSError) as exc:
        raise DatabaseUnavailable(target, one_line_reason(exc)) from exc


def display_url(url: str | URL) -> str:
    """The URL with its password masked, safe for logs and error messages."""
    parsed = _parse(url)
    return parsed.difference_update_query(["password"]).render_as_string(hide_password=True)


def database_target(url: str | URL) -> str:
    """Where the database lives: the SQLite file, or PostgreSQL `host:port/database`."""
    parsed = _parse(url)
    if _is_sqlite(parsed):
        return ":memory:" if _is_memory(parsed) else str(parsed.database)
    host = parsed.host or _query_value(parsed, "host") or "localhost"
    port = parsed.port or _query_value(parsed, "port") or 5432
    return f"{host}:{port}/{parsed.database or ''}"


def is_sqlite_url(url: str | URL) -> bool:
    """Whether `url` names an SQLite database (False for one that cannot be parsed)."""
    try:
        return _is_sqlite(_parse(url))
    except UnsupportedDatabaseURL:
        return False


def sqlite_file(url: str | URL) -> Path | None:
    """The database file of a SQLite URL; None for PostgreSQL, memory and `uri=true` URLs."""
    parsed = _parse(url)
    if not _is_sqlite(parsed) or _is_memory(parsed) or _query_value(parsed, "uri") == "true":
        return None
    return Path(str(parsed.database))


def sqlite_pragmas(wal_autocheckpoint: int | None = None) -> list[str]:
    """The pragmas every connection to a SQLite file gets (`create_database_engine`)."""
    pragmas = list(SQLITE_PRAGMAS)
    if wal_autocheckpoint is not None:
        pragmas.append(f"wal_autocheckpoint={int(wal_autocheckpoint)}")
    return pragmas


def _sqlite_engine(
    url: URL, *, pool_size: int, max_overflow: int, echo: bool, wal_autocheckpoint: int | None
) -> AsyncEngine:
    # sqlite3 binds None as NULL only after looking for an adapter and then for
    # `__adapt__` and `__conform__` on None, two AttributeErrors raised and caught
    # per NULL parameter (a receipt row has about ten); a registered adapter is
    # found first. Process-wide, and binds exactly what sqlite3 did before.
    sqlite3.register_adapter(type(None), bind_none_as_is)
    options: dict[str, Any] = (
        {"poolclass": StaticPool}
        if _is_memory(url)
        else {
            "poolclass": AsyncAdaptedQueuePool,
            "pool_size": pool_size,
            "max_overflow": max_overflow,
        }
    )
    engine = create_async_engine(
        url,
        echo=echo,
        json_serializer=serialization.dumps,
        json_deserializer=serialization.loads,
        # The group commit writes the batch ending a lone run on the event loop's
        # thread, between aiosqlite's calls, never during one (`app.store.journal`).
        connect_args={"check_same_thread": False},
        **options,
    )
    pragmas = sqlite_pragmas(wal_autocheckpoint)

    def apply_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(f"PRAGMA {pragma}")
        finally:
            cursor.close()

    event.listen(engine.sync_engine, "connect", apply_pragmas)
    _skip_idle_rollbacks(engine)
    return engine


def _skip_idle_rollbacks(engine: AsyncEngine) -> None:
    """Roll back only a connection that is in a transaction.

    SQLAlchemy rolls back every connection it gives back: a session's close,
    then the pool's reset. On SQLite each is a round trip to aiosqlite's thread
    (and a wait for the GIL there while the event loop is busy), although
    sqlite3 itself does nothing outside a transaction: the group-commit writer
    (which commits in the driver) paid two per batch, and every read one or
    two. `in_transaction` is read on the loop's thread; nothing else runs on
    the connection while SQLAlchemy ends its use. psycopg makes the same check
    itself, so PostgreSQL needs none.
    """
    dialect = engine.sync_engine.dialect
    rollback = dialect.do_rollback

    def do_rollback(dbapi_connection: Any) -> None:
        driver = getattr(dbapi_connection, "driver_connection", None)
        if isinstance(driver, aiosqlite.Connection):
            try:
                idle = not driver.in_transaction
            except (ValueError, sqlite3.Error):  # closed: SQLAlchemy's own rollback skips it
                idle = False
            if idle:
                return
        rollback(dbapi_connection)

    dialect.do_rollback = do_rollback  # type: ignore[method-assign]


def postgres_conninfo(url: str | URL) -> str | None:
    """A PostgreSQL URL as libpq's connection string, with the defaults the service's
    engines connect with (the writer process's connection); None for other URLs."""
    parsed = _parse(url)
    if not _is_postgres(parsed):
        return None
    plain = parsed.set(drivername="postgresql")
    defaults = {name: str(value) for name, value in _postgres_defaults(parsed).items()}
    return plain.update_query_dict(defaults).render_as_string(hide_password=False)


def _postgres_defaults(url: URL) -> dict[str, Any]:
    """Connection parameters the URL leaves out, as the service sets them."""
    defaults: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        defaults["connect_timeout"] = POSTGRES_CONNECT_TIMEOUT_S
    if "application_name" not in url.query:
        defaults["application_name"] = "toolloop"
    return defaults


def _postgres_engine(
    url: URL, *, pool_size: int, max_overflow: int, echo: bool, pre_ping: bool = True
) -> AsyncEngine:
    connect_args = _postgres_defaults(url)
    return create_async_engine(
        url,
        echo=echo,
        pool_pre_ping=pre_ping,
        pool_size=pool_size,
        max_overflow=max_overflow,
        connect_args=connect_args,
        json_serializer=serialization.dumps,
        json_deserializer=serialization.loads,
    )


def _parse(url: str | URL) -> URL:
    if isinstance(url, URL):
        return url
    try:
        return make_url(url)
    except (ArgumentError, ValueError):
        # The parser's message may quote the URL, password included.
        raise UnsupportedDatabaseURL(
            "cannot parse the database URL; expected DRIVER://USER@HOST:PORT/DATABASE"
        ) from None


def _is_sqlite(url: URL) -> bool:
    return url.drivername == "sqlite+aiosqlite"


def _is_postgres(url: URL) -> bool:
    # Explicit driver only: what a bare `postgresql://` means depends on the SQLAlchemy version.
    return url.drivername == "postgresql+psycopg"


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or _query_value(url, "mode") == "memory"


def _missing_sqlite_directory(url: URL) -> Path | None:
    """Checked before connecting: SQLite's own report ("unable to open database file") is vague."""
    if not _is_sqlite(url) or _is_memory(url) or _query_value(url, "uri") == "true":
        return None
    directory = Path(str(url.database)).parent
    return None if directory.is_dir() else directory


def _query_value(url: URL, key: str) -> str | None:
    value = url.query.get(key)
    if isinstance(value, tuple):
        return value[0] if value else None
    return value


def one_line_reason(exc: BaseException) -> str:
    """The first line of a driver's error: its message, without the SQL that follows."""
    cause = getattr(exc, "orig", None) or exc
    for line in str(cause).splitlines():
        if line.strip():
            return " ".join(line.split())
    return type(cause).__name__
