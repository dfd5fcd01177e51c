from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from app.store.database import (
    DatabaseUnavailable,
    UnsupportedDatabaseURL,
    check_database,
    create_database_engine,
    create_session_factory,
    create_writer_engine,
    database_target,
    display_url,
    postgres_conninfo,
    sqlite_file,
)


async def test_sqlite_connections_get_the_pragmas(sqlite_url: str) -> None:
    engine = create_database_engine(sqlite_url)
    try:
        async with engine.connect() as connection:
            values = {
                name: (await connection.execute(text(f"PRAGMA {name}"))).scalar_one()
                for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
            }
    finally:
        await engine.dispose()
    assert values == {
        "journal_mode": "wal",
        "synchronous": 1,
        "busy_timeout": 5000,
        "foreign_keys": 1,
    }


async def _autocheckpoint(engine: AsyncEngine) -> int:
    try:
        async with engine.connect() as connection:
            pages: int = (await connection.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
    finally:
        await engine.dispose()
    return pages


async def test_sqlite_checkpoints_in_commits_past_the_bound_it_is_given(sqlite_url: str) -> None:
    assert await _autocheckpoint(create_database_engine(sqlite_url)) == 1000  # SQLite's own
    raised = create_database_engine(sqlite_url, sqlite_wal_autocheckpoint=20_000)
    assert await _autocheckpoint(raised) == 20_000


def test_sqlite_file_names_the_database_file_of_file_urls_only(tmp_path: Path) -> None:
    assert sqlite_file(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") == tmp_path / "a.db"
    assert sqlite_file("sqlite+aiosqlite://") is None
    assert sqlite_file("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_file("sqlite+aiosqlite:///file:x?mode=memory&uri=true") is None
    assert sqlite_file("sqlite+aiosqlite:///file:x.db?uri=true") is None
    assert sqlite_file("postgresql+psycopg://postgres@127.0.0.1/test") is None


async def test_sqlite_binds_none_through_a_registered_adapter_as_null(sqlite_url: str) -> None:
    engine = create_database_engine(sqlite_url)
    try:
        async with engine.connect() as connection:
            is_null = (await connection.execute(text("SELECT :v IS NULL"), {"v": None})).scalar()
    finally:
        await engine.dispose()
    # Found in the registry, sqlite3 skips its two failed attribute lookups per NULL.
    assert (type(None), sqlite3.PrepareProtocol) in sqlite3.adapters
    assert is_null == 1


async def test_check_database_passes_on_a_live_database(database_url: str) -> None:
    engine = create_database_engine(database_url)
    try:
        await check_database(engine)
    finally:
        await engine.dispose()


async def test_unreachable_postgres_fails_with_one_line_naming_host_and_reason() -> None:
    engine = create_database_engine("postgresql+psycopg://postgres:secret@127.0.0.1:1/x")
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            await check_database(engine)
    finally:
        await engine.dispose()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("database unavailable at 127.0.0.1:1/x: ")
    assert "refused" in caught.value.reason.lower()
    assert "secret" not in message


@pytest.fixture
async def silent_server() -> AsyncIterator[int]:
    """A TCP port that accepts connections and never answers."""
    writers: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    for writer in writers:
        writer.close()
    server.close()
    await server.wait_closed()


async def test_a_database_that_never_answers_fails_after_the_timeout(silent_server: int) -> None:
    engine = create_database_engine(f"postgresql+psycopg://postgres@127.0.0.1:{silent_server}/x")
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            await check_database(engine, timeout_s=0.2)
    finally:
        await engine.dispose()
    assert str(caught.value) == (
        f"database unavailable at 127.0.0.1:{silent_server}/x: no answer within 0.2 s"
    )


async def test_sqlite_file_in_a_missing_directory_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "toolloop.db"
    engine = create_database_engine(f"sqlite+aiosqlite:///{path}")
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            await check_database(engine)
    finally:
        await engine.dispose()
    assert str(caught.value) == (
        f"database unavailable at {path}: directory {path.parent} does not exist"
    )


async def test_in_memory_sqlite_works() -> None:
    engine = create_database_engine("sqlite+aiosqlite://")
    try:
        await check_database(engine)
    finally:
        await engine.dispose()
    assert database_target(engine.url) == ":memory:"


def test_the_postgres_conninfo_is_the_url_for_libpq_with_the_service_s_defaults() -> None:
    conninfo = postgres_conninfo("postgresql+psycopg://app:s%40cret@db.example:5433/tl")
    assert conninfo is not None
    parsed = psycopg.conninfo.conninfo_to_dict(conninfo)
    assert parsed == {
        "user": "app",
        "password": "s@cret",
        "host": "db.example",
        "port": "5433",
        "dbname": "tl",
        "connect_timeout": "5",
        "application_name": "toolloop",
    }


def test_the_postgres_conninfo_keeps_what_the_url_sets() -> None:
    url = (
        "postgresql+psycopg://app@/tl?host=/run/postgresql&application_name=mine"
        "&connect_timeout=9&options=-csearch_path%3Dother"
    )
    conninfo = postgres_conninfo(url)
    assert conninfo is not None
    parsed = psycopg.conninfo.conninfo_to_dict(conninfo)
    assert parsed["host"] == "/run/postgresql"
    assert (parsed["application_name"], parsed["connect_timeout"]) == ("mine", "9")
    assert parsed["options"] == "-csearch_path=other"


def test_there_is_no_postgres_conninfo_for_sqlite(sqlite_url: str) -> None:
    assert postgres_conninfo(sqlite_url) is None


def test_display_url_hides_passwords() -> None:
    shown = display_url("postgresql+psycopg://me:secret@db.internal:6432/tl?password=other")
    assert shown == "postgresql+psycopg://me:***@db.internal:6432/tl"


def test_database_target_names_host_port_and_database() -> None:
    assert database_target("postgresql+psycopg://me:secret@db.internal/tl") == "db.internal:5432/tl"
    assert database_target("sqlite+aiosqlite:////var/lib/toolloop.db") == "/var/lib/toolloop.db"


@pytest.mark.parametrize(
    "url",
    [
        "mysql+aiomysql://me:secret@host/db",
        "postgresql://me:secret@host/db",
        "sqlite:///toolloop.db",
        "not a url",
        "postgresql+psycopg://me:secret@host:port/db",
    ],
)
def test_unsupported_urls_are_refused_without_echoing_the_password(url: str) -> None:
    with pytest.raises(UnsupportedDatabaseURL) as caught:
        create_database_engine(url)
    assert "secret" not in str(caught.value)


async def test_the_writer_shares_sqlites_one_connection(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolloop.db'}"
    shared = create_database_engine(url)
    try:
        assert create_writer_engine(url, shared) is shared
    finally:
        await shared.dispose()


@pytest.mark.postgres
async def test_the_writer_has_one_unpinged_postgresql_connection_of_its_own(
    postgres_url: str,
) -> None:
    shared = create_database_engine(postgres_url)
    writer = create_writer_engine(postgres_url, shared)
    try:
        assert writer is not shared
        assert writer.url == shared.url
        pool = writer.pool
        assert isinstance(pool, AsyncAdaptedQueuePool)
        assert (pool.size(), pool._max_overflow, pool._pre_ping) == (1, 0, False)
        assert shared.pool._pre_ping  # type: ignore[attr-defined]
        async with writer.connect() as connection:
            assert (await connection.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await writer.dispose()
        await shared.dispose()


@pytest.fixture
async def sqlite_engine(sqlite_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_database_engine(sqlite_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def sqlite_rollbacks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each rollback sent to aiosqlite's thread, recorded as whether it had a transaction."""
    sent: list[bool] = []
    rollback = aiosqlite.Connection.rollback

    async def counted(self: aiosqlite.Connection) -> None:
        sent.append(self.in_transaction)
        await rollback(self)

    monkeypatch.setattr(aiosqlite.Connection, "rollback", counted)
    return sent


async def test_sqlite_sends_no_rollback_for_a_connection_outside_a_transaction(
    sqlite_engine: AsyncEngine, sqlite_rollbacks: list[bool]
) -> None:
    async with create_session_factory(sqlite_engine)() as session:
        # a read: the session's rollback and the pool's reset
        assert (await session.execute(text("SELECT 1"))).scalar() == 1
    async with sqlite_engine.connect() as connection:
        await connection.execute(text("CREATE TABLE t (v INTEGER)"))
        await connection.commit()
    assert sqlite_rollbacks == []


async def test_sqlite_still_rolls_back_what_was_not_committed(
    sqlite_engine: AsyncEngine, sqlite_rollbacks: list[bool]
) -> None:
    async with sqlite_engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (v INTEGER)"))
    async with create_session_factory(sqlite_engine)() as session:  # closed without a commit
        await session.execute(text("INSERT INTO t VALUES (1)"))
    async with sqlite_engine.connect() as connection:  # given back to the pool without one
        await connection.execute(text("INSERT INTO t VALUES (2)"))
    async with sqlite_engine.connect() as connection:
        count = (await connection.execute(text("SELECT count(*) FROM t"))).scalar()
    assert count == 0
    assert sqlite_rollbacks == [True, True]


async def test_sqlite_gives_back_a_closed_connection_without_an_error(
    sqlite_engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    async with sqlite_engine.connect() as connection:
        raw = await connection.get_raw_connection()
        await raw.driver_connection.close()
    assert "Exception during reset" not in caplog.text
