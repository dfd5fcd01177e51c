"""Revision 2b6f8d4e1a93: the usage ledger's index on `run_id`; both ways keep every row."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import func, inspect, select
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import create_session_factory
from app.store.migrate import alembic_config
from app.store.models import ModelUsage
from app.store.repositories.usage import UsageRepository
from tests.store.test_migrate import downgrade_to, schema_differences

BEFORE = "4d7b2e9a1c36"
INDEX = "ix_model_usage_run_id"


def upgrade_to_head(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def usage_indexes(connection: Connection) -> set[str | None]:
    return {index["name"] for index in inspect(connection).get_indexes("model_usage")}


def usage_row(run_id: str, input_tokens: int) -> dict[str, object]:
    at = datetime(2026, 12, 7, 19, 30, tzinfo=UTC)
    return {
        "at": at,
        "hour": at.replace(minute=0),
        "day": at.replace(hour=0, minute=0),
        "run_id": run_id,
        "owner": "team-a",
        "caller": "",
        "profile": "default",
        "role": "planner",
        "input_tokens": input_tokens,
        "output_tokens": 1,
        "cost_nanos": None,
    }


async def test_the_revision_adds_the_run_index_and_keeps_the_rows_both_ways(
    engine: AsyncEngine,
) -> None:
    async with create_session_factory(engine).begin() as session:
        usage = UsageRepository(session)
        await usage.add(usage_row("run-1", 3))
        await usage.add(usage_row("run-1", 4))

    async with engine.connect() as connection:
        assert INDEX in await connection.run_sync(usage_indexes)
        await connection.run_sync(downgrade_to(BEFORE))
        await connection.commit()
        assert INDEX not in await connection.run_sync(usage_indexes)
        assert await connection.scalar(select(func.count()).select_from(ModelUsage)) == 2

    async with engine.connect() as connection:
        await connection.run_sync(upgrade_to_head)
        await connection.commit()
        assert INDEX in await connection.run_sync(usage_indexes)
        assert await connection.run_sync(schema_differences) == []

    async with create_session_factory(engine)() as session:
        totals = await UsageRepository(session).run_totals("run-1")
    assert (totals.requests, totals.input_tokens) == (2, 7)
