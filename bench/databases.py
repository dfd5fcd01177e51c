"""The two databases the benchmarks write to: an SQLite file and a PostgreSQL database.

PostgreSQL is `BENCH_POSTGRES_URL` (default: database `toolloop_bench` on
127.0.0.1 as user postgres), created if missing and dropped afterwards; when
the server cannot be reached the PostgreSQL figures are skipped, and say so.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.store.migrate import upgrade_database

POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/toolloop_bench"
)


@asynccontextmanager
async def sqlite_database() -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory(prefix="toolloop-bench-") as directory:
        url = f"sqlite+aiosqlite:///{Path(directory) / 'bench.db'}"
        await upgrade_database(url)
        yield url


@asynccontextmanager
async def postgres_database(name: str | None = None) -> AsyncIterator[str]:
    """A fresh database (`name`, else the URL's); raises OSError-like errors when the
    server is unreachable."""
    url = make_url(POSTGRES_URL)
    name = name or url.database or "toolloop_bench"
    url = url.set(database=name)
    admin = create_async_engine(
        url.set(database="postgres"),
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": 5},
    )
    try:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            await connection.execute(text(f'CREATE DATABASE "{name}"'))
        rendered = url.render_as_string(hide_password=False)
        await upgrade_database(rendered)
        yield rendered
    finally:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


async def postgres_available() -> str | None:
    """None when the PostgreSQL server answers; otherwise why not."""
    url = make_url(POSTGRES_URL).set(database="postgres")
    probe = create_async_engine(url, connect_args={"connect_timeout": 5})
    try:
        async with probe.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:  # any failure to connect means: skip PostgreSQL
        return f"PostgreSQL at {url.host}:{url.port} unavailable: {type(exc).__name__}"
    finally:
        await probe.dispose()
    return None
