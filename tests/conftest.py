"""Database fixtures shared by every test package.

SQLite runs always. PostgreSQL runs when TOOLLOOP_TEST_POSTGRES_URL is set
(`.ci/run` sets it); otherwise those tests skip and say why.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

pytest_plugins = ["tests.support.fixtures"]

POSTGRES_ENV = "TOOLLOOP_TEST_POSTGRES_URL"
POSTGRES_SKIP_REASON = (
    f"PostgreSQL tests need {POSTGRES_ENV}, e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolloop.db'}"


def _scratch_postgres_database() -> Iterator[str]:
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        if os.environ.get("TOOLLOOP_REQUIRE_POSTGRES"):
            pytest.fail(f"TOOLLOOP_REQUIRE_POSTGRES is set: {POSTGRES_SKIP_REASON}")
        pytest.skip(POSTGRES_SKIP_REASON)
    import psycopg

    url = make_url(base)
    name = f"toolloop_t_{uuid.uuid4().hex[:12]}"
    admin_dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    yield from _scratch_postgres_database()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Runs the test once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'toolloop.db'}"
    else:
        yield from _scratch_postgres_database()
