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

from app.store.database import check_database, create_database_engine, database_target

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Serialises concurrent upgrades of one PostgreSQL database ("toolloop" as a bigint).
MIGRATION_LOCK_KEY = 8390047142280916848
# Foreign keys of the models that PostgreSQL keeps by triggers instead (revision
# e3b9a4c70d15): the models keep them, which SQLite's schema has.
KEPT_BY_TRIGGERS_ON_POSTGRESQL = frozenset({"fk_receipts_run_id_runs"})


class SchemaProblem(Exception):
    """The database's tables are not the ones this release works with (one line)."""


class SchemaNotCurrent(SchemaProblem):
    """The database was never migrated, or is at an earlier revision."""

    def __init__(self, target: str, revision: str | None, head: str) -> None:
        where = (
            "has no ToolLoop tables"
            if revision is None
            else f"is at migration {revision!r}, not {head!r}"
        )
        super().__init__(f"database at {target} {where}: run `toolloop db upgrade` first")


class UnknownMigration(SchemaProblem):
    """The database is at a revision this release's tree does not hold (another
    release migrated it); no migration can be applied from there."""

    def __init__(self, target: str, revision: str) -> None:
        super().__init__(
            f"database at {target} is at migration {revision!r}, which this toolloop "
            "does not know: it was migrated by another release"
        )


async def require_current_schema(engine: AsyncEngine) -> None:
    """Raise a `SchemaProblem` unless the database is at the latest revision; for
    commands that read the database and must not migrate it."""
    revision = await database_revision(engine)
    head = head_revision()
    if revision == head:
        return
    target = database_target(engine.url)
    if revision is not None and not _known(revision):
        raise UnknownMigration(target, revision)
    raise SchemaNotCurrent(target, revision, head)


async def upgrade_database(url: str) -> None:
    """Bring the database at `url` to the latest revision; a no-op when already there.

    Raises `DatabaseUnavailable` (one line) when the database cannot be reached,
    `UnknownMigration` when another release migrated it.
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
    revision = _current_revision(connection)
    if revision is not None and not _known(revision):
        raise UnknownMigration(database_target(connection.engine.url), revision)
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _known(revision: str) -> bool:
    scripts = ScriptDirectory.from_config(alembic_config())
    return any(script.revision == revision for script in scripts.walk_revisions())
