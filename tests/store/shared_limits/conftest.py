from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest

from app.store.database import database_target, postgres_conninfo
from app.store.migrate import upgrade_database
from app.store.notices import PostgresNotices
from app.store.shared_limits import PostgresSharedLimits
from app.store.shared_limits.keys import NAMESPACE

pytestmark = pytest.mark.postgres


@pytest.fixture
async def conninfo(postgres_url: str) -> str:
    await upgrade_database(postgres_url)
    info = postgres_conninfo(postgres_url)
    assert info is not None
    return info


@pytest.fixture
async def open_limits(conninfo: str, postgres_url: str) -> AsyncIterator[Callable[..., Any]]:
    """Opens a `PostgresSharedLimits` as one process of the service would: two of
    them are two processes' worth of connections."""
    opened: list[tuple[PostgresSharedLimits, PostgresNotices]] = []

    async def open_one(poll_s: float = 30.0, **options: Any) -> PostgresSharedLimits:
        notices = PostgresNotices(conninfo)
        limits = PostgresSharedLimits(
            conninfo, database_target(postgres_url), notices, poll_s=poll_s, **options
        )
        opened.append((limits, notices))
        await limits.start()
        return limits

    yield open_one
    for limits, notices in opened:
        await limits.aclose()
        await notices.aclose()


@pytest.fixture
def advisory_locks(conninfo: str) -> Iterator[Callable[[], int]]:
    """How many of the service's advisory locks the server holds now on this test's
    database, all sessions (other databases on the server are other tests')."""
    with psycopg.connect(conninfo, autocommit=True) as conn:

        def count() -> int:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                " AND classid = %s::oid AND granted AND database ="
                " (SELECT oid FROM pg_database WHERE datname = current_database())",
                (NAMESPACE,),
            ).fetchone()
            assert row is not None
            return int(row[0])

        yield count
