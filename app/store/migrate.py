"""Apply the Alembic tree (`app/store/migrations/`, shipped inside the package) programmatically."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import check_database, create_database_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Serialises concurrent upgrades of one PostgreSQL database ("toolloop" as a bigint).
MIGRATION_LOCK_KEY = 8390047142280916848
# Foreign keys of the models that PostgreSQL keeps by triggers instead (revision
# e3b9a4c70d15): the models keep them, which SQLite's schema has.
KEPT_BY_TRIGGERS_ON_POSTGRESQL = frozenset({"fk_receipts_run_id_runs"})


async def upgrade_database(url: str) -> None:
    """Bring the database at `url` to the latest revision; a no-op when already there.

    Raises `DatabaseUnavailable` (one line) when the database cannot be reached.
    """
    engine = create_database_engine(url, pool_size=1, max_overflow=0)
    try:
        await check_database(engine)
        async with engine.connect() as connection:
            if connection.dialect.name == "postgresql":
                await connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            await connection.run_sync(_upgrade_to_head)
            await connection.commit()
    finally:
        await engine.dispose()


async def database_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    async with engine.connect() as connection:
        return await connection.run_sync(_current_revision)


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no Alembic revision found in {MIGRATIONS_DIR}")
    return head


def compared_objects(dialect: str) -> Callable[..., bool]:
    """Alembic's `include_object` for comparing the models with a database of
    `dialect`: everything but what that database keeps otherwise."""

    def compared(item: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
        return not (
            dialect == "postgresql"
            and kind == "foreign_key_constraint"
            and name in KEPT_BY_TRIGGERS_ON_POSTGRESQL
        )

    return compared


def alembic_config() -> Config:
    """A config built in code: no alembic.ini, so the app's logging is left alone."""
    if not (MIGRATIONS_DIR / "env.py").is_file():
        raise FileNotFoundError(f"the Alembic tree is missing: {MIGRATIONS_DIR}/env.py")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def _upgrade_to_head(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()
