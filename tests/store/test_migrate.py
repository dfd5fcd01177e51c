from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import DatabaseUnavailable, create_database_engine
from app.store.migrate import alembic_config, database_revision, head_revision, upgrade_database
from app.store.models import Base

TABLES = {
    "alembic_version",
    "audit_events",
    "cache_entries",
    "contract_snapshots",
    "idempotency_keys",
    "receipts",
    "router_checkpoints",
    "router_confirmations",
    "runs",
    "service_instances",
}


def schema_differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def table_names(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def test_upgrade_creates_every_table_and_is_idempotent(database_url: str) -> None:
    await upgrade_database(database_url)
    await upgrade_database(database_url)

    engine = create_database_engine(database_url)
    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(table_names) == TABLES
        assert await database_revision(engine) == head_revision()
    finally:
        await engine.dispose()


async def test_models_and_migrations_agree(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        assert await connection.run_sync(schema_differences) == []


async def test_the_agreement_check_sees_drift(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        await connection.execute(text("DROP INDEX ix_receipts_status_created_at_id"))
        differences = await connection.run_sync(schema_differences)
    assert [(kind, index.name) for kind, index in differences] == [
        ("add_index", "ix_receipts_status_created_at_id")
    ]


def downgrade_to_base(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, "base")


async def test_downgrade_removes_everything_and_upgrade_restores_it(
    engine: AsyncEngine, database_url: str
) -> None:
    async with engine.connect() as connection:
        await connection.run_sync(downgrade_to_base)
        await connection.commit()
        assert await connection.run_sync(table_names) == {"alembic_version"}

    await upgrade_database(database_url)

    async with engine.connect() as connection:
        assert await connection.run_sync(table_names) == TABLES
        assert await connection.run_sync(schema_differences) == []


async def test_upgrade_of_an_unreachable_database_fails_with_one_line(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'toolloop.db'}"
    with pytest.raises(DatabaseUnavailable, match=r"^database unavailable at .*missing"):
        await upgrade_database(url)
