from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.journal.sqlite.process import SqliteWriterProcess
from tests.writer_support import engine_with_a_run, started_writer_process


@pytest.fixture
async def run_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated database (SQLite and PostgreSQL) holding run `RUN_ID` (`tests.writer_support`)."""
    async with engine_with_a_run(database_url) as engine:
        yield engine


@pytest.fixture(params=["in process", "writer process"])
async def through(
    request: pytest.FixtureRequest, database_url: str, run_engine: AsyncEngine
) -> AsyncIterator[dict[str, Any]]:
    """The writer's options for each way its batches go: on the service's own
    connection, or to the database's writer process (with `run_engine`, so the
    backends are SQLite and PostgreSQL, each in process and through its process)."""
    if request.param == "in process":
        yield {}
        return
    async with started_writer_process(database_url) as process:
        if isinstance(process, SqliteWriterProcess):
            yield {"sqlite_process": process}
        else:
            yield {"postgres_process": process}


@pytest.fixture
async def postgres_run_engine(postgres_url: str) -> AsyncIterator[AsyncEngine]:
    """As `run_engine`, on PostgreSQL only."""
    async with engine_with_a_run(postgres_url) as engine:
        yield engine
