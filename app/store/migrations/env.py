"""Alembic environment: one tree for SQLite and PostgreSQL.

`app.store.migrate.upgrade_database` hands over an open connection in
`config.attributes["connection"]`. From the command line, the URL comes from
`-x url=...`, then the `sqlalchemy.url` option, then TOOLLOOP_DATABASE_URL.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig
from typing import Any

from alembic import context
from alembic.autogenerate.api import AutogenContext
from alembic.operations import MigrationScript
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection, make_url

from app.store.database import create_database_engine
from app.store.migrate import compared_objects
from app.store.models import Base
from app.store.types import UtcDateTime

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    url = (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("TOOLLOOP_DATABASE_URL")
    )
    if not url:
        raise RuntimeError(
            "no database URL: pass -x url=..., set sqlalchemy.url or TOOLLOOP_DATABASE_URL"
        )
    return url


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | bool:
    if type_ == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def skip_empty_revision(
    context: MigrationContext, revision: Any, directives: list[MigrationScript]
) -> None:
    if config.cmd_opts is not None and getattr(config.cmd_opts, "autogenerate", False):
        script = directives[0]
        if script.upgrade_ops is not None and script.upgrade_ops.is_empty():
            directives[:] = []


def configure(dialect: str, **options: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        compare_type=True,
        include_object=compared_objects(dialect),
        render_item=render_item,
        process_revision_directives=skip_empty_revision,
        **options,
    )


def run_migrations_offline() -> None:
    url = database_url()
    dialect = make_url(url).get_backend_name()
    configure(dialect, url=url, literal_binds=True, render_as_batch=dialect == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def run_migrations(connection: Connection) -> None:
    is_sqlite = connection.dialect.name == "sqlite"
    if is_sqlite:
        # Batch mode rebuilds a table by dropping it; with foreign keys on, that
        # drop would cascade into the child tables. The pragma is ignored inside
        # a transaction, so it comes first. The explicit BEGIN makes the DDL
        # transactional (the driver would otherwise run each statement alone).
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.exec_driver_sql("BEGIN")
    configure(connection.dialect.name, connection=connection, render_as_batch=is_sqlite)
    with context.begin_transaction():
        context.run_migrations()


async def run_migrations_async() -> None:
    engine = create_database_engine(database_url(), pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        asyncio.run(run_migrations_async())
    else:
        run_migrations(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
