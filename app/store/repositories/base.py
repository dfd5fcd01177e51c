"""What every repository shares: the caller's session and dialect-aware statements.

Repositories compose and execute statements and may flush; they never commit.
The caller owns the transaction.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import CursorResult, Result
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.models import Base

DialectInsert = sqlite.Insert | postgresql.Insert


class Repository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def dialect_insert(self, model: type[Base]) -> DialectInsert:
        """An INSERT that supports ON CONFLICT on SQLite and PostgreSQL."""
        name = self.session.get_bind().dialect.name
        if name == "sqlite":
            return sqlite.insert(model)
        if name == "postgresql":
            return postgresql.insert(model)
        raise NotImplementedError(f"ON CONFLICT is not supported on {name}")


def rowcount(result: Result[Any]) -> int:
    return cast(CursorResult[Any], result).rowcount
