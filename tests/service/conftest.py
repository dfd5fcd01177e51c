from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.writer_support import engine_with_a_run


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated database (SQLite and PostgreSQL) holding run `RUN_ID` (`tests.writer_support`)."""
    async with engine_with_a_run(database_url) as engine:
        yield engine
