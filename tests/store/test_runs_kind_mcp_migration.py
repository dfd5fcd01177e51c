"""Revision b8d2e6a41f07: runs of kind `mcp`; the rebuilt table keeps every row."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import func, insert, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import create_session_factory
from app.store.migrate import alembic_config
from app.store.models import Receipt, Run
from tests.store.factories import create_run, receipt_row
from tests.store.test_migrate import downgrade_to, schema_differences

BEFORE = "7f2a9c4e1b63"


def upgrade_to_head(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


async def test_a_run_of_kind_mcp_is_stored(engine: AsyncEngine) -> None:
    async with create_session_factory(engine).begin() as session:
        await create_run(session, "run-mcp", kind="mcp")
    async with engine.connect() as connection:
        kind = await connection.scalar(select(Run.kind).where(Run.id == "run-mcp"))
    assert kind == "mcp"


async def test_another_kind_is_still_refused(engine: AsyncEngine) -> None:
    with pytest.raises(IntegrityError):
        async with create_session_factory(engine).begin() as session:
            await create_run(session, "run-x", kind="remote")


async def test_the_revision_keeps_runs_and_their_receipts_both_ways(engine: AsyncEngine) -> None:
    async with create_session_factory(engine).begin() as session:
        await create_run(session, "run-1")
        await session.execute(insert(Receipt), [receipt_row("run-1", 0), receipt_row("run-1", 1)])

    async with engine.connect() as connection:
        await connection.run_sync(downgrade_to(BEFORE))
        await connection.commit()
        assert await connection.scalar(select(func.count()).select_from(Receipt)) == 2
        with pytest.raises(IntegrityError):
            await connection.execute(text("UPDATE runs SET kind = 'mcp' WHERE id = 'run-1'"))
        await connection.rollback()

    async with engine.connect() as connection:
        await connection.run_sync(upgrade_to_head)
        await connection.commit()

    async with create_session_factory(engine).begin() as session:
        await create_run(session, "run-mcp", kind="mcp")
    async with engine.connect() as connection:
        assert await connection.scalar(select(func.count()).select_from(Receipt)) == 2
        assert await connection.run_sync(schema_differences) == []
