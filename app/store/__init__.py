"""Persistence: engines, models, migrations and repositories (SQLite and PostgreSQL).

Other layers reach the database only through `app.store.repositories`.
"""

from app.store.database import (
    DatabaseUnavailable,
    UnsupportedDatabaseURL,
    check_database,
    create_database_engine,
    create_session_factory,
    database_target,
    display_url,
)
from app.store.migrate import upgrade_database

__all__ = [
    "DatabaseUnavailable",
    "UnsupportedDatabaseURL",
    "check_database",
    "create_database_engine",
    "create_session_factory",
    "database_target",
    "display_url",
    "upgrade_database",
]
