from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import DatabaseUnavailable, create_database_engine
from app.store.migrate import (
    alembic_config,
    compared_objects,
    database_revision,
    head_revision,
    upgrade_database,
)
from app.store.models import Base, ContractSnapshot
from app.store.types import utc_now

TABLES = {
    "alembic_version",
    "audit_events",
    "cache_entries",
    "chain_checkpoints",
    "contract_snapshots",
    "idempotency_keys",
    "model_usage",
    "receipts",
    "router_checkpoints",
    "router_confirmations",
    "router_exact_state",
    "router_recordings",
    "runs",
    "service_instances",
    "tool_buckets",
}


def schema_differences(connection: Connection) -> list[Any]:
    """The models against the database, less what the database keeps otherwise."""
    return every_schema_difference(connection, compared_objects(connection.dialect.name))


def every_schema_difference(
    connection: Connection, include: Callable[..., bool] | None = None
) -> list[Any]:
    opts: dict[str, Any] = {"compare_type": True}
    if include is not None:
        opts["include_object"] = include
    context = MigrationContext.configure(connection, opts=opts)
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


def json_columns_compression(connection: Connection) -> dict[str, str]:
    """Each `json` column's compression method ('' for the server's default)."""
    rows = connection.execute(
        text(
            "SELECT c.relname || '.' || a.attname, a.attcompression FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
            "AND a.atttypid = 'json'::regtype AND a.attnum > 0 AND NOT a.attisdropped"
        )
    )
    return {str(name): str(method) for name, method in rows.all()}


def downgrade_to(revision: str) -> Callable[[Connection], None]:
    def downgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    return downgrade


async def test_json_columns_compress_with_lz4_on_postgresql(postgres_url: str) -> None:
    await upgrade_database(postgres_url)
    engine = create_database_engine(postgres_url)
    try:
        async with engine.connect() as connection:
            methods = await connection.scalar(
                text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
            )
            if methods is None or "lz4" not in methods:
                pytest.skip(
                    "this PostgreSQL server has no lz4 (version 14 and later, built with it)"
                )
            compressed = await connection.run_sync(json_columns_compression)
            # with runs.context (revision 01b0481bfb3f), router_recordings (6e1a9d3f5b27)
            # chain_checkpoints.runs (8c3f1a6e2d47) and router_exact_state (4d7b2e9a1c36)
            assert len(compressed) == 16
            assert {"runs.context", "router_recordings.replies", "chain_checkpoints.runs"} <= set(
                compressed
            )
            assert set(compressed.values()) == {"l"}
            # A document over the out-of-line threshold is stored with lz4, and reads back.
            canonical = {"tools": [{"name": f"tool-{n}", "schema": "x" * 40} for n in range(500)]}
            await connection.execute(
                insert(ContractSnapshot).values(
                    hash="sha256:big", canonical=canonical, tool_count=500, created_at=utc_now()
                )
            )
            stored = await connection.execute(
                text(
                    "SELECT canonical, pg_column_compression(canonical) FROM contract_snapshots "
                    "WHERE hash = 'sha256:big'"
                )
            )
            assert stored.one() == (canonical, "lz4")
            await connection.commit()

            await connection.run_sync(downgrade_to("9d4e1f7a3c2b"))
            await connection.commit()
            assert set((await connection.run_sync(json_columns_compression)).values()) == {""}
            (document,) = (
                await connection.execute(
                    text("SELECT canonical FROM contract_snapshots WHERE hash = 'sha256:big'")
                )
            ).one()
            assert document == canonical
    finally:
        await engine.dispose()
    await upgrade_database(postgres_url)
    engine = create_database_engine(postgres_url)
    try:
        async with engine.connect() as connection:
            assert set((await connection.run_sync(json_columns_compression)).values()) == {"l"}
    finally:
        await engine.dispose()


def offline_scripts(
    url: str, before: str, revision: str, capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    """The scripts `alembic upgrade --sql` and `downgrade --sql` write for `revision`
    on `url`'s database, which is never asked."""
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", url)
    command.upgrade(config, f"{before}:{revision}", sql=True)
    upgrade = capsys.readouterr().out
    command.downgrade(config, f"{revision}:{before}", sql=True)
    return upgrade, capsys.readouterr().out


@pytest.mark.parametrize(
    ("url", "statements"),
    [("postgresql+psycopg://postgres@127.0.0.1:5432/unasked", 10), ("sqlite:///unasked.db", 0)],
)
def test_the_lz4_revision_writes_its_statements_offline(
    url: str, statements: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """`alembic upgrade --sql` asks no server: on PostgreSQL the script sets lz4."""
    upgrade, downgrade = offline_scripts(url, "9d4e1f7a3c2b", "c41e7b2d9a05", capsys)
    assert upgrade.count("SET COMPRESSION lz4;") == statements
    assert downgrade.count("SET COMPRESSION default;") == statements
